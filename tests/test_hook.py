"""The PostToolUse hook: payloads → access-log lines, failing open, standard library only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortexfs import accesslog, hook
from cortexfs.store import Project, Store

FIXTURES = Path(__file__).parent / "fixtures" / "claude-code"
EXPECTED: dict[str, list[str]] = json.loads((FIXTURES / "expected.json").read_text())
SCRIPT = Path(__file__).resolve().parent.parent / "hooks" / "memory-ref-tracker"
ATOMS = ["experiments/EXP-021.md", "experiments/EXP-022.md", "experiments/EXP-025.md",
         "experiments/EXP-033.md", "experiments/EXP-040.md", "experiments/EXP-042.md",
         "knowledge/K-003.md", "knowledge/K-008.md", "knowledge/K-011.md", "knowledge/K-012.md",
         "patterns/PAT-001.md", "patterns/PAT-003.md"]


@pytest.fixture(autouse=True)
def no_autocommit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")  # test_autocommit.py covers the hand-off


@pytest.fixture
def dev(tmp_path: Path, project: Project) -> Path:
    """A stand-in for /home/dev: the store's atoms exist, /home/dev/flywheel is a work dir."""
    for rel in ATOMS:
        path = project.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nid: {path.stem}\n---\nbody\n", encoding="utf-8")
    dev = tmp_path / "dev"
    (dev / "flywheel").mkdir(parents=True)
    os.symlink(project.store.home, dev / ".cortex")
    os.symlink(project.store.projects_dir, dev / "notes")
    return dev


def payload_for(name: str, dev: Path) -> bytes:
    return (FIXTURES / name).read_text().replace("/home/dev", str(dev)).encode()


def run(payload: bytes | str, store: Store) -> int:
    data = payload.encode() if isinstance(payload, str) else payload
    return hook.main(["--home", str(store.home)], data)


def logged(project: Project) -> list[dict[str, str]]:
    if not project.access_log.exists():
        return []
    return [json.loads(line) for line in project.access_log.read_text().splitlines()]


def hook_log(store: Store) -> list[str]:
    path = store.logs_dir / "hook.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_logs_what_it_should(name: str, dev: Path, project: Project) -> None:
    raw = payload_for(name, dev)
    assert run(raw, project.store) == 0
    lines = logged(project)
    assert [line["file"] for line in lines] == EXPECTED[name]
    tool = json.loads(raw)["tool_name"]
    for line in lines:
        assert set(line) == {"file", "tool", "ts", "session"}
        assert line["tool"] == tool
        assert line["session"] == "3f2a9c1e-7b4d-4e0a-9a51-2c8d0e6f1b77"
        assert line["ts"].endswith("Z") and line["ts"][:4].isdigit()
    assert hook_log(project.store) == []


def test_every_fixture_file_has_an_expectation() -> None:
    assert {p.name for p in FIXTURES.glob("*.json")} - {"expected.json"} == set(EXPECTED)


@pytest.mark.parametrize("text", [
    '{"a": [1, -2.5e3, NaN, Infinity, null, true, false, "\\u00e9\\ud800"], "b": {}}',
    '  {"tool_name": "Read"}\n', '[]', '"x"', '3', '{"a": 1} {"b": 2}', '{"a": ', '',
    '{"a": "tab\there"}', '{"a": 1,}', "{'a': 1}",
])
def test_loads_is_json_loads(text: str) -> None:
    import json as json_module

    try:
        expected: object = json_module.loads(text)
    except ValueError as e:
        with pytest.raises(ValueError):
            hook.loads(text.encode())
        assert type(e) is json_module.JSONDecodeError
        return
    assert repr(hook.loads(text.encode())) == repr(expected)
    assert repr(hook.loads(text.encode("utf-16"))) == repr(expected)  # via json.loads


def test_one_line_per_atom_per_call_and_one_write_per_project(
        dev: Path, project: Project, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    atom = other.root / "knowledge" / "K-001.md"
    atom.write_text("x")
    exp = project.root / "experiments" / "EXP-021.md"
    writes: list[str] = []
    real_append = accesslog.append
    monkeypatch.setattr(accesslog, "append",
                        lambda path, lines: writes.append(str(path)) or real_append(path, lines))
    cmd = f"cat {exp} {exp} && head {atom} {exp}; grep -c x {atom}"
    run(json.dumps({"session_id": "s", "cwd": "/", "tool_name": "Bash",
                    "tool_input": {"command": cmd}, "tool_response": {"stdout": "1"}}), store)
    assert [e["file"] for e in logged(project)] == ["EXP-021.md"]
    assert [e["file"] for e in logged(other)] == ["K-001.md"]
    assert sorted(writes) == sorted([str(project.access_log), str(other.access_log)])


def test_symlink_inside_store_pointing_outside_is_ignored(
        dev: Path, project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "EXP-900.md"
    outside.write_text("secret")
    os.symlink(outside, project.root / "experiments" / "EXP-900.md")
    os.symlink(project.root / "experiments" / "EXP-021.md",
               project.root / "experiments" / "EXP-901.md")
    for name in ("EXP-900.md", "EXP-901.md", "EXP-021.md"):
        run(json.dumps({"session_id": "s", "cwd": "/", "tool_name": "Read",
                        "tool_input": {"file_path": str(project.root / "experiments" / name)}}),
            project.store)
    # a link in the store is not part of it (cortexfs.wall), even one to an atom; a folder
    # outside the store that links into it is only a way there (the `dev` fixture's paths)
    assert [e["file"] for e in logged(project)] == ["EXP-021.md"]


def test_missing_atom_file_and_wrong_folder_are_not_counted(dev: Path, project: Project) -> None:
    misplaced = project.root / "knowledge" / "EXP-021.md"
    misplaced.write_text("x")
    (project.root / "_meta").mkdir(exist_ok=True)
    for path in (project.root / "experiments" / "EXP-999.md", misplaced,
                 project.root / "experiments" / "sub" / "EXP-021.md"):
        run(json.dumps({"tool_name": "Read", "tool_input": {"file_path": str(path)},
                        "cwd": "/"}), project.store)
    assert logged(project) == []


def test_session_missing_or_odd_is_tolerated(dev: Path, project: Project) -> None:
    path = str(project.root / "experiments" / "EXP-021.md")
    run(json.dumps({"tool_name": "Read", "tool_input": {"file_path": path}}), project.store)
    run(json.dumps({"tool_name": "Read", "session_id": 7, "tool_input": {"file_path": path}}),
        project.store)
    assert [e["session"] for e in logged(project)] == ["", "7"]


@pytest.mark.parametrize("payload, problem", [
    (b"", "empty payload"),
    (b"   \n", "empty payload"),
    (b"{not json", "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"),
    (b"[1, 2]", "JSON list"),
    (b'"Read"', "JSON str"),
    (b'{"tool_name": "Read", "tool_input": "EXP-001.md"}', "no tool_input object"),
    (b'{"tool_name": "Read", "tool_input": {"file_path": 42}}', "file_path is a int"),
    (b'{"tool_name": "Grep", "tool_input": {"path": ["x"]}}', "path is a list"),
    (b'{"tool_name": "Bash", "tool_input": {"command": {"a": 1}}}', "command is a dict"),
    (b'{"tool_name": "Read", "cwd": 3, "tool_input": {"file_path": "x"}}', "cwd is a int"),
])
def test_bad_payloads_fail_open(payload: bytes, problem: str, project: Project,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert run(payload, project.store) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    lines = hook_log(project.store)
    assert len(lines) == 1 and problem in lines[0], lines
    assert logged(project) == []


def test_unknown_tool_and_odd_responses_are_quiet(dev: Path, project: Project) -> None:
    for raw in ({"tool_name": "Write", "tool_input": {}},
                {"tool_name": None, "tool_input": {}},
                {"tool_name": "Grep", "tool_input": {"path": "/"}, "tool_response": 12},
                {"tool_name": "Bash", "tool_input": {"command": "cat"},
                 "tool_response": ["x"]}):
        assert run(json.dumps(raw), project.store) == 0
    assert logged(project) == [] and hook_log(project.store) == []


def test_missing_store_fails_open(tmp_path: Path) -> None:
    home = tmp_path / "not-a-store"
    home.mkdir()
    payload = json.dumps({"tool_name": "Read", "tool_input": {"file_path": "/x/EXP-001.md"}})
    assert hook.main(["--home", str(home)], payload.encode()) == 0
    lines = (home / "logs" / "hook.log").read_text().splitlines()
    assert len(lines) == 1 and "no cortex store" in lines[0]


def test_a_home_that_names_no_folder_is_never_made(tmp_path: Path) -> None:
    """A hook left installed for a store that was moved or deleted (or a typo in --home)
    writes nothing anywhere: neither its home nor a parent of it is made for the log."""
    home = tmp_path / "gone" / "store"
    payload = json.dumps({"tool_name": "Read", "tool_input": {"file_path": "/x/EXP-001.md"}})
    assert hook.main(["--home", str(home)], payload.encode()) == 0
    proc = subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), "--home", str(home)],
                          input=payload.encode(), capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert not (tmp_path / "gone").exists()


def test_unwritable_log_fails_open(dev: Path, project: Project) -> None:
    project.meta_dir.mkdir(exist_ok=True)
    project.access_log.mkdir()  # appending to a folder fails like a read-only disk would
    path = str(project.root / "experiments" / "EXP-021.md")
    assert run(json.dumps({"tool_name": "Read", "tool_input": {"file_path": path}}),
               project.store) == 0
    lines = hook_log(project.store)
    assert len(lines) == 1 and "cannot log the read: [Errno 21] Is a directory" in lines[0]
    assert "a bug" not in lines[0]  # the file system's refusal, not the hook's fault


def test_huge_payload(dev: Path, project: Project) -> None:
    exp = project.root / "experiments" / "EXP-021.md"
    content = "\n".join(f"{exp}:{i}:" + "x" * 100 for i in range(90_000))  # ~10 MB
    raw = json.dumps({"tool_name": "Grep", "tool_input": {"path": str(exp.parent),
                                                          "output_mode": "content"},
                      "tool_response": {"mode": "content", "content": content}})
    assert len(raw) > 10_000_000
    assert run(raw, project.store) == 0
    assert [e["file"] for e in logged(project)] == ["EXP-021.md"]
    assert run(b"{" + b" " * (hook.MAX_PAYLOAD + 1) + b"}", project.store) == 0
    assert "is over" in hook_log(project.store)[0]


def test_hook_log_is_rotated(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook, "HOOK_LOG_MAX", 200)
    for _ in range(10):
        run(b"", project.store)
    assert (project.store.logs_dir / "hook.log.1").exists()
    assert (project.store.logs_dir / "hook.log").stat().st_size <= 300


@pytest.mark.parametrize("command, operands", [
    ("cat a.md | head -20 && head -40 b.md", [("cat", ["a.md"]), ("head", ["b.md"])]),
    ("head -n 5 a.md; tail -n5 b.md; head -c 100 c.md", [
        ("head", ["a.md"]), ("tail", ["b.md"]), ("head", ["c.md"])]),
    ("sed -n '1,5p' a.md", [("sed", ["a.md"])]),
    ("sed -n -e 1p -e 2p a.md b.md", [("sed", ["a.md", "b.md"])]),
    ("sed -i.bak 's/x/y/' a.md", []),
    ("grep -rn -e foo -e bar dir", [("grep", ["dir"])]),
    ("grep -A 3 foo a.md", [("grep", ["a.md"])]),
    ("grep -A3 foo a.md", [("grep", ["a.md"])]),
    ("grep foo", []),  # reads its standard input
    ("rg -t md -g '*.md' foo dir1 dir2", [("rg", ["dir1", "dir2"])]),
    ("rg foo", [("rg", [])]),
    ("awk -F: -v x=1 '{print $1}' n=2 a.md", [("awk", ["a.md"])]),
    ("LC_ALL=C sudo -u me timeout 5 cat -- -odd.md", [("cat", ["-odd.md"])]),
    ("less +G a.md < b.md 2>&1", [("less", ["+G", "a.md", "b.md"])]),
    ("cat a#b.md # c.md", [("cat", ["a#b.md"])]),
    ("bat --style=plain --line-range 1:5 a.md", [("bat", ["a.md"])]),
    ("ls x; wc -l a.md; vim a.md; python x.py", []),
    ("cat 'unbalanced", []),
    ("more a.md\nnl -ba b.md", [("less", ["a.md"]), ("nl", ["b.md"])]),
    ("cat \\\n  a.md", [("cat", ["a.md"])]),
])
def test_shell_parsing(command: str, operands: list[tuple[str, list[str]]]) -> None:
    got = [(program, files) for program, files, _ in hook.shell_reads(command, "/w")]
    assert got == operands


def test_shell_cd_globs_and_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    for name in ("EXP-001.md", "EXP-002.md", "notes.txt"):
        (tmp_path / "d" / name).write_text("x")
    monkeypatch.setenv("HOME", str(tmp_path))
    got = list(hook.shell_reads("cd ~/d && cat EXP-*.md; head $HOME/d/notes.txt", "/"))
    assert got == [("cat", sorted([str(tmp_path / "d" / "EXP-001.md"),
                                   str(tmp_path / "d" / "EXP-002.md")]), str(tmp_path / "d")),
                   ("head", [f"{tmp_path}/d/notes.txt"], str(tmp_path / "d"))]


def test_script_runs_the_real_hook_and_imports_only_stdlib(dev: Path, project: Project) -> None:
    """The installed command line, in a real process: logs, prints nothing, stays light."""
    from cortexfs.claude_settings import hook_command

    payload = payload_for("read.json", dev)
    command = hook_command(project.store.home)
    assert str(SCRIPT) in command
    env = dict(os.environ, CORTEX_AUTOCOMMIT="0", PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run(["bash", "-c", command.replace(" -I ", " -X importtime -I ")],
                          input=payload, capture_output=True, env=env, cwd="/", timeout=30)
    assert proc.returncode == 0 and proc.stdout == b""
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "cortexfs" in imported and "_json" in imported
    heavy = {"yaml", "frontmatter", "git", "jinja2", "watchdog", "typer", "click", "rich",
             "bm25s", "mcp", "numpy", "dataclasses", "inspect", "subprocess", "pathlib",
             "json", "re", "enum", "shlex", "datetime", "typing"}  # a Read needs none of them
    assert not imported & heavy, imported & heavy
    assert [e["file"] for e in logged(project)] == ["EXP-042.md"]


def test_script_away_from_cortexfs_uses_site_packages_else_fails_open(tmp_path: Path) -> None:
    lone = tmp_path / "elsewhere" / "hooks" / "memory-ref-tracker"
    lone.parent.mkdir(parents=True)
    lone.write_bytes(SCRIPT.read_bytes())
    home = tmp_path / "store"
    home.mkdir()
    # this venv's interpreter finds cortexfs in its site-packages after all
    proc = subprocess.run([sys.executable, "-I", "-S", str(lone), "--home", str(home)],
                          input=b'{"tool_name": "Read"}', capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert "no tool_input" in (home / "logs" / "hook.log").read_text()
    # the base interpreter under the venv has no cortexfs at all
    base = os.path.realpath(sys.executable)
    assert subprocess.run([base, "-c", "import cortexfs"], capture_output=True,
                          cwd=tmp_path).returncode
    proc = subprocess.run([base, "-I", "-S", str(lone), "--home", str(home)],
                          input=b'{"tool_name": "Read"}', capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert "cannot import cortexfs" in (home / "logs" / "hook.log").read_text()


@pytest.mark.parametrize("stdin", [b"", b"not json", b"[]" * 10])
def test_script_fails_open_on_bad_input(stdin: bytes, project: Project) -> None:
    proc = subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), "--home",
                           str(project.store.home)], input=stdin, capture_output=True,
                          timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert len(hook_log(project.store)) == 1


# --- bounded work (issue 12): whatever the payload, the hook stops in time ---------------------

def _grep(names: list[str], path: str = "/") -> str:
    return json.dumps({"session_id": "s", "cwd": "/", "tool_name": "Grep",
                       "tool_input": {"pattern": "x", "path": path},
                       "tool_response": {"mode": "files_with_matches", "filenames": names}})


def _bash(command: str, cwd: str = "/") -> str:
    return json.dumps({"session_id": "s", "cwd": cwd, "tool_name": "Bash",
                       "tool_input": {"command": command}, "tool_response": {"stdout": ""}})


def test_a_glob_lists_a_bounded_number_of_folders(dev: Path, project: Project, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # `cat /*/*/*/*/*/zz*` (18 bytes) walked the whole file system: 3.6–11 s
    tree = tmp_path / "tree"
    for i in range(40):
        for j in range(40):
            (tree / f"d{i}" / f"e{j}").mkdir(parents=True)
    listed = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        listed.append(path)
        return real(path)

    monkeypatch.setattr(hook.os, "scandir", counting)
    exp = project.root / "experiments"
    assert run(_bash(f"cat {tree}/*/*/zz* {exp}/EXP-02*.md"), project.store) == 0
    assert len(listed) <= hook.MAX_GLOB_DIRS
    assert "globs listed 1,000 folders" in hook_log(project.store)[-1]
    # the budget is the call's: the atoms' glob came after it and found nothing to list
    listed.clear()
    assert run(_bash(f"cat {exp}/EXP-02*.md"), project.store) == 0
    assert [e["file"] for e in logged(project)] == ["EXP-021.md", "EXP-022.md", "EXP-025.md"]


def test_shell_tokens_are_shlex_s_in_one_linear_pass() -> None:
    import shlex

    for command in ["cat a 'b c' \"d \\\"e\\\" f\" g\\ h", "a|b&&c||d;e&f|&g", "x>y 2>&1 <z",
                    "cat a#b # c", "echo $(cat x) `cat y`", "a <<< w", "(cat x)", "a\\\\b"]:
        lexer = shlex.shlex(command.replace("`", ";"), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "" if "#" not in command else "#"
        expected = [t for t in lexer]
        if "# c" in command:
            expected = ["cat", "a#b"]
        assert hook.shell_tokens(command) == expected, command
    long = "cat " + "a" * 1_000_000  # shlex: quadratic in a word's length (1 MB: 38 s)
    assert hook.shell_tokens(long) == ["cat", "a" * 1_000_000]


def test_a_huge_file_list_is_capped_and_bad_names_skip_only_themselves(
        dev: Path, project: Project) -> None:
    # 600,000 names took 15–48 s (one realpath each); a NUL or a lone surrogate in one
    # name dropped the valid reads of the same call ("a bug")
    exp = project.root / "experiments"
    names = [str(exp / "EXP-021.md"), "bad\0name/EXP-1.md", "/x/\ud800/EXP-2.md",
             str(exp / "\ud800EXP-3.md")]
    names += [f"/nowhere/d{i % 500}/EXP-{i}.md" for i in range(600_000)]
    names.append(str(exp / "EXP-022.md"))  # past the cap: not looked at
    assert run(_grep(names), project.store) == 0
    assert [e["file"] for e in logged(project)] == ["EXP-021.md"]
    log = hook_log(project.store)
    assert len(log) == 1 and f"the first {hook.MAX_NAMES:,} of 600,005 file names" in log[0]
    assert "bug" not in log[0]
    command = f"cat {exp}/EXP-022.md bad\0name {exp}/\udcff.md; head {exp}/EXP-025.md"
    assert "\\u0000" in _bash(command)  # a NUL and a lone surrogate, as JSON escapes
    assert run(_bash(command), project.store) == 0
    assert [e["file"] for e in logged(project)][1:] == ["EXP-022.md", "EXP-025.md"]


@pytest.mark.parametrize("payload, says", [
    (b'{"tool_name": "Read", "tool_input": {"file_path": "' + b"[" * 100_000, "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
    (b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, "nests deeper"),
])
def test_malformed_json_is_not_a_hook_payload_not_a_bug(payload: bytes, says: str,
                                                        project: Project) -> None:
    # truncated JSON was logged as "SystemError … (a bug)", deep JSON as RecursionError
    assert run(payload, project.store) == 0
    line = hook_log(project.store)[0]
    assert "not a hook payload" in line and says in line and "bug" not in line


def test_the_deadline_keeps_what_was_found(dev: Path, project: Project,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook, "MAX_SECONDS", 0.0)
    exp = project.root / "experiments"
    names = [str(exp / "EXP-021.md")] * 300 + [str(exp / "EXP-022.md")] * 5000
    assert run(_grep(names), project.store) == 0
    assert [e["file"] for e in logged(project)] == ["EXP-021.md"]  # found before the stop
    assert "stopped after 0 s of CPU (1 line(s) logged)" in hook_log(project.store)[0]
