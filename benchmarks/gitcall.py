#!/usr/bin/env python3
"""What running git through gitpython would cost: its import, and one call through
`git.Git.execute` against `subprocess.run`, interleaved in the same run (the figures
cortexfs/git.py's docstring quotes).

    python benchmarks/gitcall.py [--calls 40]

Import time is better read with `python -X importtime -c 'import git'` (min of several
runs); this prints the first import in this process as a cross-check.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="calls of each kind (40)")
    args = parser.parse_args()

    start = time.perf_counter()
    import git  # the measured import

    import_ms = (time.perf_counter() - start) * 1000
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@invalid",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@invalid", LC_ALL="C",
               GIT_TERMINAL_PROMPT="0")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        subprocess.run(["git", "init", "-q", str(home)], check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "0"], cwd=home, env=env,
                       check=True)
        wrapper = git.Git(str(home))

        def plain(argv: list[str]) -> None:
            subprocess.run(["git", *argv], cwd=home, env=env, capture_output=True, check=True)

        def gitpython(argv: list[str]) -> None:
            wrapper.execute(["git", *argv], env=env)

        ways: list[tuple[str, Callable[[list[str]], None]]] = [
            ("subprocess.run", plain), ("Git.execute", gitpython)]
        for what, argv in (("rev-parse HEAD", ["rev-parse", "HEAD"]),
                           ("commit --allow-empty", ["commit", "-q", "--allow-empty", "-m", "x"])):
            times: dict[str, list[float]] = {name: [] for name, _ in ways}
            for i in range(args.calls):
                for name, run in ways if i % 2 else ways[::-1]:  # alternate who goes first
                    began = time.perf_counter()
                    run(argv)
                    times[name].append((time.perf_counter() - began) * 1000)
            for name, spent in times.items():
                print(f"{what:22s} {name:15s} median {statistics.median(spent):6.2f} ms  "
                      f"min {min(spent):6.2f} ms  (n={args.calls})")
    print(f"import git (gitpython {git.__version__}), first import here: {import_ms:.1f} ms")
    print(f"load average: {os.getloadavg()[0]:.1f} (2 cores shared: figures are noisy)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
