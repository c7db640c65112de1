"""cortexfs.recall.lexical: the on-disk index, incremental and disposable."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortexfs import accesslog, cache
from cortexfs import recall as rc
from cortexfs.recall import arrays, lexical, segment
from cortexfs.recall.lexical import LexicalIndex
from cortexfs.store import Project, Store
from recall.helpers import ids, lexical_index, lexical_only, segment_files


def test_cache_is_incremental(store: Store, project: Project,
                              atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    manifest = store.cache_dir / "recall" / "lexical" / "manifest.json"
    stamp = manifest.stat().st_mtime_ns
    rc.forget_open_indexes()  # a new process: loads the index, writes nothing
    index = lexical_index(store)
    index.refresh()
    assert manifest.stat().st_mtime_ns == stamp and index.columns().n_live == 3

    path = project.root / "experiments" / "EXP-002.md"
    path.write_text(path.read_text().replace(
        "Shard rebalancing doubled tail latency during backfill", "Quokka migration"))
    assert ids(rc.recall(store, "quokka")) == ["EXP-002"]
    assert rc.recall(store, "doubled tail").hits == []
    cols = lexical_index(store).columns()
    # a third of the first segment died: it was rewritten with the new one (no dead docs)
    assert cols.n_live == len(cols.live) == 3
    atoms("EXP-003", summary="Quokka census results")
    assert set(ids(rc.recall(store, "quokka"))) == {"EXP-002", "EXP-003"}
    path.unlink()
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    rc.forget_open_indexes()  # and the saved index agrees
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]


def test_same_size_same_mtime_rewrite_is_seen(store: Store,
                                              write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", summary="alpha beta gamma")
    assert ids(rc.recall(store, "alpha")) == ["EXP-001"]
    st = path.stat()
    path.write_text(path.read_text().replace("alpha", "delta"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert ids(rc.recall(store, "delta")) == ["EXP-001"]
    assert rc.recall(store, "alpha").hits == []


def test_a_racily_clean_file_is_read_again_and_keeps_its_doc(
        store: Store, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="alpha beta gamma")
    assert ids(rc.recall(store, "alpha")) == ["EXP-001"]
    segments = segment_files(store)
    assert lexical_index(store).files.folders["flywheel/experiments"].racy.all()  # just written
    assert ids(rc.recall(store, "alpha")) == ["EXP-001"]  # its bytes compared: the same,
    assert segment_files(store) == segments  # so nothing is indexed again


@pytest.mark.parametrize("what, damage", [
    ("manifest.json", b""), ("manifest.json", b"{not json"), ("files.arr", b"CXARRAY1junk"),
    ("seg", b"not a zip file")])
def test_damaged_index_files_are_rebuilt(store: Store, atoms: Callable[..., Path],
                                         what: str, damage: bytes) -> None:
    rc.recall(store, "cache")
    folder = store.cache_dir / "recall" / "lexical"
    target = segment_files(store)[0] if what == "seg" else folder / what
    target.write_bytes(damage)
    rc.forget_open_indexes()
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    assert json.loads((folder / "manifest.json").read_text())["segments"]


def test_index_built_by_other_code_is_rebuilt(store: Store, atoms: Callable[..., Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rc.recall(store, "cache")
    rc.forget_open_indexes()
    monkeypatch.setattr(cache, "code_key", lambda: "another version")
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    manifest = json.loads((store.cache_dir / "recall" / "lexical" / "manifest.json").read_text())
    assert manifest["params"]["code"] == "another version"


def _damage_mapped(store: Store, member: str) -> Path:
    """Overwrite one memory-mapped array of the (only) segment with 0x7f bytes: ids far out
    of range, which no CRC guards in a mapped array."""
    rc.recall(store, "cache")
    (path,) = segment_files(store)
    raw = bytearray(path.read_bytes())
    size = int.from_bytes(raw[8:16], "little")
    dtype, shape, offset, nbytes, crc = json.loads(raw[16:16 + size])["arrays"][member]
    assert crc is None  # mapped
    start = -(-(16 + size) // arrays.ALIGN) * arrays.ALIGN
    raw[start + offset:start + offset + nbytes] = b"\x7f" * nbytes
    path.write_bytes(bytes(raw))
    rc.forget_open_indexes()
    return path


@pytest.mark.parametrize("member", ["p_doc", "fwd", "t_ptr"])
def test_damaged_mapped_bytes_are_rebuilt(store: Store, atoms: Callable[..., Path],
                                          member: str) -> None:
    _damage_mapped(store, member)
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"


def test_damaged_mapped_bytes_found_while_refreshing(store: Store,
                                                     atoms: Callable[..., Path]) -> None:
    _damage_mapped(store, "p_doc")
    atoms("EXP-003", summary="Quokka census")  # a change: the damaged segment is read
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"


def test_unparseable_atoms_are_skipped_then_indexed(store: Store, project: Project,
                                                    atoms: Callable[..., Path]) -> None:
    bad = project.root / "experiments" / "EXP-009.md"
    bad.write_text("---\nid: [unclosed\n---\nquokka\n")
    result = rc.recall(store, "cache")
    assert result.skipped == ["flywheel/experiments/EXP-009.md"]
    assert "EXP-009" not in ids(result)
    atoms("EXP-009", summary="Quokka census")
    result = rc.recall(store, "quokka")
    assert ids(result) == ["EXP-009"] and result.skipped == []


def test_oversized_binary_and_linked_files_are_skipped(store: Store, project: Project,
                                                       atoms: Callable[..., Path],
                                                       tmp_path: Path) -> None:
    from cortexfs.frontmatter import MAX_ATOM_BYTES

    folder = project.root / "experiments"
    (folder / "EXP-010.md").write_bytes(b"---\nid: EXP-010\n---\n"
                                        + b"quokka " * (MAX_ATOM_BYTES // 7 + 1))
    (folder / "EXP-011.md").write_bytes(b"---\nid: EXP-011\n---\n\x00q")
    outside = tmp_path / "outside.md"
    outside.write_text("---\nid: EXP-012\nsummary: quokka secret\n---\nquokka\n")
    (folder / "EXP-012.md").symlink_to(outside)
    result = rc.recall(store, "quokka")
    assert result.hits == []
    assert result.skipped == [f"flywheel/experiments/EXP-01{n}.md" for n in (0, 1, 2)]
    reasons = list(lexical_index(store).skipped.values())
    assert any("byte limit" in r for r in reasons) and any("binary" in r for r in reasons)
    assert any("symbolic link" in r for r in reasons)


def test_read_only_cache_dir_still_recalls(store: Store, atoms: Callable[..., Path]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    (store.cache_dir / "recall" / "lexical").mkdir(parents=True)
    (store.cache_dir / "recall" / "lexical").chmod(0o500)
    try:
        assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
        atoms("EXP-003", summary="Quokka census")
        assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    finally:
        (store.cache_dir / "recall" / "lexical").chmod(0o700)


def test_unwritable_cache_keeps_the_index_in_memory(store: Store,
                                                    atoms: Callable[..., Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(segment, "save", refuse)
    monkeypatch.setattr(lexical, "write_temp", refuse)
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    atoms("EXP-003", summary="Quokka census")
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    assert not segment_files(store)


def test_another_process_s_update_is_picked_up(store: Store,
                                              atoms: Callable[..., Path]) -> None:
    first, second = LexicalIndex(store), LexicalIndex(store)
    first.refresh()
    second.refresh()
    atoms("EXP-003", summary="Quokka census")
    first.refresh()  # writes a segment and a new manifest
    second.refresh()  # its view is stale: it reloads before writing anything
    assert second.columns().n_live == 4 and len(second.segments) == 2
    assert len(segment_files(store)) == 2


def test_access_log_rewrite_is_refolded(store: Store, project: Project,
                                        write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-01-01")
    accesslog.append(project.access_log, [accesslog.format_line("EXP-002.md", "Read", "s")] * 3)
    assert ids(rc.recall(store, "cache")) == ["EXP-002", "EXP-001"]
    # a merge rewrites the log (new inode): only EXP-001 reads remain
    tmp = project.access_log.with_suffix(".tmp")
    tmp.write_bytes(accesslog.format_line("EXP-001.md", "Read", "s") * 5)
    os.replace(tmp, project.access_log)
    assert ids(rc.recall(store, "cache")) == ["EXP-001", "EXP-002"]


def test_bm25_is_lucene_s(store: Store, write_atom: Callable[..., Path]) -> None:
    """Whole-atom scores are Lucene's BM25 of the stored counts (idf over live atoms)."""
    write_atom("EXP-001", summary="alpha alpha beta", tags="[x]", body="\n")
    write_atom("EXP-002", summary="beta gamma", tags="[x]", body="\n")
    rc.recall(store, "alpha")
    index = lexical_index(store)
    from cortexfs.recall.tokenize import term_hash

    scores, found, _ = lexical.bm25(index, [term_hash("alpha")])
    cols = index.columns()
    n, df = cols.n_live, 1
    i = int(found[0][0])
    tf = 2 * 2  # twice in the summary, which counts twice
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = lexical.BM25_K1 * (1 - lexical.BM25_B + lexical.BM25_B * cols.dlen[i] / cols.avgdl)
    assert scores[i] == pytest.approx(idf * tf / (tf + norm), rel=1e-5)
    assert lexical_only().lexical == 1.0


def _walk_both(index: LexicalIndex, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The index's walk done serially, shared with a forked child, and left to the child
    alone: the same answer."""
    projects = index.store.projects()

    def plain(w: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
        return {k: (p and p.name, kind and kind.folder, names, stamps.tolist(), tuple(listed))
                for k, (p, kind, names, stamps, listed) in w.items()}

    monkeypatch.setattr(lexical, "FORK_MIN_FILES", 10**9)
    serial = plain(index.walk(projects))
    monkeypatch.setattr(lexical, "FORK_MIN_FILES", 0)
    started = []
    start = lexical.forked.start

    def spy(work: Callable[[], Any]) -> lexical.forked.Child | None:
        started.append(work)
        return start(work)

    monkeypatch.setattr(lexical.forked, "start", spy)
    assert plain(index.walk(projects)) == serial
    assert started  # (the fork path was taken)
    mine = lexical.forked.Shared.mine
    monkeypatch.setattr(lexical.forked.Shared, "mine", lambda self: iter(()))
    assert plain(index.walk(projects)) == serial
    monkeypatch.setattr(lexical.forked.Shared, "mine", mine)
    monkeypatch.setattr(lexical.forked, "start", start)
    return serial


def test_a_forked_walk_finds_what_the_serial_walk_finds(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs import scaffold

    monkeypatch.setattr(lexical.forked, "can_fork", lambda: True)
    other, _ = scaffold.new_project(store, "registry")
    for n in range(1, 7):
        write_atom(f"EXP-{n:03d}", summary=f"quokka census {n}")
        write_atom(f"K-{n:03d}", summary=f"quokka rule {n}", extra="evidence: []\n",
                   target=other)
    past = time.time_ns() - 10**10
    for path in [*project.root.rglob("*"), *other.root.rglob("*")]:
        os.utime(path, ns=(past, past))  # settled: nothing racy
    index = lexical_index(store)
    index.refresh()
    assert _walk_both(index, monkeypatch) == {}  # nothing changed
    edited = project.root / "experiments" / "EXP-002.md"
    edited.write_text(edited.read_text().replace("census", "counted"))  # in place
    os.utime(edited, ns=(past, past + 1))
    (project.root / "experiments" / "EXP-003.md").rename(
        project.root / "experiments" / "EXP-033.md")
    (other.root / "knowledge" / "K-004.md").unlink()
    write_atom("PAT-001", summary="quokka pattern", extra="evidence: []\n", target=other)
    walked = _walk_both(index, monkeypatch)
    assert set(walked) == {"flywheel/experiments", "registry/knowledge", "registry/patterns"}
    assert "EXP-033.md" in walked["flywheel/experiments"][2]
    monkeypatch.setattr(lexical, "FORK_MIN_FILES", 0)
    index.refresh()
    assert set(ids(rc.recall(store, "quokka counted", k=3))) >= {"EXP-002"}
    for path in (other.root / "knowledge").iterdir():
        path.unlink()
    (other.root / "knowledge").rmdir()  # a folder that vanishes
    assert "registry/knowledge" in _walk_both(index, monkeypatch)


def test_a_failed_forked_walk_is_done_here(store: Store, atoms: Callable[..., Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical.forked, "can_fork", lambda: True)
    monkeypatch.setattr(lexical, "FORK_MIN_FILES", 0)
    index = lexical_index(store)
    index.refresh()
    atoms("K-002", summary="Quokka census", extra="evidence: []\n")

    def lost(child: lexical.forked.Child) -> None:  # the child's answer never arrives
        os.close(child.fd)
        os.waitpid(child.pid, 0)

    monkeypatch.setattr(lexical.forked.Child, "join", lost)
    monkeypatch.setattr(lexical.forked.Shared, "mine", lambda self: iter(()))  # (all its)
    assert ids(rc.recall(store, "quokka")) == ["K-002"]


def test_a_query_answered_during_a_forked_walk_counts_only_if_nothing_changed(
        store: Store, project: Project, atoms: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs.recall import query

    monkeypatch.setattr(lexical.forked, "can_fork", lambda: True)
    monkeypatch.setattr(lexical, "FORK_MIN_FILES", 0)
    searched = []
    search = query.Retriever.search

    def spy(self: query.Retriever, *args: Any, **kwargs: Any) -> Any:
        searched.append(args[0])
        return search(self, *args, **kwargs)

    monkeypatch.setattr(query.Retriever, "search", spy)

    past = time.time_ns() - 10**10
    for path in project.root.rglob("*"):
        os.utime(path, ns=(past, past))  # nothing racy

    def settle(path: Path) -> None:  # (an in-place edit moves no folder's mtime)
        os.utime(path, ns=(past, past + 1))

    rc.recall(store, "cache")
    searched.clear()
    assert set(ids(rc.recall(store, "cache"))) == {"EXP-001", "K-001"}
    assert searched == ["cache"]  # answered during the walk, and kept
    # an edit: the early answer is dropped, and the query asked again
    path = project.root / "knowledge" / "K-001.md"
    path.write_text(path.read_text().replace("on a timer", "on a quokka"))
    settle(path)
    searched.clear()
    assert ids(rc.recall(store, "quokka")) == ["K-001"]
    assert searched == ["quokka", "quokka"]
    path = project.root / "experiments" / "EXP-001.md"
    path.write_text(path.read_text().replace("stale reads", "stale quokka"))
    settle(path)
    searched.clear()
    assert set(ids(rc.recall(store, "quokka"))) == {"EXP-001", "K-001"}
    assert searched == ["quokka", "quokka"]
