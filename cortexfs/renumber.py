"""Id collisions between two machines, and renumbering the local atom.

Two machines that both ran `cortex new` since their last sync can both have written
`EXP-043`. Before the histories are merged, the local atom gets the next id free on both
sides; its file is renamed and every reference to it that the local side wrote since the
merge base is rewritten: frontmatter keys (evidence, source-experiments, links, status
suffixes such as `superseded:EXP-043`, any other key naming it) through
`frontmatter.set_keys`, body mentions by a word-boundary match, and the `file` field of
the local side's access-log lines about it. Files the local side did not change since the
merge base are not touched: whatever they say predates both atoms.

The rewrite is idempotent, so an interrupted renumbering is finished by running it again
with the same mapping (sync journals the mapping before it starts).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexfs import accesslog, frontmatter, layout, wall
from cortexfs.atoms import Kind, atom_of, kind_of_filename
from cortexfs.errors import AtomParseError
from cortexfs.fsutil import removed_on_error, rewrite, write_temp
from cortexfs.git import git_blob, git_run
from cortexfs.store import Store

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
LOG_LOCK_WAIT = 5.0  # seconds a rewrite of a log waits for the appends under way
TEXT_SUFFIXES = (".md", ".yaml", ".yml", ".txt", ".json")  # files an id is rewritten in
# Generated files: regenerated after the merge, so rewriting them would only make conflicts;
# the access log: its lines are renamed apart (`rewrite_log`).
_SKIP_NAMES = (layout.INDEX, layout.ACCESS_LOG)


@dataclass(frozen=True)
class Collision:
    """Both sides added `atom_id` to `project` since the merge base, with different content."""

    project: str
    kind: Kind
    atom_id: str

    @property
    def path(self) -> str:
        return f"{layout.PROJECTS_PATH}/{self.project}/{self.kind.folder}/{self.atom_id}.md"


@dataclass(frozen=True)
class Renumbering:
    """The local atom `old` of `project` became `new`."""

    project: str
    old: str
    new: str

    def to_json(self) -> dict[str, str]:
        return dict(vars(self))  # (its fields, which `Renumbering(**…)` reads back)


def _added(home: Path, base: str, tip: str) -> dict[str, str]:
    """Atom paths added between `base` and `tip`, with their blob ids."""
    return added_atoms(git_run(home, "diff", "--raw", "-z", "--no-renames", "--diff-filter=A",
                               base, tip, "--", layout.PROJECTS_PATH).stdout)


def added_atoms(raw: str) -> dict[str, str]:
    """The atom paths that a `git diff --raw -z --no-renames` listing adds, with their blob
    ids."""
    fields = raw.split("\0")
    return {path: meta.split()[3] for meta, path in zip(fields[0::2], fields[1::2], strict=False)
            if meta.startswith(":") and meta.split()[4] == "A" and atom_of(path)}


def find_collisions(home: Path, base: str | None, local: str, remote: str,
                    theirs: dict[str, str] | None = None) -> list[Collision]:
    """Atoms that both `local` and `remote` added since `base` (None: unrelated histories).

    `theirs`: what `remote` added (`added_atoms`), when the caller has already listed it."""
    start = base or EMPTY_TREE
    ours = _added(home, start, local)
    if theirs is None:
        theirs = _added(home, start, remote)
    found = []
    for path in sorted(ours.keys() & theirs.keys()):
        if ours[path] != theirs[path]:  # the same content on both sides merges cleanly
            where = atom_of(path)
            assert where is not None
            found.append(Collision(*where))
    return found


def _tree_ids(home: Path, rev: str, project: str, kind: Kind) -> set[str]:
    out = git_run(home, "ls-tree", "-z", "--name-only", rev, "--",
                  f"{layout.PROJECTS_PATH}/{project}/{kind.folder}/").stdout
    return {name.rsplit("/", 1)[-1][:-3] for name in out.split("\0")
            if kind_of_filename(name.rsplit("/", 1)[-1]) is kind}


def allocate(home: Path, collisions: list[Collision], local: str, remote: str,
             taken_extra: Iterable[str] = ()) -> list[Renumbering]:
    """A new id for each colliding local atom, free on both sides and among the new ones.

    A plain id gets the next number after the highest on either side; a suffixed one
    (`EXP-042b`) keeps its number with the next free letter, so it stays next to its sibling.
    """
    taken: dict[tuple[str, str], set[str]] = {}
    out = []
    for c in collisions:
        key = (c.project, c.kind.prefix)
        if key not in taken:
            taken[key] = (_tree_ids(home, local, c.project, c.kind)
                          | _tree_ids(home, remote, c.project, c.kind) | set(taken_extra))
        ids = taken[key]
        new = _next_free(c.kind, c.atom_id, ids)
        ids.add(new)
        out.append(Renumbering(c.project, c.atom_id, new))
    return out


def _next_free(kind: Kind, old: str, ids: set[str]) -> str:
    m = kind.id_re.match(old)
    assert m is not None
    if m.lastindex and m.lastindex >= 2 and m.group(2):
        for letter in "abcdefghijklmnopqrstuvwxyz":
            candidate = f"{old[:-1]}{letter}"
            if candidate not in ids:
                return candidate
    highest = max((int(mm.group(1)) for other in ids if (mm := kind.id_re.match(other))),
                  default=0)
    return kind.format_id(highest + 1)


# --- rewriting ---------------------------------------------------------------------------------

def _sub(pattern: re.Pattern[str], mapping: dict[str, str], text: str) -> str:
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def _replace_value(value: Any, pattern: re.Pattern[str], mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _sub(pattern, mapping, value)
    if isinstance(value, list):
        return [_replace_value(v, pattern, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _replace_value(v, pattern, mapping) for k, v in value.items()}
    return value


def rewrite_text(text: str, mapping: dict[str, str], path: str = "<string>") -> str:
    """`text` with every mention of an old id replaced by its new id.

    Frontmatter keys go through `set_keys` (every other byte of the block stays); the body
    and files without frontmatter get a word-boundary replacement.
    """
    alternatives = "|".join(re.escape(old) for old in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(rf"\b({alternatives})\b")
    if not pattern.search(text):
        return text
    try:
        doc = frontmatter.parse(text, path)
    except AtomParseError:
        return _sub(pattern, mapping, text)
    updates = {key: new_value for key, value in doc.meta.items()
               if (new_value := _replace_value(value, pattern, mapping)) != value}
    lines = text.splitlines(keepends=True)
    head, body = "".join(lines[:doc.body_line - 1]), "".join(lines[doc.body_line - 1:])
    if updates:
        try:
            head = frontmatter.set_keys(head, updates, path)
        except AtomParseError:
            head = _sub(pattern, mapping, head)  # a shape set_keys will not rewrite safely
    return head + _sub(pattern, mapping, body)


def rewrite_log(path: Path, skip_bytes: int, rename: dict[str, str]) -> bool:
    """Rename `file` fields (EXP-043.md → EXP-046.md) in the log's lines after `skip_bytes`.

    Lines the hook appends while this runs are kept: the old file is read again after the
    rename and whatever reached it late is appended (renamed too) to the new one.
    """
    def whole(data: bytes) -> bytes:
        return data[:skip_bytes] + _rename_lines(data[skip_bytes:], rename)

    return replace_log(path, whole, lambda data: _rename_lines(data, rename))


def _rename_line(line: bytes, rename: dict[str, str]) -> bytes:
    return accesslog.renamed(line, rename) or line


def _rename_lines(data: bytes, rename: dict[str, str]) -> bytes:
    return b"".join(_rename_line(line, rename) for line in data.splitlines(keepends=True))


def replace_log(path: Path, whole: Callable[[bytes], bytes],
                tail: Callable[[bytes], bytes], *, again: bool = False) -> bool:
    """Atomically replace an append-only log with `whole(content)`, losing no late append.

    `tail` transforms lines that a writer appended to the old file after it was read.
    `again`: replace it even when `whole` changes nothing (a new file, which git reads again
    whatever its stat data says: see sync.keep_log_appends).
    """
    home = accesslog.store_home(path)
    if not home:
        return _replace_log(path, whole, tail, again)
    with accesslog.Replacing(home):
        accesslog.drain(path)  # lines set aside earlier are the log's: `whole` sees them
        replaced = _replace_log(path, whole, tail, again)
        accesslog.drain(path, tail)  # (set aside meanwhile: meant for the old log)
    return replaced


def _replace_log(path: Path, whole: Callable[[bytes], bytes],
                 tail: Callable[[bytes], bytes], again: bool) -> bool:
    try:
        fd = accesslog.open_log(path, os.O_RDONLY)  # never a linked log (cortexfs.wall)
    except FileNotFoundError:
        return False
    try:
        data = read_from(fd, 0)
        end = data.rfind(b"\n") + 1
        new = whole(data[:end])
        if new == data[:end] and not (again and data):
            return False
        # The new copy is written and synced first; only then is the old file's flock
        # taken, for what arrived meanwhile and the rename: appends wait for it and then
        # append to the new file (accesslog.append). (In a store, appends wait for the
        # store's access-log lock, held by the caller, and never write to the old file;
        # a log elsewhere may still get an unlocked append past the bound: what such an
        # append wrote is read back after the rename.)
        tmp = write_temp(path, new)
        with removed_on_error(tmp):
            accesslog.lock(fd, LOG_LOCK_WAIT)
            more = read_from(fd, end)
            if more:
                with open(tmp, "ab") as f:
                    f.write(tail(more))
            os.replace(tmp, path)
        time.sleep(0.005)  # let an unlocked append that opened the old file finish writing
        late = read_from(fd, end + len(more))
        if late:
            accesslog.append(path, [tail(late)])
        return True
    finally:
        os.close(fd)


def read_from(fd: int, offset: int) -> bytes:
    """Everything in the open file `fd` from `offset` to its end."""
    chunks: list[bytes] = []
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _changed_since(home: Path, base: str | None, tip: str, project: str) -> list[str]:
    out = git_run(home, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=AM",
                  base or EMPTY_TREE, tip, "--", f"{layout.PROJECTS_PATH}/{project}/").stdout
    return [p for p in out.split("\0") if p]


def apply(store: Store, renumberings: list[Renumbering], base: str | None,
          tip: str) -> list[Path]:
    """Rename and rewrite on disk (idempotently); returns every path to commit.

    `tip` is the local commit the renumbering starts from; `base` the merge base.
    """
    home = store.home
    touched: list[Path] = []
    by_project: dict[str, dict[str, str]] = {}
    for r in renumberings:
        by_project.setdefault(r.project, {})[r.old] = r.new
    for project, mapping in by_project.items():
        root = store.projects_dir / project

        def change(raw: bytes, mapping: dict[str, str] = mapping) -> bytes:
            try:
                return rewrite_text(raw.decode("utf-8"), mapping).encode("utf-8")
            except UnicodeDecodeError:
                return raw

        for old, new in mapping.items():
            old_path, new_path = renamed(store, Renumbering(project, old, new))
            if old_path.exists() and not wall.reason(store.context, old_path):
                # a rename, not a copy: an edit saved into the file meanwhile moves with it
                os.replace(old_path, new_path)
            if new_path.exists() and not wall.reason(store.context, new_path):
                rewrite(new_path, change)  # (never over an edit saved meanwhile: fsutil)
            touched += [old_path, new_path]
        for rel in _changed_since(home, base, tip, project):
            path = home / rel
            name = path.name
            if name in _SKIP_NAMES or not name.endswith(TEXT_SUFFIXES) or not path.is_file() \
                    or wall.reason(store.context, path):  # a link: not part of the store
                continue
            with contextlib.suppress(FileNotFoundError):
                rewrite(path, change)
            # listed even when unchanged now: a first, interrupted run may have rewritten it
            touched.append(path)
        log = root / layout.META / layout.ACCESS_LOG
        rel_log = f"{layout.PROJECTS_PATH}/{project}/{layout.META}/{layout.ACCESS_LOG}"
        base_log = (git_blob(home, base, rel_log) if base else None) or b""
        current = accesslog.read(log)
        # the local side's lines are those after the merge base's copy of the log
        skip = len(base_log) if current.startswith(base_log) else 0
        renames = {f"{old}.md": f"{new}.md" for old, new in mapping.items()}
        if skip == 0 and base_log:
            _rewrite_log_unordered(log, base_log, renames)
        else:
            rewrite_log(log, skip, renames)
        touched.append(log)
    return touched


def renamed(store: Store, r: Renumbering) -> tuple[Path, Path]:
    """The old and the new path of a renumbered atom."""
    kind = kind_of_filename(f"{r.old}.md")
    assert kind is not None
    folder = store.projects_dir / r.project / kind.folder
    return folder / f"{r.old}.md", folder / f"{r.new}.md"


def _rewrite_log_unordered(log: Path, base_log: bytes, rename: dict[str, str]) -> None:
    """The log no longer starts with the base's copy: rename in lines the base lacks."""
    def whole(data: bytes) -> bytes:
        base_lines = Counter(base_log.splitlines(keepends=True))
        out = []
        for line in data.splitlines(keepends=True):
            if base_lines[line] > 0:
                base_lines[line] -= 1
                out.append(line)
            else:
                out.append(_rename_line(line, rename))
        return b"".join(out)

    replace_log(log, whole, lambda data: _rename_lines(data, rename))


def describe(renumberings: list[Renumbering]) -> str:
    """`flywheel EXP-043 → EXP-046, K-007 → K-009`."""
    parts: dict[str, list[str]] = {}
    for r in renumberings:
        parts.setdefault(r.project, []).append(f"{r.old} → {r.new}")
    return "; ".join(f"{p} {', '.join(items)}" for p, items in parts.items())
