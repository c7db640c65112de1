#!/usr/bin/env python3
"""Frontmatter parsing per file, and what python-frontmatter costs on the general path.

    python benchmarks/parse.py STORE [--reps 5]

STORE is a cortex store (e.g. one made by `scripts/gen_corpus.py OUT --atoms 10000`); its
atom files are read into memory once, then parsed in this process, each figure the median
of --reps passes (min in brackets), in µs per file:
- parse:     `cortexfs.frontmatter.parse` as cortex runs it (the fast path, and the general
             path for what it refuses), with the share of files the fast path refuses;
- general:   every file's frontmatter through the general path (`load_yaml_mapping`:
             python-frontmatter's YAML handler with our bounded, duplicate-refusing loader);
- direct:    the same loads with `yaml.load` called directly instead of through the handler
             (what the general path cost before python-frontmatter did this work);
- import:    python-frontmatter's import in a process that has imported yaml and
             cortexfs.loader (ms, once per process that takes the general path).
The machine's load is printed: figures taken on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cortexfs import frontmatter as fm

ATOM_FILE = re.compile(r"^(?:EXP|K|PAT)-\d+.*\.md\Z")


def _texts(store: Path) -> list[tuple[str, str]]:
    out = []
    for folder, _dirs, names in os.walk(store / "context" / "projects"):
        if os.path.basename(folder) not in ("experiments", "knowledge", "patterns"):
            continue
        for name in sorted(names):
            if ATOM_FILE.match(name):
                path = os.path.join(folder, name)
                out.append((path, fm.decode(Path(path).read_bytes(), path)))
    return out


def _timed(reps: int, work: Callable[[], Any]) -> tuple[float, float]:
    times = []
    for _ in range(reps):
        fm._MEMO.clear()  # (the fast path remembers values: start each pass cold)
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


IMPORT = """
import time, yaml, cortexfs.loader  # what a process that parses has imported anyway
t0 = time.perf_counter()
import frontmatter.default_handlers
print(time.perf_counter() - t0)
"""


def _import_ms(reps: int) -> tuple[float, float]:
    """python-frontmatter's import, in fresh processes (ms)."""
    times = [float(subprocess.run([sys.executable, "-c", IMPORT], check=True, text=True,
                                  capture_output=True).stdout) * 1000 for _ in range(reps)]
    return statistics.median(times), min(times)


class _Direct:
    """The handler's load, without the handler: yaml.load with the given loader."""

    def load(self, text: str, Loader: Any) -> Any:  # noqa: N803 - as the handler names it
        import yaml

        return yaml.load(text, Loader=Loader)  # noqa: S506 - our safe loaders only


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    texts = _texts(args.store)
    if not texts:
        parser.error(f"no atom files under {args.store}/context/projects")
    n = len(texts)
    heads = []
    for path, text in texts:
        span = fm.locate(text, path)
        heads.append((path, text[span.fm_start:span.fm_end]))
    general = sum(fm.fast_mapping(head) is None for _path, head in heads)
    print(f"load average {os.getloadavg()[0]:.2f}; {n:,} atom files, {general:,} "
          f"({general / n:.1%}) refused by the fast path")

    def parse_all() -> None:
        for path, text in texts:
            fm.parse(text, path)

    def general_all() -> None:
        for path, head in heads:
            fm.load_yaml_mapping(head, path, 2)

    fm.load_yaml_mapping("a: 1\n", "<warm-up>", 2)  # the imports, once
    rows = [("parse", _timed(args.reps, parse_all))]
    handlers = {"general": fm._HANDLER[:], "direct": [_Direct()]}
    times: dict[str, list[tuple[float, float]]] = {"general": [], "direct": []}
    for _ in range(args.reps):  # alternating, so that the machine's load drifts on both
        for name, handler in handlers.items():
            fm._HANDLER[:] = handler
            times[name].append(_timed(1, general_all))
    fm._HANDLER[:] = handlers["general"]
    rows += [(name, (statistics.median(t[0] for t in found), min(t[1] for t in found)))
             for name, found in times.items()]
    for name, (median, low) in rows:
        print(f"{name:8} {median / n * 1e6:8.1f} µs/file  [{low / n * 1e6:.1f}]  "
              f"({median:.3f} s for all)")
    cost = _import_ms(args.reps * 4)
    print(f"import   {cost[0]:8.1f} ms  [{cost[1]:.1f}]  python-frontmatter, once per process "
          "that takes the general path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
