"""Hermetic test fixtures: every test gets its own HOME, CORTEX_HOME and git identity."""

from __future__ import annotations

import compileall
import fnmatch
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import stores
from stores import Cli, Templates, hermetic, initialised, with_flywheel

from cortexfs.store import Project, Store

PACKAGE = Path(__file__).resolve().parent.parent / "cortexfs"
MEMORY_TEMP = Path("/dev/shm")
MEMORY_TEMP_MIN_FREE = 2 << 30  # a run writes a few hundred MB; Docker's default is 64 MB


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, in the process that starts the workers
        compile_package()
        rewrite_tests(config)
    in_memory_temp(config)


def compile_package() -> None:
    """Write the package's bytecode once, before the workers start: the suite runs a few
    hundred `cortex` processes, and where bytecode writing is off (PYTHONDONTWRITEBYTECODE,
    as in CI's environment) each one compiled the whole package again from a fresh clone,
    ~0.1 s of CPU apiece. Python writes the same files itself where it is on."""
    compileall.compile_dir(PACKAGE, quiet=2)


def rewrite_tests(config: pytest.Config) -> None:
    """Write pytest's rewritten-assert bytecode of the test modules once, before the workers
    start, half of them in a forked child: each worker otherwise rewrote all of them (~2 s of
    CPU apiece) where bytecode writing is off, and even where it is on when both start from a
    fresh clone. A worker reads the file only when it holds the hash of the module's source
    (pytest's own check), so a stale or missing one is rewritten there as before. This uses
    pytest's private helpers; should they move, nothing is written and nothing changes."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
        if config.getoption("assertmode") != "rewrite":
            return
        state = config.stash[assertstate_key]
        patterns = config.getini("python_files")
        found: set[Path] = set()
        for arg in config.args:
            path = Path(arg.split("::")[0])
            if path.is_file():
                found.add(path.resolve())
            elif path.is_dir():
                found.update(p.resolve() for p in path.rglob("*.py")
                             if p.name == "conftest.py"
                             or any(fnmatch.fnmatch(p.name, pat) for pat in patterns))
        todo = [(fn, get_cache_dir(fn) / (fn.name[:-3] + PYC_TAIL)) for fn in sorted(found)]
        todo = [(fn, pyc) for fn, pyc in todo if _read_pyc(fn, pyc) is None]
    except Exception:
        return
    if not todo:
        return
    try:
        child = os.fork() if len(todo) > 1 else -1  # the parent takes the even ones
    except OSError:
        child = -1  # (no fork: all of them here)
    try:
        for fn, pyc in todo[child == 0::2] if child >= 0 else todo:
            pyc.parent.mkdir(exist_ok=True)
            source_hash, code = _rewrite_test(fn, config)
            _write_pyc(state, code, source_hash, pyc)  # atomic: a temporary file, renamed
    except Exception:
        pass  # whatever was not written is rewritten by the workers
    finally:
        if child == 0:
            os._exit(0)
    if child > 0:
        os.waitpid(child, 0)


def in_memory_temp(config: pytest.Config) -> None:
    """Tests' temporary folders in memory (tmpfs) where there is room, unless --basetemp,
    TMPDIR or PYTEST_DEBUG_TEMPROOT says where: every atomic write of cortex and git fsyncs,
    and on a disk those waits were a third of a test's time (on tmpfs an fsync returns at
    once). Only durability across a power cut differs, which no test can see; the full-disk
    tests mount tmpfs of their own either way."""
    if config.option.basetemp or os.environ.get("TMPDIR") \
            or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return
    try:
        room = os.statvfs(MEMORY_TEMP)
    except OSError:
        return
    if room.f_bavail * room.f_frsize >= MEMORY_TEMP_MIN_FREE and os.access(MEMORY_TEMP, os.W_OK):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY_TEMP)


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and CORTEX_HOME into tmp_path and pin git's identity and config."""
    return hermetic(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """The conftest's stores are built here, before any test's own fixtures can patch what
    building runs (a session fixture is set up before a test's function fixtures)."""
    made = Templates(tmp_path_factory.mktemp("templates"))
    made.build("store", initialised)
    made.build("flywheel", with_flywheel)
    return made


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Store:
    """An initialised store (git repository included) with no projects -- or, when the test
    also asks for `project`, with that one (so that it is copied in once, not built)."""
    if "project" in request.fixturenames:
        return templates.copy("flywheel", with_flywheel, tmp_path / "cortex")
    return templates.copy("store", initialised, tmp_path / "cortex")


@pytest.fixture
def project(store: Store) -> Project:
    """A scaffolded project named `flywheel` (uncommitted, as `scaffold.new_project` leaves it)."""
    from cortexfs import scaffold

    if (store.projects_dir / "flywheel").is_dir():  # the store fixture copied it in
        return store.project("flywheel")
    p, _ = scaffold.new_project(store, "flywheel")
    return p


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture
def write_atom(project: Project) -> Callable[..., Path]:
    """Write an atom file by hand: write_atom("EXP-001", summary=..., frontmatter=...)
    (tests/stores.py's write_atom, into `project` unless `target` names another)."""

    def _write(atom_id: str, *fields: str | None, target: Project | None = None,
               **named: str | None) -> Path:
        return stores.write_atom(target or project, atom_id, *fields, **named)

    return _write


# --- outside the store (issue 12: nothing crosses the store's wall) ---------------------------

MARKER = "SECRET-OUTSIDE-THE-STORE"
OUTSIDE_ATOM = (f"---\nid: EXP-002\ndate: 2026-03-01\nproject: flywheel\nsummary: \"{MARKER}\"\n"
                f"tags: [a]\n---\n{MARKER}\n")
OLD_ATIME = 1_000_000  # older than every mtime: any read moves it (relatime)


class Outside:
    """Files and folders outside the store, and a check that nothing touched them."""

    MARKER = MARKER

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        (root / "passwd").write_text(f"root:x:0:0:{MARKER}:/root:/bin/sh\n")
        (root / "atom.md").write_text(OUTSIDE_ATOM)
        (root / "log.jsonl").write_text(json.dumps(
            {"file": "EXP-001.md", "tool": "Read", "ts": "2026-03-02T00:00:00.000Z",
             "session": MARKER}) + "\n")
        for name in ("project", "meta", "folder", "hippocampus"):
            (root / name).mkdir()
        (root / "folder" / "PAT-001.md").write_text(OUTSIDE_ATOM.replace("EXP-002", "PAT-001"))
        self.before = self.snapshot()
        self.paths = list(self.entries())
        # atime is only a witness where the file system keeps it (relatime: when older than
        # the mtime); a probe file says whether it does here
        probe = root.parent / "atime-probe"
        probe.write_text("x")
        os.utime(probe, (OLD_ATIME, probe.stat().st_mtime))
        probe.read_text()
        self.atime_works = probe.stat().st_atime != OLD_ATIME
        probe.unlink()
        self.reset_atimes()

    def entries(self) -> Iterator[Path]:
        yield self.root
        yield from sorted(self.root.rglob("*"))

    def snapshot(self) -> dict[str, tuple[bytes | None, int]]:
        return {str(p.relative_to(self.root)): (p.read_bytes() if p.is_file() else None,
                                                p.stat().st_mtime_ns) for p in self.entries()}

    def reset_atimes(self) -> None:
        for p in self.paths:
            os.utime(p, ns=(OLD_ATIME * 10**9, p.stat().st_mtime_ns))

    def assert_untouched(self, what: str) -> None:
        # the atimes first (stat only): the snapshot itself lists and reads everything
        read = [str(p) for p in self.paths if p.stat().st_atime != OLD_ATIME]
        assert self.snapshot() == self.before, f"{what} wrote outside the store"
        self.reset_atimes()
        if self.atime_works:
            assert read == [], f"{what} read (or listed) outside the store: {read}"


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    """Files and folders next to the store, for links to point at (see Outside)."""
    return Outside(tmp_path / "outside")


@pytest.fixture
def viewed(project: Project) -> Project:
    """`project` holding view_store's atoms, tasks and reads (the `cortex view` tests)."""
    from view_store import populate

    populate(project)
    return project


@pytest.fixture
def tiny_model_dir(tmp_path: Path) -> Path:
    """A tiny random BERT in the all-MiniLM-L6-v2 file layout (tests/tiny_model.py)."""
    from tiny_model import make_tiny_model

    return make_tiny_model(tmp_path / "tiny-model")


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lexical, heat and recency only, unless a test installs a model."""
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")


@pytest.fixture
def atoms(write_atom: Callable[..., Path]) -> Callable[..., Path]:
    """Three atoms of `project` that the recall tests search."""
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads by 40 percent",
               tags="[cache, latency]", date="2026-01-10")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency during backfill",
               tags="[shard, backfill]", date="2026-02-10",
               body="\n## Results\n\nThe rebalancer moved hot shards first.\n")
    write_atom("K-001", summary="Invalidate caches on write, not on a timer",
               tags="[cache]", extra="evidence: [EXP-001]\n", date="2026-03-01")
    return write_atom
