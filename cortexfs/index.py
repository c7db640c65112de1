"""Index regeneration (`cortex index regen`): index.md per atom folder, refs folded from logs.

(Work in progress: the contract below — RegenContext, RegenResult, regenerate() — is
stable; generators listed in cortexfs.derived can be written against it now.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cortexfs.errors import AtomParseError

if TYPE_CHECKING:
    from cortexfs.accesslog import AccessStats
    from cortexfs.loader import LoadedProject
    from cortexfs.store import Store


@dataclass
class RegenResult:
    """What a regeneration wrote (or, in a dry run, would write)."""

    written: list[Path] = field(default_factory=list)  # every path written / that would change
    skipped: list[AtomParseError] = field(default_factory=list)  # malformed atoms, not indexed
    folded: list[Path] = field(default_factory=list)  # atoms whose refs / last-ref changed
    fold_errors: list[AtomParseError] = field(default_factory=list)  # refs not written back
    projects: list[str] = field(default_factory=list)  # the projects regenerated


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
    - `fingerprint(names)`: a short digest of every input of those projects (atom files,
      access logs, today's date) — equal fingerprints mean equal inputs, so a generator can
      store the fingerprint it rendered from and skip rendering next time.
    """

    store: Store
    now: dt.datetime
    dry_run: bool
    selected: list[str]
    projects: Mapping[str, LoadedProject]
    access: Mapping[str, AccessStats]

    def fingerprint(self, names: list[str] | None = None) -> str:
        """Digest of the inputs of `names` (default: every project)."""
        raise NotImplementedError  # filled in with the regenerator


class _Lazy(Mapping[str, object]):
    """A mapping over the store's project names whose values are computed on first use."""

    def __init__(self, names: list[str], make: object) -> None:
        self._names = names
        self._make = make
        self._values: dict[str, object] = {}

    def __getitem__(self, name: str) -> object:
        if name not in self._values:
            if name not in self._names:
                raise KeyError(name)
            self._values[name] = self._make(name)  # type: ignore[operator]
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def regenerate(store: Store, projects: list[str] | None = None, *, dry_run: bool = False,
               progress: bool = False) -> RegenResult:
    """Regenerate the indexes of `projects` (all when None) and the store-wide files."""
    raise NotImplementedError

