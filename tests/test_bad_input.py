"""Bad input across commands (SPEC §11): one line that says what to do, exit 1, no crash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs.commit import commit_paths
from cortexfs.store import Project


def _one_error_line(result: object) -> str:
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 1, stderr  # type: ignore[attr-defined]
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.parametrize(("args", "says"), [
    (["recall", "foo", "--k", "abc"], "'abc' is not a valid int. (see `cortex recall --help`)"),
    (["brief", "--budget", "abc"], "(see `cortex brief --help`)"),
    (["tasks", "archive", "--older-than", "soon"], "(see `cortex tasks archive --help`)"),
    (["--bogus"], "No such option: --bogus (see `cortex --help`)"),
    (["bogus"], "No such command 'bogus'."),
    (["tasks", "bogus"], "(see `cortex tasks --help`)"),
    (["new", "exp"], "missing --summary"),
    (["recall"], "Missing argument 'query'."),
    (["index", "regen", "--formt", "json"], "Possible options: --format"),
    (["memory", "lint", "a", "b"], "unexpected extra argument"),
])
def test_usage_errors_are_one_line_and_exit_1(cli, args: list[str], says: str) -> None:
    # click's own handling would print a boxed usage text and exit 2, which in cortex
    # means a bug (see cortexfs/cli/main.py)
    assert says in _one_error_line(cli(*args))


def test_a_group_without_a_command_prints_its_help_and_exits_1(cli) -> None:
    result = cli("tasks")
    assert result.exit_code == 1
    assert "Usage: cortex tasks" in result.output and "archive" in result.output


def test_recall_k_out_of_range_names_the_value_given(cli, project: Project) -> None:
    assert "not -1" in _one_error_line(cli("recall", "foo", "--k", "-1", "--no-dense"))


BOMB = "".join(
    ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)])


@pytest.mark.parametrize("extra", [BOMB, "x: &a [*a]\n"], ids=["alias-bomb", "alias-loop"])
def test_an_atom_whose_yaml_aliases_explode_is_reported_not_a_crash(
        cli, write_atom: Callable[..., Path], extra: str) -> None:
    write_atom("EXP-001")
    bad = write_atom("EXP-002", frontmatter=("id: EXP-002\ndate: 2026-03-09\n"
                                             "project: flywheel\nsummary: s\ntags: [a]\n"
                                             + extra))
    before = bad.read_bytes()
    result = cli("validate", "flywheel")
    assert result.exit_code == 1
    assert "EXP-002.md:2  [frontmatter]" in result.stdout and "alias" in result.stdout
    regen = cli("index", "regen", "flywheel", "--no-commit")
    assert regen.exit_code == 0, regen.stderr
    assert "EXP-002.md:2: the YAML" in regen.stderr and "internal error" not in regen.stderr
    new = cli("new", "exp", "-p", "flywheel", "-s", "another", "-t", "a", "--no-commit")
    assert new.exit_code == 0, new.stderr
    assert bad.read_bytes() == before


def test_a_store_path_through_a_file_is_one_line_not_a_crash(cli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    said = _one_error_line(cli("--home", str(tmp_path / "afile" / "store"), "init"))
    assert "part of this path is a file, not a folder" in said
    assert not (tmp_path / "cortex").exists()


def test_filesystem_refusals_are_the_users_to_fix_other_os_errors_are_bugs() -> None:
    import errno

    from cortexfs.errors import from_os_error

    full = from_os_error(OSError(errno.ENOSPC, "No space left on device", "/s/x.md"))
    assert full is not None and "free some space" in str(full) and "/s/x.md" in str(full)
    ro = from_os_error(OSError(errno.EROFS, "Read-only file system", "/s/.locks/git.lock"))
    assert ro is not None and "read-only file system" in str(ro)
    assert from_os_error(FileNotFoundError(errno.ENOENT, "gone", "/s/x.md")) is None


def test_a_read_only_store_is_one_line_with_exit_1(cli, store, monkeypatch) -> None:
    import errno

    from cortexfs import fsutil

    def refuse(path: Path, data: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(fsutil, "atomic_write", refuse)
    monkeypatch.setattr("cortexfs.scaffold.atomic_write", refuse)
    said = _one_error_line(cli("project", "new", "ro"))
    assert "is on a read-only file system: remount it read-write" in said


def _untracked_or_changed(home: Path) -> list[str]:
    import subprocess

    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=home,
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


@pytest.mark.parametrize("args", [
    ["new", "exp", "-p", "flywheel", "-s", "during a merge", "-t", "a"],
    ["tasks", "add", "during a merge", "-p", "flywheel"],
    ["decision", "new", "During a merge"],
    ["project", "new", "other"],
    ["index", "regen", "--all"],
])
def test_a_merge_under_way_refuses_before_writing(cli, project: Project, args: list[str]) -> None:
    import subprocess

    home = project.store.home
    commit_paths(project.store, [project.root], "project: add flywheel")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=home, capture_output=True,
                          text=True, check=True).stdout
    (home / ".git" / "MERGE_HEAD").write_text(head)
    said = _one_error_line(cli(*args))
    assert "in the middle of a merge" in said and "--no-commit" in said
    # before: the atom (task, record, project) was written, then the commit refused, and a
    # rerun wrote it a second time under the next id
    assert _untracked_or_changed(home) == []


def test_no_git_identity_refuses_before_writing_and_init_recovers(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{role}_NAME")
        monkeypatch.delenv(f"GIT_{role}_EMAIL")
    monkeypatch.delenv("EMAIL", raising=False)
    gitconfig = tmp_path / "home" / ".gitconfig"
    # without useConfigOnly git guesses an identity from the host name on some machines
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n[user]\n\tuseConfigOnly = true\n")
    said = _one_error_line(cli("init"))
    assert "git has no identity for commits" in said
    home = tmp_path / "cortex"
    assert not (home / "context").exists()
    gitconfig.write_text(gitconfig.read_text() + "\tname = Late\n\temail = late@x.invalid\n")
    assert cli("init").exit_code == 0
    assert _untracked_or_changed(home) == []  # .gitignore of the refused run included


def test_a_reader_that_goes_away_is_not_a_crash(project: Project) -> None:
    import subprocess
    import sys

    # `cortex project list | head -0`: stdout is closed before cortex writes to it
    proc = subprocess.Popen([sys.executable, "-m", "cortexfs", "project", "list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 1
    assert stderr == ""  # was: "internal error: BrokenPipeError … this is a bug"
    assert not (project.store.logs_dir / "crash.log").exists()


def test_fifo_or_folder_named_like_an_atom_is_reported_not_waited_on(cli, project) -> None:
    """A FIFO named EXP-002.md used to block every command that loads atoms."""
    import os

    folder = project.root / "experiments"
    folder.mkdir(exist_ok=True)
    os.mkfifo(folder / "EXP-002.md")
    (folder / "EXP-003.md").mkdir()
    result = cli("validate", "flywheel")
    assert result.exit_code == 1
    assert "EXP-002.md" in result.stdout and "special file" in result.stdout
    assert "EXP-003.md" in result.stdout and "a directory" in result.stdout
    regen = cli("index", "regen", "flywheel", "--no-commit")
    assert regen.exit_code == 0, regen.output


DEEP = 30_000
NESTED = {
    "flow-list": "[" * DEEP + "]" * DEEP,
    "flow-map": "{a: " * DEEP + "}" * DEEP,
    "block-list": "\n  " + "- " * DEEP + "x",
    "block-indented": "\n" + "".join(" " * i + "- \n" for i in range(1, 200)),
}
COMMANDS = [["validate"], ["index", "regen", "--all", "--no-commit"],
            ["recall", "x", "--no-dense"], ["brief"], ["ready"], ["maintain"],
            ["tasks", "list"], ["tasks", "add", "more", "-p", "flywheel", "--no-commit"]]


@pytest.mark.parametrize("shape", sorted(NESTED))
def test_nesting_past_64_levels_is_refused_before_yaml_sees_it(
        cli, write_atom: Callable[..., Path], project: Project, shape: str) -> None:
    # 30,000 nested `[` in one atom crashed every command that parses atoms (exit 139, the
    # C stack); in TASKS.yaml it was "internal error: RecursionError … a bug"
    write_atom("EXP-001")
    write_atom("EXP-002", tags=NESTED[shape])
    (project.root / "TASKS.yaml").write_text("tasks: " + NESTED[shape] + "\n")
    for args in COMMANDS:
        result = cli(*args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert "internal error" not in result.stderr and "Traceback" not in result.output
    import re

    said = cli("validate").stdout
    line = 6 if shape.startswith("flow") else r"\d+"  # where the 65th level opens
    assert re.search(rf"EXP-002\.md:{line}  \[frontmatter\] the YAML nests more than 64 "
                     "levels deep", said), said
    assert re.search(r"TASKS\.yaml:\d+  \[tasks\] the YAML nests more than 64 levels deep",
                     said), said
    regen = cli("index", "regen", "--all", "--no-commit")
    assert "EXP-002.md:" in regen.stderr and "the YAML nests" in regen.stderr  # skipped
    assert "EXP-001" in (project.root / "experiments" / "index.md").read_text()


def test_nesting_in_a_real_process_is_not_a_crash(project: Project,
                                                  write_atom: Callable[..., Path]) -> None:
    import subprocess
    import sys

    write_atom("EXP-002", tags=NESTED["flow-list"])
    proc = subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(project.store.home),
                           "validate"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr  # was -11 (SIGSEGV)
    assert "nests more than 64 levels deep" in proc.stdout


@pytest.mark.parametrize(("extra", "line", "key"), [
    ("status: active\nsummary: second\n", 8, "summary"),
    ("status: active\nstatus: invalidated\nrefs: 999\n", 8, "status"),
    ("links: {a: 1, a: 2}\n", 7, "a"),
])
def test_a_duplicate_frontmatter_key_is_an_error_with_its_line(
        cli, write_atom: Callable[..., Path], extra: str, line: int, key: str) -> None:
    # the last `summary:` / `status:` silently won (lines: 1 `---`, 2 id … 6 tags)
    write_atom("EXP-001", extra=extra)
    said = cli("validate", "flywheel").stdout
    assert f"EXP-001.md:{line}  [frontmatter] invalid YAML in frontmatter: duplicate key " \
           f"'{key}'" in said, said


def test_a_duplicate_task_key_is_an_error_with_its_line(cli, project: Project) -> None:
    (project.root / "TASKS.yaml").write_text(
        "tasks:\n  - id: T-1\n    text: a\n    status: todo\n    status: done\n")
    said = cli("validate", "flywheel").stdout
    assert "TASKS.yaml:5  [tasks] invalid YAML: duplicate key 'status' (also 1 line above)" \
        in said, said


@pytest.mark.parametrize("name", ["evil\n", "evil\nx", "a/b", "..", "ok "])
def test_names_are_full_matches(cli, store, name: str) -> None:
    # `$` matches before a final newline: "evil\n" made a second folder listing as "evil"
    result = cli("project", "new", name)
    assert result.exit_code == 1 and "invalid project name" in result.stderr
    assert [p.name for p in store.projects_dir.iterdir() if p.is_dir()] == []


def test_ids_and_tags_are_full_matches(cli, project: Project) -> None:
    from cortexfs.atoms import kind_of_filename, kind_of_id
    from cortexfs.authoring import TAG
    from cortexfs.decisions import RECORD_NAME
    from cortexfs.tasks import TASK_ID

    assert kind_of_id("EXP-001\n") is None and kind_of_filename("EXP-001.md\n") is None
    assert TASK_ID.match("T-1\n") is None and TAG.match("a\n") is None
    assert RECORD_NAME.match("0001-a.md\n") is None
    result = cli("new", "exp", "-p", "flywheel", "-s", "x", "-t", "a\nb", "--no-commit")
    assert result.exit_code == 1 and "invalid tag" in result.stderr


def test_a_full_disk_says_disk_full(cli, project: Project,
                                    write_atom: Callable[..., Path]) -> None:
    import shutil
    import subprocess

    atoms = project.root / "experiments"
    text = write_atom("EXP-001").read_bytes()
    shutil.rmtree(atoms)
    atoms.mkdir()
    # a real, tiny tmpfs (needs mount(8) rights: skipped without)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(atoms)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (atoms / "EXP-001.md").write_bytes(text)
        with open(atoms / "filler", "wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"x" * 4096)
        said = _one_error_line(cli("index", "regen", "flywheel", "--no-commit"))
        assert said.startswith("error: disk full: no space left on the device writing "), said
        assert "index.md" in said and "writable" not in said
    finally:
        subprocess.run(["umount", "-l", str(atoms)], capture_output=True)


def test_big_files_are_refused_in_bounded_time(cli, store, project: Project) -> None:
    # a 12 MB MEMORY.md took 11.5 s to lint, a 10 MB STATUS.md 4.2 s in `ready`
    memory = store.context / "user" / "MEMORY.md"
    memory.write_text("<!-- neocortex.md v1.0 -->\n# Memory\n## Knowledge\n"
                      + "- a fact that repeats <!-- nx: id=f -->\n" * 300_000)
    said = _one_error_line(cli("memory", "lint"))
    assert "is over 1,000,000 bytes" in said and "split it" in said
    status = project.root / "STATUS.md"
    status.write_text(status.read_text() + "- progress on EXP-001\n" * 500_000)
    ready = cli("ready")
    assert ready.exit_code == 1 and "over the 1,000,000-byte limit" in ready.stdout
    assert "STATUS.md  [size]" in cli("validate").stdout


@pytest.mark.parametrize(("raw", "says"), [
    ("---\nid: EXP-001\n---\nbody\n".encode("utf-16"), "UTF-16 text, not UTF-8"),
    ("---\nid: EXP-001\n---\nbody\n".encode("utf-16-le"), "UTF-16 text, not UTF-8"),
    (b"---\rid: EXP-001\rdate: 2026-03-09\r---\rbody\r",
     "its lines end with a bare CR (old Mac line endings)"),
])
def test_odd_encodings_and_line_endings_are_named(cli, project: Project, raw: bytes,
                                                  says: str) -> None:
    # UTF-16 was "binary file", CR-only "no frontmatter: the file must start with '---'"
    folder = project.root / "experiments"
    folder.mkdir(exist_ok=True)
    (folder / "EXP-001.md").write_bytes(raw)
    (project.root / "TASKS.yaml").write_bytes(raw)
    said = cli("validate").stdout
    assert f"EXP-001.md  [frontmatter] {says}" in said, said
    assert f"TASKS.yaml: {says}" in said, said


def test_an_atom_with_60000_keys_gives_one_capped_list(cli, write_atom: Callable[..., Path]) \
        -> None:
    write_atom("EXP-001", extra="".join(f"k{i}: v\n" for i in range(60_000)))
    said = cli("validate").stdout
    assert said.count("[unknown-key]") == 11, said[:2000]
    assert "… and 59,990 more unknown keys" in said
