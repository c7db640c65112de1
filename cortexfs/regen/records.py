"""What a regeneration hands over: its result to the caller, its context to the generators."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cortexfs.accesslog import AccessStats
from cortexfs.errors import AtomParseError
from cortexfs.loader import LoadedProject

if TYPE_CHECKING:
    from cortexfs.atoms import Atom
    from cortexfs.store import Store


@dataclass
class RegenResult:
    """What a regeneration wrote (or, in a dry run, would write)."""

    written: list[Path] = field(default_factory=list)  # every path written / that would change
    skipped: list[AtomParseError] = field(default_factory=list)  # malformed atoms, not indexed
    folded: list[Path] = field(default_factory=list)  # atoms whose refs / last-ref changed
    fold_errors: list[AtomParseError] = field(default_factory=list)  # refs not written back
    # indexed, but with a value the index cannot use (a `date` that is no date: undated)
    dubious: list[AtomParseError] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)  # the projects regenerated
    drained: int = 0  # bytes of reads set aside during a sync, appended to the logs first
    _seen: set[Path] = field(default_factory=set, repr=False, compare=False)

    def add(self, path: Path) -> None:
        """Add `path` to `written` once (a first fold can write thousands of atoms)."""
        if path not in self._seen:
            self._seen.add(path)
            self.written.append(path)


@dataclass
class RegenContext:
    """What every derived generator (cortexfs.derived.GENERATORS) is called with.

    A generator is `fn(ctx: RegenContext, dry_run: bool) -> list[Path]`: it writes its files
    (or, when `dry_run`, writes nothing) and returns the paths that changed (would change).

    - `store`: the store.
    - `now`: the one clock of this run (timezone-aware UTC); use it instead of reading the
      time yourself so that every file of a run agrees.
    - `dry_run`: the same flag the generator receives.
    - `selected`: names of the projects this run regenerates (all of them for `--all`).
    - `projects`: name → LoadedProject for EVERY project of the store (not only the selected
      ones: store-wide files must not lose the others). Loaded lazily from the atom cache on
      first access. Atoms carry no body (`atom.body == ""`): read `atom.path` if you need
      it. Their `refs` / `last-ref` are the folded values (frontmatter and access log
      combined), also in a dry run. Treat them as read-only.
    - `access`: name → AccessStats (cortexfs.accesslog) folded from each project's
      `_meta/access-log.jsonl`, for every project, lazily.
    - `fingerprint(names, dated=True)`: a short digest of every input of those projects
      (atom files, access logs, this code and, unless `dated` is False, today's date: an
      index.md lists the atoms cold as of today) — equal fingerprints mean equal inputs,
      so a generator can store the fingerprint it rendered from and skip rendering next
      time. What does not depend on the date should use `dated=False`, or it would be
      rebuilt every morning.

    A regeneration that changes nothing must stay fast (10,000 atoms: 0.25 s for the whole
    `cortex` process): a generator should compare `fingerprint()` with the one it last
    rendered from before it touches `projects`.
    """

    store: Store
    now: dt.datetime
    dry_run: bool
    selected: list[str]
    projects: Mapping[str, LoadedProject]
    access: Mapping[str, AccessStats]
    _fingerprint: Callable[[list[str], bool], str] = field(
        repr=False, default=lambda names, dated: "")
    _added: Callable[[str, str, int], Atom | None] = field(
        repr=False, default=lambda name, before, since: None)

    def fingerprint(self, names: list[str] | None = None, *, dated: bool = True) -> str:
        """Digest of the inputs of `names` (default: every project)."""
        return self._fingerprint(list(self.projects) if names is None else list(names), dated)

    def added(self, name: str, before: str, cached: Path) -> Atom | None:
        """The one atom project `name` has more than when `fingerprint([name], dated=False)`
        was `before`, all else equal, at the time the cache file `cached` was written (a
        file no newer is not tried); None when no such atom explains the difference (or
        `cached` is gone). Lets a generator add one atom to what it cached then."""
        try:
            since = os.stat(cached).st_mtime_ns
        except OSError:
            return None
        return self._added(name, before, since)


V = TypeVar("V")


class Lazy(Mapping[str, V]):
    """A mapping over the store's project names whose values are computed on first use."""

    def __init__(self, names: list[str], make: Callable[[str], V]) -> None:
        self._names = names
        self._make = make
        self._values: dict[str, V] = {}

    def __getitem__(self, name: str) -> V:
        if name not in self._values:
            if name not in self._names:
                raise KeyError(name)
            self._values[name] = self._make(name)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names  # (Mapping's would compute the value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
