"""Store, init, projects and `cortex new`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cortexfs.errors import NotAStoreError
from cortexfs.loader import atom_paths
from cortexfs.store import Store


def test_no_store_says_run_init(cli) -> None:
    result = cli("new", "exp", "-p", "x", "-s", "s", "-t", "a")
    assert result.exit_code == 1
    assert "run `cortex init`" in result.stderr
    assert "Traceback" not in result.output
    with pytest.raises(NotAStoreError):
        Store.open()


def test_init_twice_is_safe(cli, tmp_path: Path) -> None:
    assert cli("init").exit_code == 0
    user = tmp_path / "cortex" / "context" / "user" / "USER.md"
    user.write_text("mine\n")
    again = cli("init")
    assert again.exit_code == 0, again.output
    assert "already initialised" in again.output
    assert user.read_text() == "mine\n"
    for rel in ("CORTEX.md", "OVERVIEW.md", "decisions", "ideas", "scans", "projects"):
        assert (tmp_path / "cortex" / "context" / rel).exists()


def test_home_option_wins(cli, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert cli("--home", str(other), "init").exit_code == 0
    assert (other / "context" / "CORTEX.md").is_file()
    assert not (tmp_path / "cortex").exists()


def test_project_new_and_bad_name(cli, store) -> None:
    assert cli("project", "new", "flywheel").exit_code == 0
    root = store.projects_dir / "flywheel"
    for rel in ("experiments", "knowledge", "patterns", "_meta", "STATUS.md", "TASKS.yaml"):
        assert (root / rel).exists(), rel
    bad = cli("project", "new", "../evil")
    assert bad.exit_code == 1
    assert "invalid project name" in bad.stderr
    assert not (store.context / "evil").exists()


def test_new_writes_atom_and_commits(cli, project) -> None:
    result = cli("new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b")
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    assert path.name == "EXP-001.md"
    text = path.read_text()
    assert "id: EXP-001\n" in text and "tags: [a, b]\n" in text and "## Reflection" in text
    log = subprocess.run(["git", "log", "--format=%s", "-1"], cwd=project.store.home,
                         capture_output=True, text=True).stdout
    assert log.strip() == "atom: add EXP-001 — Registry extraction"
    second = cli("new", "exp", "-p", "flywheel", "-s", "Next", "-t", "a")
    assert Path(second.stdout.strip()).name == "EXP-002.md"


@pytest.mark.parametrize("args", [
    ["new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b"],
    ["index", "regen", "--all", "--format", "json"]])
def test_new_and_regen_end_with_a_quick_exit_once_committed(project, args: list[str]) -> None:
    """The console script ends `cortex new` and `cortex index regen` with os._exit once
    their commit is made and their output flushed (no interpreter teardown)."""
    code = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('torn down'));"
            "from cortexfs.__main__ import main; sys.argv[0] = 'cortex'; main()")
    proc = subprocess.run([sys.executable, "-c", code, "--home", str(project.store.home),
                           *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "torn down" not in proc.stderr  # the quick exit was taken
    assert proc.stdout.endswith("EXP-001.md\n" if args[0] == "new" else "}\n")
    status = subprocess.run(["git", "status", "--porcelain", "--", "context"],
                            cwd=project.store.home, capture_output=True, text=True).stdout
    assert status == ""


@pytest.mark.parametrize("args, message", [
    (["new", "zzz", "-p", "flywheel", "-s", "s", "-t", "a"], "unknown atom type"),
    (["new", "exp", "-p", "nope", "-s", "s", "-t", "a"], "no project named 'nope'"),
    (["new", "exp", "-p", "flywheel", "-s", "  ", "-t", "a"], "summary is empty"),
    (["new", "exp", "-p", "flywheel", "-s", "s", "-t", "has space"], "invalid tag"),
    (["new", "k", "-p", "flywheel", "-s", "s", "-t", "a"], "knowledge needs evidence"),
    (["new", "k", "-p", "flywheel", "-s", "s", "-t", "a", "-e", "EXP-009"], "does not exist"),
    (["new", "pat", "-p", "flywheel", "-s", "s", "-t", "a"], "source experiments"),
    (["new", "exp", "-p", "flywheel", "-s", "s", "-t", "a", "-l", "FOO-1"], "not an atom id"),
])
def test_new_bad_input(cli, project, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not any(atom_paths(project))


def test_concurrent_new_never_share_an_id(project) -> None:
    """Real processes racing for ids: every one gets its own."""
    code = (
        "import sys\n"
        "from cortexfs.store import Store\n"
        "from cortexfs.atoms import EXPERIMENT\n"
        "from cortexfs.authoring import NewAtom, create_atom\n"
        "p = Store.open().project('flywheel')\n"
        "for i in range(10):\n"
        "    create_atom(p, NewAtom(EXPERIMENT, f'run {sys.argv[1]} {i}', ['race'], [], [], []))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)]) for n in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    paths = sorted(p.name for _, p in atom_paths(project))
    assert paths == [f"EXP-{n:03d}.md" for n in range(1, 41)]
    summaries = {p.read_text().split("summary: ")[1].split("\n")[0] for _, p in
                 atom_paths(project)}
    assert len(summaries) == 40


def test_add_atom_refuses_before_writing_and_takes_a_body(project) -> None:
    """The library call behind `cortex new` and MCP add_atom: gate first, one write."""
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.authoring import NewAtom, add_atom, kind_named
    from cortexfs.errors import CortexError, InvalidInputError

    req = NewAtom(EXPERIMENT, "Registry extraction from artifacts", ["registry"], [], [], [])
    first = add_atom(project, req, body="## Results\n\n573 artifacts.\n")
    assert first.duplicates == [] and first.change.created == [first.atom.path]
    assert first.change.message == "atom: add EXP-001 — Registry extraction from artifacts"
    assert first.atom.path.read_text().endswith("---\n\n## Results\n\n573 artifacts.\n")
    second = add_atom(project, req)
    assert [d.id for d in second.duplicates] == ["EXP-001"]
    with pytest.raises(CortexError):
        add_atom(project, req, strict=True)
    assert sorted(p.name for _, p in atom_paths(project)) == ["EXP-001.md", "EXP-002.md"]
    with pytest.raises(InvalidInputError, match="use exp, k or pat"):
        kind_named("zzz")
