"""cortexfs.loader: the atom loader and its cache — hits, misses, damage, racy files, the
forked parse."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import cache, forked, loader
from cortexfs.atoms import KINDS
from cortexfs.loader import load_project, scan
from cortexfs.store import Project, Store


def summary(project: Project, bodies: bool = True) -> tuple[list[tuple[str, object, str]],
                                                            list[str]]:
    loaded = load_project(project, bodies=bodies)
    return ([(a.path.name, a.meta, a.body) for a in loaded.atoms],
            [str(e) for e in loaded.errors])


def test_load_project_reads_atoms_and_errors(project: Project,
                                             write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", body="\nBody one.\n")
    write_atom("K-001")
    write_atom("EXP-002", frontmatter="id: [x\n")
    loaded = load_project(project)
    assert [a.path.name for a in loaded.atoms] == ["EXP-001.md", "K-001.md"]
    assert [a.kind.prefix for a in loaded.atoms] == ["EXP", "K"]
    assert loaded.atoms[0].body == "\nBody one.\n"
    assert loaded.atoms[0].meta["date"] == "2026-03-09"
    assert [(Path(e.path).name, e.line) for e in loaded.errors] == [("EXP-002.md", 3)]
    assert load_project(project, bodies=False).atoms[0].body == ""


def test_non_atom_files_are_ignored(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    folder = project.root / "experiments"
    for name in ("index.md", "CORTEX.md", "EXP-002.txt", "K-001.md", "notes.md", "EXP-X.md"):
        (folder / name).write_text("---\nid: x\n---\n")
    assert [a.path.name for a in load_project(project).atoms] == ["EXP-001.md"]


def test_second_scan_is_served_by_the_cache(project: Project,
                                            write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    write_atom("EXP-002")
    assert scan(project).parsed == 2
    fresh = scan(project)  # written < cache.RACY_NS ago: re-checked by content, not re-parsed
    assert fresh.parsed == 0
    assert all(stamp[loader.RACY] for _, _, stamp in fresh.entries())
    os.utime(project.root / "experiments" / "EXP-001.md", ns=(1, 1_000_000_000))
    os.utime(project.root / "experiments" / "EXP-002.md", ns=(1, 1_000_000_000))
    assert scan(project).parsed == 2  # new mtimes
    cold = scan(project)
    assert cold.parsed == 0 and not cold.dirty


def test_changed_added_and_deleted_files(project: Project,
                                         write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="one")
    write_atom("EXP-002")
    before = summary(project)
    write_atom("EXP-001", summary="one, edited")
    write_atom("EXP-003")
    (project.root / "experiments" / "EXP-002.md").unlink()
    atoms, _ = summary(project)
    assert [name for name, *_ in atoms] == ["EXP-001.md", "EXP-003.md"]
    assert atoms[0][1]["summary"] == "one, edited"  # type: ignore[index]
    assert atoms != before[0]


def test_parse_errors_are_cached_with_their_line(project: Project,
                                                 write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", frontmatter="id: EXP-001\nsummary: a: b\n")
    first = summary(project)
    os.utime(project.root / "experiments" / "EXP-001.md", ns=(1, 1_000_000_000))
    scan(project)
    assert scan(project).parsed == 0
    assert summary(project) == first
    assert first[1][0].endswith("EXP-001.md:3: invalid YAML in frontmatter: mapping values "
                                "are not allowed in this context")


@pytest.mark.parametrize("damage", [b"", b"garbage", b"CORTEXCACHE\x01" + b"\0" * 40])
def test_damaged_cache_is_rebuilt(store: Store, project: Project,
                                  write_atom: Callable[..., Path], damage: bytes) -> None:
    write_atom("EXP-001")
    write_atom("EXP-002", frontmatter="- a list\n")
    want = summary(project)
    loader.cache_path(project).write_bytes(damage)
    assert summary(project) == want
    assert cache.load(loader.cache_path(project), loader.CACHE_KIND) is not None


def test_infos_that_do_not_go_with_the_stamps_are_not_used(
        project: Project, write_atom: Callable[..., Path]) -> None:
    """The parsed frontmatter lives in a file of its own: lost, damaged or from another save
    (a kill between the two writes, two writers), it is parsed again, never trusted."""
    path = write_atom("EXP-001", summary="first")
    write_atom("EXP-002")
    want = summary(project)
    infos = loader.infos_path(project)
    for damage in (None, b"garbage"):
        if damage is None:
            infos.unlink()
        else:
            infos.write_bytes(damage)
        assert summary(project) == want
        assert cache.load(infos, loader.INFOS_KIND) is not None  # written again
    old = infos.read_bytes()
    path.write_text(path.read_text().replace("first", "second"))
    assert [a.summary for a in load_project(project).atoms][0] == "second"
    infos.write_bytes(old)  # the infos of the save before: its token is not the stamps'
    assert [a.summary for a in load_project(project).atoms][0] == "second"


def _spoil(delta: Path, damage: str | None, edit: Callable[[], object],
           project: Project) -> None:
    """A lost delta, or a stale one: the delta of another save (of `edit`) on the same infos
    file."""
    if damage == "lost":
        delta.unlink()
    elif damage == "stale":
        kept = delta.read_bytes()
        edit()
        scan(project)
        delta.write_bytes(kept)


@pytest.mark.parametrize("damage", [None, "lost", "stale", "replaced"])
def test_a_few_parsed_files_are_saved_as_a_delta_on_the_infos(
        project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch, damage: str | None) -> None:
    """Up to DELTA_MAX infos parsed since the infos file was written whole go to a delta
    file beside it; the stamps name the pair. A lost or stale delta, or an infos file
    another save replaced, is never trusted: the files are parsed again."""
    monkeypatch.setattr(loader, "DELTA_MAX", 3)
    for i in range(1, 5):
        write_atom(f"EXP-{i:03d}", summary=f"run {i}")
    scan(project)
    infos, delta = loader.infos_path(project), loader.delta_path(project)
    whole = infos.read_bytes()

    def summaries() -> list[object]:
        return [a.meta["summary"] for a in scan(project, save=False).loaded().atoms]

    write_atom("EXP-005", summary="run 5")  # a new atom
    write_atom("EXP-002", summary="run 2, edited")
    first = scan(project)
    assert first.parsed == 2 and infos.read_bytes() == whole and delta.is_file()
    want = ["run 1", "run 2, edited", "run 3", "run 4", "run 5"]
    if damage in ("lost", "stale"):
        _spoil(delta, damage, lambda: write_atom("EXP-003", summary="run 3, edited"), project)
        want[2] = "run 3, edited" if damage == "stale" else want[2]
    elif damage == "replaced":  # the infos file written whole by another save meanwhile
        edited = write_atom("EXP-004", summary="run 4, edited")
        sc = scan(project, save=False)
        sc.loaded()
        monkeypatch.setattr(loader, "DELTA_MAX", 0)
        sc.save()  # (whole)
        monkeypatch.setattr(loader, "DELTA_MAX", 3)
        replaced = infos.read_bytes()
        edited.write_text(edited.read_text().replace("run 4, edited", "run 4, again"))
        scan(project)  # a delta on the new infos file
        assert replaced != whole
        infos.write_bytes(whole)  # a valid infos file, but not the one the delta rests on
        want[3] = "run 4, again"
    again = scan(project, save=False)
    assert [a.meta["summary"] for a in again.loaded().atoms] == want
    assert summaries() == want
    if damage is None:
        assert again.parsed == 0 and again.loaded() is not None
    for i in range(6, 10):  # past DELTA_MAX: the infos file is written whole again
        write_atom(f"EXP-{i:03d}", summary=f"run {i}")
    scan(project).loaded()
    assert infos.read_bytes() != whole
    assert summaries() == [*want, "run 6", "run 7", "run 8", "run 9"]


@pytest.mark.parametrize("damage", [None, "lost", "stale"])
def test_one_file_parsed_since_the_infos_were_saved_whole_is_read_from_the_delta_alone(
        project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch, damage: str | None) -> None:
    """Asking for one file's info that the delta holds (the duplicate gate asking for the
    atom the last `cortex new` wrote) does not read the infos of the whole project; a lost
    or stale delta is not trusted, and the info is that of the file all the same."""
    exp = KINDS[0]
    for i in range(1, 4):
        write_atom(f"EXP-{i:03d}", summary=f"run {i}")
    scan(project)
    write_atom("EXP-004", summary="run 4")  # a new atom: saved in the delta
    scan(project)
    _spoil(loader.delta_path(project), damage,
           lambda: write_atom("EXP-004", summary="run 4, edited"), project)
    loaded: list[Path] = []
    real = cache.load

    def spy(path: Path, *args: object) -> object:
        loaded.append(path)
        return real(path, *args)

    monkeypatch.setattr(cache, "load", spy)
    sc = scan(project, save=False)
    info = sc.info(exp, "EXP-004.md")
    assert info is not None
    assert info[0]["summary"] == ("run 4, edited" if damage == "stale" else "run 4")
    assert (loader.infos_path(project) in loaded) == (damage is not None)
    assert sc.info(exp, "EXP-001.md") is not None
    assert loader.infos_path(project) in loaded


def test_flipped_byte_in_the_cache_is_caught(project: Project,
                                             write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="real")
    want = summary(project)
    path = loader.infos_path(project)  # where the parsed frontmatter is
    raw = bytearray(path.read_bytes())
    at = raw.index(b"real")
    raw[at:at + 4] = b"fake"
    path.write_bytes(bytes(raw))
    assert cache.load(path, loader.INFOS_KIND) is None
    assert summary(project) == want


def test_cache_of_another_kind_or_format_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "c.bin"
    assert cache.save(path, "kind-a", {"x": (1, 2)})
    assert cache.load(path, "kind-a") == {"x": (1, 2)}
    assert cache.load(path, "kind-b") is None
    assert cache.load(tmp_path / "missing.bin", "kind-a") is None
    assert not cache.save(path, "kind-a", {"x": object()})  # not marshal-able: no cache
    assert cache.load(path, "kind-a") == {"x": (1, 2)}


def test_unwritable_cache_is_not_an_error(store: Store, project: Project,
                                          write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    (store.cache_dir / "atoms").write_text("a file where the folder should be")
    assert [a.id for a in load_project(project).atoms] == ["EXP-001"]


def test_racy_file_with_the_same_stamp_is_reparsed(project: Project,
                                                   write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", summary="aaaa")
    scan(project)
    st = path.stat()
    path.write_text(path.read_text().replace("aaaa", "bbbb"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_mtime_ns, path.stat().st_size) == (st.st_mtime_ns, st.st_size)
    assert load_project(project).atoms[0].summary == "bbbb"


def test_body_of_a_file_changed_after_the_scan(project: Project,
                                               write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", body="\nold body\n")
    sc = scan(project)
    path.write_text(path.read_text().replace("old body", "a new, longer body"))
    atoms = sc.loaded(bodies=True).atoms
    assert atoms[0].body == "\na new, longer body\n"


def test_oversized_and_binary_files(project: Project, write_atom: Callable[..., Path]) -> None:
    from cortexfs.frontmatter import MAX_ATOM_BYTES

    folder = project.root / "experiments"
    (folder / "EXP-001.md").write_bytes(b"---\nid: EXP-001\n---\n" + b"x" * MAX_ATOM_BYTES)
    (folder / "EXP-002.md").write_bytes(b"---\nid: EXP-002\n---\n\x00")
    errors = load_project(project).errors
    assert ["byte limit" in e.reason for e in errors] == [True, False]
    assert "binary" in errors[1].reason


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_an_error_until_fixed(project: Project,
                                                 write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001")
    path.chmod(0)
    try:
        assert "cannot read" in load_project(project).errors[0].reason
    finally:
        path.chmod(0o644)
    assert [a.id for a in load_project(project).atoms] == ["EXP-001"]


def test_meta_of_loaded_atoms_is_a_copy(project: Project,
                                        write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    load_project(project).atoms[0].meta["summary"] = "changed in memory"
    assert load_project(project).atoms[0].summary == "A summary"


def test_walk_folder_lists_atoms_others_and_reuses_a_listing(
        project: Project, write_atom: Callable[..., Path]) -> None:
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.loader import AtomFolder, walk_folder

    write_atom("EXP-001")
    folder = project.folder(EXPERIMENT)
    (folder / "notes.txt").write_text("x")
    (folder / "K-001.md").write_text("x")
    walked = walk_folder(folder, EXPERIMENT)
    assert walked.names == ["EXP-001.md"] and len(walked.stats) == 1
    assert "notes.txt" in walked.others and "K-001.md" in walked.others
    assert walk_folder(folder, EXPERIMENT, stat=False).stats == []
    assert walk_folder(project.root / "nowhere", EXPERIMENT).names == []
    # a folder's names are not listed again while its (no longer racy) stamp holds
    assert walk_folder(folder, EXPERIMENT).listed == (0, 0)  # just written: racy
    os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
    listed = walk_folder(folder, EXPERIMENT).listed
    assert listed != (0, 0)
    known = AtomFolder(["EXP-001.md", "EXP-009.md"], [], ["kept.txt"], listed)
    again = walk_folder(folder, EXPERIMENT, known)
    assert again.names == ["EXP-001.md"] and again.others == ["kept.txt"]  # (009: no stat)
    write_atom("EXP-002")  # the folder's mtime moves: listed again
    assert walk_folder(folder, EXPERIMENT, known).names == ["EXP-001.md", "EXP-002.md"]


def test_scan_reports_the_other_entries(project: Project,
                                        write_atom: Callable[..., Path]) -> None:
    from cortexfs.atoms import KNOWLEDGE

    write_atom("EXP-001")
    (project.folder(KNOWLEDGE) / "draft.md").parent.mkdir(parents=True, exist_ok=True)
    (project.folder(KNOWLEDGE) / "draft.md").write_text("x")
    others = load_project(project).others
    assert (KNOWLEDGE, "draft.md") in others
    assert all(name != "EXP-001.md" for _, name in others)


def lagging(real_share: Callable[..., forked.Shared | None]) -> Callable[..., object]:
    """forked.share, its caller lagging until the forked process has taken every job from
    the queue or has ended (at most 10 s): so that the child walks the folders."""
    import array
    import fcntl
    import termios

    def share(order: list[int], work: Callable[[int], object]) -> forked.Shared | None:
        shared = real_share(order, work)
        deadline = time.monotonic() + 10
        queued = array.array("i", [0])
        while shared is not None and time.monotonic() < deadline:
            fcntl.ioctl(shared.queue, termios.FIONREAD, queued)  # (bytes left in the pipe)
            if queued[0] == 0 or os.waitid(os.P_PID, shared.child.pid,
                                           os.WEXITED | os.WNOHANG | os.WNOWAIT):
                break  # (WNOWAIT: the child is left to be reaped by its owner)
            time.sleep(0.005)
        return shared

    return share


def _scan_all(store: Store, forked_walk: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    """Everything a scan of every project says, walked by one process or shared with a
    forked child (its threshold forced down), against the same cache (nothing saved)."""
    monkeypatch.setattr(loader, "FORK_MIN_FILES", 0 if forked_walk else 1 << 62)
    real_join, reported = forked.Shared.join, []

    def join(shared: forked.Shared) -> dict[int, object]:
        got = real_join(shared)
        reported.extend(got)  # (folders the child walked)
        return got

    with monkeypatch.context() as m:
        m.setattr(forked, "share", lagging(forked.share))
        m.setattr(forked.Shared, "join", join)
        scans = loader.scan_many(store.projects(), save=False)
    assert bool(reported) == forked_walk
    return [(sc.project.name, sc.folders, sc.others, sc.listed, sc.dirty, sc.parsed,
             [sc.inputs_digest(kind) for kind in KINDS],
             [(a.path.name, a.meta, a.body) for a in sc.loaded(bodies=True).atoms],
             [str(e) for e in sc.errors()]) for sc in scans]


def test_forked_walk_gives_the_serial_walks_records(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "second")
    for i in range(1, 9):
        write_atom(f"EXP-{i:03d}", summary=f"s{i}")
        write_atom(f"K-{i:03d}", target=other)
    write_atom("PAT-001")
    write_atom("K-001", frontmatter="id: [x\n")

    def same() -> None:
        serial = _scan_all(store, False, monkeypatch)
        assert _scan_all(store, True, monkeypatch) == serial

    with monkeypatch.context() as m:  # every record racy when saved: re-checked by content
        m.setattr(cache, "RACY_NS", 1 << 62)
        loader.scan_many(store.projects())
    same()  # racy records whose files have settled since
    exp = project.root / "experiments"
    st = (exp / "EXP-001.md").stat()  # an edit that keeps the stamp: caught by content
    (exp / "EXP-001.md").write_text((exp / "EXP-001.md").read_text().replace("s1", "x1"))
    os.utime(exp / "EXP-001.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    (exp / "EXP-002.md").write_text((exp / "EXP-002.md").read_text() + "\nMore.\n")
    os.rename(exp / "EXP-003.md", exp / "EXP-009.md")
    (exp / "EXP-004.md").unlink()
    (exp / "notes.txt").write_text("not an atom\n")
    for path in (project.root / "patterns").iterdir():  # a folder that vanishes
        path.unlink()
    (project.root / "patterns").rmdir()
    same()
    loader.scan_many(store.projects())  # (saved: the next walks compare with these records)
    os.utime(other.root / "knowledge" / "K-002.md", ns=(1, 1_000_000_000))
    same()
    with monkeypatch.context() as m:  # records saved settled: whole folders compared at once
        m.setattr(cache, "RACY_NS", 0)
        loader.scan_many(store.projects())
    same()
    os.utime(exp / "EXP-005.md", ns=(1, 2_000_000_000))
    same()

    def broken(order: list[int], work: Callable[[int], object]) -> forked.Shared | None:
        # the child fails at its first folder: its share is walked by the parent
        return real_share(order, lambda job: os._exit(3))

    real_share = forked.share
    serial = _scan_all(store, False, monkeypatch)
    started: list[object] = []
    real_start = forked.start
    monkeypatch.setattr(forked, "start", lambda work: started.append(work) or real_start(work))
    monkeypatch.setattr(forked, "share", broken)
    monkeypatch.setattr(loader, "FORK_MIN_FILES", 0)
    assert [(sc.folders, sc.others, sc.listed, sc.dirty)
            for sc in loader.scan_many(store.projects(), save=False)] == \
        [(folders, others, listed, dirty) for _, folders, others, listed, dirty, *_ in serial]
    assert started


def _children() -> set[str]:
    """This process's child processes (Linux), to see that none is left behind (other tests
    may leave some of their own running)."""
    path = Path(f"/proc/self/task/{os.getpid()}/children")
    if not path.exists():
        pytest.skip("no /proc children list here")
    return set(path.read_text().split())


def _records(scans: list[loader.ProjectScan]) -> object:
    return [(sc.project.name, sc.folders, sc.others, sc.listed, sc.dirty, sc.parsed,
             [sc.inputs_digest(kind) for kind in KINDS], [str(e) for e in sc.errors()])
            for sc in scans]


@pytest.mark.parametrize("child", ["works", "dies", "none"])
def test_a_scan_ahead_gives_what_a_scan_then_gives(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch, child: str) -> None:
    """Begun, then taken after the files moved: the scan taken then, whether the forked
    process walked the folders, died (the taker walks them), or could not be forked."""
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "second")
    for i in range(1, 6):
        write_atom(f"EXP-{i:03d}", summary=f"s{i}", target=other)
    write_atom("K-001", frontmatter="id: [x\n", target=other)
    loader.scan_many([other])  # (saved: the walk compares with these records, as a scan does)
    os.utime(other.root / "experiments" / "EXP-002.md", ns=(1, 1_000_000_000))
    monkeypatch.setattr(loader, "AHEAD_MIN_FILES", 0)  # (a forked walk even for a few files)
    real_start = forked.start
    if child == "dies":
        monkeypatch.setattr(forked, "start", lambda work: real_start(lambda: os._exit(3)))
    elif child == "none":
        monkeypatch.setattr(forked, "start", lambda work: None)
    # (the child, if any, takes every folder before the scans are taken)
    monkeypatch.setattr(forked, "share", lagging(forked.share))
    before = _children()
    with loader.Ahead([other]) as ahead:
        assert ahead.names == {"second"}
        taken = ahead.take()
    assert _records(taken) == _records(loader.scan_many([other], save=False))
    assert [sc.parsed for sc in taken] == [1]  # the file whose stamp moved
    assert ahead.take() == []  # taken once
    assert _children() <= before


def test_a_scan_ahead_left_untaken_leaves_no_process(store: Store, project: Project,
                                                     write_atom: Callable[..., Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "AHEAD_MIN_FILES", 0)
    write_atom("EXP-001")
    before = _children()
    with loader.Ahead([project]) as ahead:
        pass  # (the command failed before it needed the scans)
    assert _children() <= before
    assert ahead.take() == []
