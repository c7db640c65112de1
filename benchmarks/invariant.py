#!/usr/bin/env python3
"""The store's invariant under random use, run longer than the suite does.

    python benchmarks/invariant.py [--examples 20] [--steps 30] [--seed N]

Runs the state machine of tests/test_invariant.py (real `cortex` processes, real git, the
real hook, SIGINT / SIGTERM / SIGKILL at random moments) with fresh random sequences (or
--seed's), and prints what it did: sequences, steps, commands completed, interruptions by
signal and outcome, hook reads, invariant checks, and whether any check failed (hypothesis
then prints the failing sequence, shrunk). The machine is shared: the wall time is noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=20, help="random sequences")
    parser.add_argument("--steps", type=int, default=30, help="steps per sequence (at most)")
    parser.add_argument("--seed", type=int, default=None, help="fixed seed (default: random)")
    args = parser.parse_args(argv)
    import test_invariant
    from hypothesis import Phase, seed, settings
    from hypothesis.stateful import run_state_machine_as_test

    machine = test_invariant.CortexMachine
    config = settings(max_examples=args.examples, stateful_step_count=args.steps,
                      deadline=None, database=None,
                      # no shrinking: real processes and signals do not replay exactly
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(__import__("hypothesis").HealthCheck))
    started = time.perf_counter()
    load = os.getloadavg()[0]
    failed = None
    try:
        test = lambda: run_state_machine_as_test(machine, settings=config)  # noqa: E731
        (seed(args.seed)(test) if args.seed is not None else test)()
    except BaseException as e:  # hypothesis has printed the failing sequence
        import traceback

        traceback.print_exc()
        failed = e
    wall = time.perf_counter() - started
    print(f"\ninvariant state machine: {args.examples} sequences of up to {args.steps} steps, "
          f"seed {args.seed if args.seed is not None else 'random'}")
    print(f"cores: {os.cpu_count()}; load average before {load:.2f}, after "
          f"{os.getloadavg()[0]:.2f} (a shared machine)")
    for what, n in sorted(machine.stats.items()):
        print(f"  {what:<40} {n:>6}")
    print(f"  {'wall time (s)':<40} {wall:>6.0f}")
    print("result: " + ("FAILED — " + str(failed).splitlines()[0] if failed else
                        "every check held"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
