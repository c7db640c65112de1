"""The cache layer: caches keyed by the code that wrote them and by the fields of their rows,
and disposable — deleting any of them at any time changes no output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortexfs import accesslog, cache, loader
from cortexfs.store import Project, Store

ROOT = Path(__file__).resolve().parent.parent


def test_cache_of_another_code_or_kind_is_ignored(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.bin"
    assert cache.save(path, ("rows", ("a", "b")), [(1, 2)])
    assert cache.load(path, ("rows", ("a", "b"))) == [(1, 2)]
    assert cache.load(path, ("rows", ("a", "b", "c"))) is None  # rows of other fields
    monkeypatch.setattr(cache, "code_key", lambda: "another cortex")
    assert cache.load(path, ("rows", ("a", "b"))) is None


def test_a_damaged_or_torn_cache_file_reads_as_no_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.bin"
    assert cache.save(path, "rows", [(1, "a" * 100)])
    whole = path.read_bytes()
    for at in range(len(cache.MAGIC), len(whole), 7):  # a byte changed anywhere after MAGIC
        path.write_bytes(whole[:at] + bytes([whole[at] ^ 0x40]) + whole[at + 1:])
        assert cache.load(path, "rows") is None
    for end in (0, len(cache.MAGIC) + 2, len(whole) - 1):  # torn
        path.write_bytes(whole[:end])
        assert cache.load(path, "rows") is None
    path.write_bytes(whole)
    assert cache.load(path, "rows") == [(1, "a" * 100)]


def test_code_key_is_a_digest_of_the_sources() -> None:
    key = cache.code_key()
    assert len(key) == 32 and key == cache.code_key()


def test_code_key_follows_each_source_and_reads_one_just_edited(tmp_path: Path) -> None:
    """By stat data (as Python's bytecode cache), and by content while a source is within
    the racy window: two copies whose docs.py differ only in content, at the same size and
    the same (recent) mtime, have different keys."""
    def key(copy: Path) -> str:
        proc = subprocess.run([sys.executable, "-c",
                               "from cortexfs import cache; print(cache.code_key())"],
                              capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(copy)}, cwd=tmp_path)
        return proc.stdout.strip()

    copies = []
    for name in ("a", "b", "c"):
        shutil.copytree(ROOT / "cortexfs", tmp_path / name / "cortexfs",
                        ignore=shutil.ignore_patterns("__pycache__"))  # (mtimes kept)
        copies.append(tmp_path / name)
    assert key(copies[0]) == key(copies[1]) == cache.code_key()  # the same files
    docs = [c / "cortexfs" / "recall" / "docs.py" for c in copies]
    text = docs[0].read_text(encoding="utf-8")
    docs[1].write_text(text.replace("vsha", "vSHA"), encoding="utf-8")  # same size, now
    stamp = os.stat(docs[1]).st_mtime_ns
    os.utime(docs[0], ns=(stamp, stamp))
    assert key(copies[0]) != key(copies[1])
    docs[2].write_text(text + "\n", encoding="utf-8")
    assert key(copies[2]) not in (key(copies[0]), cache.code_key())


def test_racy_rule() -> None:
    now = 10 * cache.RACY_NS
    assert cache.racy(now, now) and cache.racy(now - cache.RACY_NS + 1, now)
    assert not cache.racy(now - cache.RACY_NS, now)


def test_a_new_field_in_the_cached_record_rebuilds(project: Project,
                                                  write_atom: Callable[..., Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_atom("EXP-001")
    write_atom("EXP-002", frontmatter="- a list\n")
    want = loader.load_project(project)
    assert loader.scan(project).parsed == 0  # cached
    # the next cortex keeps one more field per file: the rows on disk are not its rows
    monkeypatch.setattr(loader, "RECORD", (*loader.RECORD, "mode"))
    again = loader.scan(project)
    assert again.parsed == 2
    got = again.loaded(bodies=True)
    assert [(a.id, a.meta, a.body) for a in got.atoms] == \
        [(a.id, a.meta, a.body) for a in want.atoms]
    assert [str(e) for e in got.errors] == [str(e) for e in want.errors]


def _rich_store(store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads",
               tags="[cache, latency]")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency", tags="[shard]")
    write_atom("K-001", summary="Invalidate caches on write", tags="[cache]")
    write_atom("PAT-001", summary="Measure before sharding", tags="[shard]")
    write_atom("EXP-003", frontmatter="- not a mapping\n")
    lines = [accesslog.format_line(f"{project.name}/experiments/EXP-001.md", "Read", "s1",
                                   f"2026-03-1{d}T10:00:00Z") for d in range(5)]
    lines.append(accesslog.format_line(f"{project.name}/knowledge/K-001.md", "Read", "s1",
                                       "2026-03-12T11:00:00Z"))
    accesslog.append(project.access_log, lines)


def _outputs(cli: Any, store: Store) -> dict[str, Any]:
    """Everything a user sees: what regeneration writes, recall, ready, validate, brief."""
    out: dict[str, Any] = {"regen": cli("index", "regen", "--all").exit_code}
    for path in sorted(store.context.rglob("*.md")):
        if "experiments" not in path.parts and "knowledge" not in path.parts \
                and "patterns" not in path.parts or path.name == "index.md":
            out[str(path.relative_to(store.home))] = path.read_text(encoding="utf-8")
    for args in (("recall", "cache latency", "--format", "json"), ("ready", "--format", "json"),
                 ("validate", "--format", "json"), ("brief", "--budget", "300")):
        result = cli(*args)
        out[" ".join(args)] = (result.exit_code, result.stdout)
    return out


def test_every_cache_can_be_deleted_without_changing_any_output(
        cli: Any, store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")
    # trust stat data however recent: every cache gets written (nothing is edited below)
    monkeypatch.setattr(cache, "RACY_NS", -10_000_000_000)
    _rich_store(store, project, write_atom)
    cli("index", "regen", "--all")  # (commits the atoms and indexes)
    want = _outputs(cli, store)
    assert want == _outputs(cli, store)  # (stable when nothing is deleted)
    families = sorted(p.relative_to(store.cache_dir) for p in store.cache_dir.iterdir())
    assert {"atoms", "regen", "recall", "hippocampus", "ready.bin"} <= {
        str(f) for f in families}, families
    for family in families:
        target = store.cache_dir / family
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
        assert _outputs(cli, store) == want, f"deleting .cache/{family} changed an output"
    shutil.rmtree(store.cache_dir)
    assert _outputs(cli, store) == want


def test_an_edited_cortex_reads_no_cache_of_the_old_one(
        tmp_path: Path, store: Store, project: Project,
        write_atom: Callable[..., Path]) -> None:
    """A new field in recall's Doc (no version to bump): the edited package rebuilds its
    caches rather than misreading the old rows, and answers the same."""
    _rich_store(store, project, write_atom)
    copy = tmp_path / "edited"
    # with its bytecode (sources keep their mtimes, so Python reuses it for every module but
    # the edited one): with bytecode writing off, each run of the copy compiled it all again
    shutil.copytree(ROOT / "cortexfs", copy / "cortexfs")
    docs = copy / "cortexfs" / "recall" / "docs.py"
    text = docs.read_text(encoding="utf-8")
    anchor = '    vsha: str = ""'
    assert anchor in text
    docs.write_text(text.replace(anchor, anchor + "\n    reads: int = 0", 1), encoding="utf-8")
    # an edit made a while ago: a source edited within the racy window counts by its content
    # until the window passes, then by its stat data (another key, so one more rebuild), and
    # on a loaded machine the window could pass between the two runs of the edited package
    aged = time.time() - 60
    os.utime(docs, (aged, aged))
    probe = ("import json, sys\n"
             "from cortexfs import cache, loader\n"
             "from cortexfs.recall import recall\n"
             "from cortexfs.store import Store\n"
             "store = Store.open()\n"
             "project = store.project('flywheel')\n"
             "old = cache.load(loader.cache_path(project), loader.CACHE_KIND) is not None\n"
             "loader.load_project(project)\n"
             "hits = [h.id for h in recall(store, 'cache latency').hits]\n"
             "print(json.dumps([old, hits, cache.code_key()]))\n")
    env = {**os.environ, "CORTEX_EMBED_MODEL": "off"}

    def run(pythonpath: Path) -> list[Any]:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env={**env, "PYTHONPATH": str(pythonpath)}, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return list(json.loads(proc.stdout))

    assert not run(ROOT)[0]
    seen, hits, key = run(ROOT)
    assert seen
    old_seen, edited_hits, edited_key = run(copy)
    assert edited_key != key and not old_seen
    assert edited_hits == hits and hits
    assert run(copy)[0]  # its own cache, read back
