"""TASKS.yaml: schema checks, dependency cycles, and the `cortex tasks` commands."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import tasks
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project

GOOD = """\
# my queue — keep this comment
tasks:
  - id: T-1   # the first one
    text: Measure the baseline
    status: done
    priority: P1
    why: every later change is judged against it
    done-when: EXP-001 records the numbers
    completed-at: 2026-01-02

  # a comment about T-2
  - id: T-2
    text: Write the loader
    status: doing
    depends-on: [T-1]
  - id: T-3
    text: Benchmark it
    status: todo
    priority: P0
    depends-on:
      - T-2
"""


def _parse(text: str, archived: set[str] | None = None) -> tasks.TaskFile:
    return tasks.parse(text, Path("TASKS.yaml"), archived)


def _messages(tf: tasks.TaskFile, level: str = "error") -> list[str]:
    return [p.message for p in tf.problems if p.level == level]


def _git_log(project: Project) -> list[str]:
    out = subprocess.run(["git", "log", "--format=%s"], cwd=project.store.home,
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


# --- schema ------------------------------------------------------------------------------------


def test_good_file_has_no_problems() -> None:
    tf = _parse(GOOD)
    assert tf.problems == []
    assert [t.id for t in tf.tasks] == ["T-1", "T-2", "T-3"]
    assert tf.tasks[0].completed_at == dt.date(2026, 1, 2)
    assert tf.tasks[2].depends_on == ["T-2"]
    assert tf.tasks[1].line == 12
    assert tf.open_count() == sum(t.status != "done" for t in tf.tasks)


def test_top_level_list_and_empty_files_are_accepted() -> None:
    assert _parse("- id: T-1\n  text: a\n  status: todo\n").problems == []
    for text in ("", "# nothing yet\n", "tasks: []\n", "tasks:\n", "[]\n"):
        tf = _parse(text)
        assert tf.problems == [] and tf.tasks == [], text


@pytest.mark.parametrize("text, line, message", [
    ("tasks: [\n", 2, "invalid YAML"),
    ("tasks:\n  - id: T-1\n   text: x\n", 3, "invalid YAML"),
    ("just a string\n", 1, "must be a list of tasks"),
    ("tasks: {a: 1}\n", 1, "`tasks:` must be a list"),
    ("tasks:\n  - hello\n", 2, "task #1 is not a mapping"),
    ("tasks:\n  - text: x\n    status: todo\n", 2, "task #1 has no id"),
    ("tasks:\n  - id: two words\n    text: x\n    status: todo\n", 2, "must be one word"),
    ("tasks:\n  - id: T-1\n    status: todo\n", 2, "task T-1 has no text"),
    ("tasks:\n  - id: T-1\n    text: x\n", 2, "status is missing"),
    ("tasks:\n  - id: T-1\n    text: x\n    status: started\n", 4, "status is 'started'"),
    ("tasks:\n  - id: T-1\n    text: x\n    status: todo\n    priority: [1]\n", 5,
     "priority must be a single value"),
    ("tasks:\n  - id: T-1\n    text: x\n    status: todo\n    why: {a: b}\n", 5,
     "`why` must be text"),
    ("tasks:\n  - id: T-1\n    text: x\n    status: todo\n    depends-on: {a: b}\n", 5,
     "`depends-on` must be a list"),
    ("tasks:\n  - id: T-1\n    text: x\n    status: done\n    completed-at: someday\n", 5,
     "is not a date"),
    ("tasks:\n  - {id: T-1, text: x, status: todo}\n  - {id: T-1, text: y, status: todo}\n", 3,
     "duplicate task id T-1 (also on line 2)"),
    ("tasks:\n  - {id: T-1, text: x, status: todo, depends-on: [T-9]}\n", 2,
     "task T-1 depends on T-9, which is neither"),
])
def test_schema_errors_name_the_line(text: str, line: int, message: str) -> None:
    tf = _parse(text)
    errors = tf.errors
    assert errors, text
    assert any(message in e.message and e.line == line for e in errors), errors


@pytest.mark.parametrize("text, message", [
    ("tasks:\n  - {id: T-1, text: x, status: done}\n", "done but has no completed-at"),
    ("tasks:\n  - {id: T-1, text: x, status: todo, completed-at: 2026-01-01}\n",
     "has completed-at but status todo"),
    ("tasks:\n  - {id: T-1, text: x, status: todo, owner: me}\n", "unknown key 'owner'"),
])
def test_schema_warnings(text: str, message: str) -> None:
    tf = _parse(text)
    assert tf.errors == []
    assert any(message in m for m in _messages(tf, "warning"))


def test_dependency_on_an_archived_task_is_known() -> None:
    text = "tasks:\n  - {id: T-2, text: x, status: todo, depends-on: [T-1]}\n"
    assert _parse(text).errors
    assert _parse(text, {"T-1"}).errors == []
    archive = "# Archived\n\n## Archived 2026-01-09\n\n### T-1: Measure\n\n- status: done\n"
    assert tasks.archived_ids(archive) == {"T-1"}


def test_cycle_is_reported_with_its_path() -> None:
    text = ("tasks:\n"
            "  - {id: T-1, text: a, status: todo, depends-on: [T-3]}\n"
            "  - {id: T-2, text: b, status: todo}\n"
            "  - {id: T-3, text: c, status: todo, depends-on: [T-1, T-2]}\n"
            "  - {id: T-4, text: d, status: todo, depends-on: [T-4]}\n")
    messages = _messages(_parse(text))
    assert any("dependency cycle T-1 → T-3 → T-1" in m for m in messages), messages
    assert any("dependency cycle T-4 → T-4" in m for m in messages), messages
    assert len([m for m in messages if "cycle" in m]) == 2


def test_find_cycles_reports_each_cycle_once_and_survives_long_chains() -> None:
    graph = {"T-1": ["T-2"], "T-2": ["T-3"], "T-3": ["T-1"], "T-10": ["T-2"]}
    assert tasks.find_cycles(graph) == [["T-1", "T-2", "T-3", "T-1"]]
    chain = {f"T-{i}": [f"T-{i + 1}"] for i in range(5000)}
    assert tasks.find_cycles(chain) == []
    assert tasks.find_cycles({"T-1": ["T-2"], "T-2": []}) == []


# --- editing -----------------------------------------------------------------------------------


def _write(project: Project, text: str) -> Path:
    path = project.root / "TASKS.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_add_appends_a_block_and_keeps_comments(project: Project) -> None:
    path = _write(project, GOOD)
    result = tasks.add_task(project, "Ship it", priority="P2", why="users wait",
                            done_when="tag pushed", depends_on=["T-3"])
    assert not result.rewritten
    assert result.tasks[0].id == "T-4"
    text = path.read_text()
    assert text.startswith(GOOD)
    assert text[len(GOOD):] == ("  - id: T-4\n    text: Ship it\n    status: todo\n"
                                "    priority: P2\n    why: users wait\n"
                                "    done-when: tag pushed\n    depends-on: [T-3]\n")


def test_add_to_the_scaffolded_file(project: Project) -> None:
    original = (project.root / "TASKS.yaml").read_text()
    first = tasks.add_task(project, "First: with a colon")
    second = tasks.add_task(project, "Second", depends_on=["T-1"])
    assert (first.tasks[0].id, second.tasks[0].id) == ("T-1", "T-2")
    text = (project.root / "TASKS.yaml").read_text()
    header = original.split("tasks: []")[0]
    assert text.startswith(header)
    tf = tasks.load(project)
    assert tf.problems == []
    assert [t.text for t in tf.tasks] == ["First: with a colon", "Second"]


def test_add_numbers_after_archived_ids(project: Project) -> None:
    (project.root / "tasks-archive.md").write_text("# A\n\n### T-7: old\n")
    assert tasks.add_task(project, "new").tasks[0].id == "T-8"


@pytest.mark.parametrize("kwargs, message", [
    ({"text": "  "}, "task text is empty"),
    ({"text": "a\nb"}, "one line"),
    ({"text": "x", "depends_on": ["T-9"]}, "no task T-9"),
    ({"text": "x", "status": "later"}, "unknown status"),
])
def test_add_rejects_bad_input_and_writes_nothing(project: Project, kwargs: dict[str, object],
                                                  message: str) -> None:
    before = (project.root / "TASKS.yaml").read_bytes()
    with pytest.raises(InvalidInputError, match=message):
        tasks.add_task(project, **kwargs)  # type: ignore[arg-type]
    assert (project.root / "TASKS.yaml").read_bytes() == before


def test_add_refuses_unparseable_file(project: Project) -> None:
    _write(project, "tasks: [\n")
    with pytest.raises(InvalidInputError, match=r"TASKS.yaml:2: invalid YAML"):
        tasks.add_task(project, "x")


def test_alias_loop_is_an_error_not_a_crash(project: Project, cli) -> None:
    _write(project, "- &a [*a]\n")  # a task list that contains itself
    before = (project.root / "TASKS.yaml").read_bytes()
    with pytest.raises(InvalidInputError, match=r"TASKS.yaml: the YAML nests more than .* "
                       "alias that contains itself"):
        tasks.add_task(project, "x")
    assert (project.root / "TASKS.yaml").read_bytes() == before
    result = cli("tasks", "list", "-p", "flywheel")
    assert result.exit_code == 1 and ":None" not in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_flow_style_list_falls_back_to_a_rewrite(project: Project) -> None:
    _write(project, "# head comment\ntasks: [{id: T-1, text: a, status: todo}]  # gone\n")
    result = tasks.add_task(project, "b")
    assert result.rewritten
    text = (project.root / "TASKS.yaml").read_text()
    assert text.startswith("# head comment\n")
    assert [t.id for t in tasks.load(project).tasks] == ["T-1", "T-2"]


def test_done_edits_only_status_and_completed_at(project: Project) -> None:
    path = _write(project, GOOD)
    result = tasks.set_status(project, "T-2", "done", today=dt.date(2026, 2, 3))
    assert not result.rewritten
    expected = GOOD.replace("    status: doing\n    depends-on: [T-1]\n",
                            "    status: done\n    depends-on: [T-1]\n"
                            "    completed-at: 2026-02-03\n")
    assert path.read_text() == expected
    # flow-mapping tasks and a task whose last value is a block list
    flow = "tasks:\n  - {id: T-1, text: a, status: todo}  # keep\n"
    _write(project, flow)
    tasks.set_status(project, "T-1", "done", today=dt.date(2026, 2, 3))
    assert path.read_text() == ("tasks:\n  - {id: T-1, text: a, status: done, "
                                "completed-at: 2026-02-03}  # keep\n")
    _write(project, GOOD)
    tasks.set_status(project, "T-3", "done", today=dt.date(2026, 2, 3))
    assert path.read_text().endswith("    depends-on:\n      - T-2\n"
                                     "    completed-at: 2026-02-03\n")


def test_done_keeps_an_existing_completed_at_and_unknown_id_fails(project: Project) -> None:
    path = _write(project, GOOD)
    result = tasks.set_status(project, "T-1", "done")
    assert result.paths == [] and path.read_text() == GOOD
    with pytest.raises(InvalidInputError, match="no task T-9 in flywheel"):
        tasks.set_status(project, "T-9", "done")


def test_crlf_file_keeps_crlf(project: Project) -> None:
    path = project.root / "TASKS.yaml"
    path.write_bytes(GOOD.replace("\n", "\r\n").encode())
    tasks.add_task(project, "x")
    tasks.set_status(project, "T-3", "done")
    raw = path.read_bytes()
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")


def test_archive_moves_old_done_tasks(project: Project) -> None:
    path = _write(project, GOOD + "  - id: T-4\n    text: Recent\n    status: done\n"
                  "    completed-at: 2026-01-08\n")
    result = tasks.archive(project, today=dt.date(2026, 1, 9))
    assert [t.id for t in result.tasks] == ["T-1"]
    text = path.read_text()
    assert "T-1" not in text.split("tasks:")[1].split("- id: T-2")[0]
    assert text.startswith("# my queue — keep this comment\ntasks:\n")
    assert "  # a comment about T-2\n  - id: T-2\n" in text
    assert "- id: T-4" in text
    archive = (project.root / "tasks-archive.md").read_text()
    assert "## Archived 2026-01-09" in archive
    assert "### T-1: Measure the baseline" in archive
    for fact in ("completed-at: 2026-01-02", "priority: P1",
                 "- why: every later change is judged against it",
                 "- done-when: EXP-001 records the numbers"):
        assert fact in archive
    # T-2 depends on T-1, now archived: still a known dependency
    assert tasks.load(project).errors == []
    # running again the same day adds nothing
    assert tasks.archive(project, today=dt.date(2026, 1, 9)).tasks == []


def test_archive_every_task_leaves_an_empty_list(project: Project) -> None:
    _write(project, "# q\ntasks:\n  - {id: T-1, text: a, status: done, completed-at: 2026-01-01}\n")
    tasks.archive(project, today=dt.date(2026, 2, 1))
    assert (project.root / "TASKS.yaml").read_text() == "# q\ntasks: []\n"
    assert tasks.load(project).tasks == []


def test_a_project_without_its_task_files(project: Project) -> None:
    (project.root / "TASKS.yaml").unlink()
    (project.root / "tasks-archive.md").unlink()
    empty = tasks.load(project)
    assert (empty.tasks, empty.problems) == ([], [])
    with Days() as days:
        tasks.add_task(project, "First", status="done")
    assert (project.root / "TASKS.yaml").read_text() in days.either(
        lambda d: f"- id: T-1\n  text: First\n  status: done\n  completed-at: {d}\n")
    result = tasks.archive(project, older_than_days=0, today=days.last + dt.timedelta(days=1))
    assert [t.id for t in result.tasks] == ["T-1"]
    assert "### T-1: First" in (project.root / "tasks-archive.md").read_text()
    assert (project.root / "TASKS.yaml").read_text() == ""  # an empty file: no tasks
    assert tasks.load(project).problems == []


def test_archive_after_a_crash_does_not_duplicate(project: Project) -> None:
    _write(project, GOOD)
    (project.root / "tasks-archive.md").write_text("# A\n\n### T-1: Measure the baseline\n")
    result = tasks.archive(project, today=dt.date(2026, 1, 9))
    assert [t.id for t in result.tasks] == ["T-1"]
    assert (project.root / "tasks-archive.md").read_text().count("### T-1:") == 1
    assert "id: T-1" not in (project.root / "TASKS.yaml").read_text()


def test_archive_reports_undated_done_tasks_and_refuses_broken_files(project: Project) -> None:
    _write(project, "tasks:\n  - {id: T-1, text: a, status: done}\n")
    result = tasks.archive(project)
    assert result.tasks == [] and result.undated == ["T-1"]
    _write(project, "tasks:\n  - {id: T-1, text: a, status: todo, depends-on: [T-1]}\n")
    with pytest.raises(InvalidInputError, match="dependency cycle"):
        tasks.archive(project)


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_add_done_list_archive(cli, project: Project) -> None:
    r = cli("tasks", "add", "Measure the baseline", "--priority", "P1", "--why", "needed",
            "--done-when", "EXP-001 exists")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "T-1"
    r = cli("tasks", "add", "Write the loader", "-p", "flywheel", "-d", "T-1")
    assert r.stdout.strip() == "T-2"
    listing = cli("tasks", "list")
    assert listing.exit_code == 0
    lines = listing.stdout.splitlines()
    assert lines[0].startswith("T-1") and "P1" in lines[0]
    assert "(waits for T-1)" in lines[1]
    with Days() as days:
        assert cli("tasks", "done", "T-1").exit_code == 0
    assert "T-1" not in cli("tasks", "list").stdout
    data = json.loads(cli("tasks", "list", "--all", "--format", "json").stdout)
    assert [t["id"] for t in data["tasks"]] == ["T-2", "T-1"]
    assert data["tasks"][1]["completed-at"] in days.either(lambda d: d)
    log = _git_log(project)
    assert log[:3] == ["tasks: done T-1 — Measure the baseline",
                       "tasks: add T-2 — Write the loader",
                       "tasks: add T-1 — Measure the baseline"]
    # not old enough yet
    r = cli("tasks", "archive")
    assert r.exit_code == 0 and "nothing to archive" in r.stdout
    r = cli("tasks", "archive", "--older-than", "-1")
    assert r.exit_code == 1 and "--older-than" in r.stderr


def test_cli_archive_commits_with_the_auto_archive_message(cli, project: Project) -> None:
    _write(project, GOOD)
    subprocess.run(["git", "add", "-A"], cwd=project.store.home, check=True)
    subprocess.run(["git", "commit", "-qm", "setup"], cwd=project.store.home, check=True)
    r = cli("tasks", "archive")
    assert r.exit_code == 0, r.output
    assert "flywheel: archived T-1" in r.stdout
    assert _git_log(project)[0] == "auto-archive: completed tasks (flywheel: T-1)"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project.store.home,
                            capture_output=True, text=True).stdout
    assert status == ""


def test_cli_no_commit_and_errors(cli, project: Project) -> None:
    r = cli("tasks", "add", "x", "--no-commit")
    assert r.exit_code == 0
    assert "tasks: add" not in " ".join(_git_log(project))
    for args, message in [
        (("tasks", "done", "T-9"), "no task T-9"),
        (("tasks", "add", "x", "-d", "T-5"), "no task T-5"),
        (("tasks", "list", "--status", "later"), "unknown --status"),
        (("tasks", "list", "-p", "nope"), "no project named 'nope'"),
    ]:
        r = cli(*args)
        assert r.exit_code == 1, args
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert "Traceback" not in r.output


def test_cli_needs_a_project_when_there_are_several(cli, project: Project) -> None:
    from cortexfs import scaffold

    scaffold.new_project(project.store, "other")
    r = cli("tasks", "add", "x")
    assert r.exit_code == 1
    assert "pass --project NAME (projects: flywheel, other)" in r.stderr


def test_cli_list_unparseable_file(cli, project: Project) -> None:
    _write(project, "tasks: [\n")
    r = cli("tasks", "list", "-p", "flywheel")
    assert r.exit_code == 1 and "TASKS.yaml:2: invalid YAML" in r.stderr
    r = cli("tasks", "list")
    assert r.exit_code == 0
    assert "run `cortex validate`" in r.stderr


def test_cli_list_all_projects_past_an_unreadable_tasks_file(cli, store, project: Project) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    assert cli("tasks", "add", "Keep going", "-p", "other").exit_code == 0
    (project.root / "TASKS.yaml").write_bytes(b"tasks:\n  - id: T-1\n    text: caf\xe9\n")
    listing = cli("tasks", "list")
    assert listing.exit_code == 0
    assert listing.stdout.splitlines() == ["other  T-1    todo    -    Keep going"]
    assert listing.stderr.count("\n") == 1 and "flywheel" in listing.stderr
    assert "not UTF-8 (byte 32): re-save the file as UTF-8" in listing.stderr
    data = json.loads(cli("tasks", "list", "--format", "json").stdout)
    assert [p["project"] for p in data["problems"]] == ["flywheel"]
    single = cli("tasks", "list", "-p", "flywheel")  # one project named: its error is the answer
    assert single.exit_code == 1 and single.stderr.startswith("error: ")
    assert other.name == "other"


# --- hand-written layouts, through the CLI -------------------------------------------------------
# Each edit: the file's exact bytes afterwards, what `cortex tasks list` then shows, and the way
# back (done, then archive) — every byte the edit did not own stays as the person wrote it.

class Days:
    """The days a call ran on: one, or two when it crossed midnight. A completed-at is checked
    against these, not against a day computed at import: a suite that ran across midnight once
    failed here."""

    def __enter__(self) -> Days:
        self.first = dt.date.today()
        return self

    def __exit__(self, *exc: object) -> None:
        self.last = dt.date.today()

    def either(self, expected: Callable[[str], str]) -> list[str]:
        """`expected` of each of those days, as an ISO date."""
        return [expected(day.isoformat()) for day in sorted({self.first, self.last})]


T1_DONE = "{id: T-1, text: a, status: done, completed-at: 2026-01-01}"


def _edit(cli, project: Project, before: str, *args: str) -> str:
    """Write `before` as TASKS.yaml, run `cortex tasks ARGS`, and return the file's text."""
    path = project.root / "TASKS.yaml"
    path.write_bytes(before.encode())
    r = cli("tasks", *args, "-p", "flywheel")
    assert r.exit_code == 0, r.output
    assert "rewritten" not in r.stderr  # edited in place, not re-serialised
    return path.read_bytes().decode()


def _listed(cli) -> list[tuple[str, str, str]]:
    data = json.loads(cli("tasks", "list", "--all", "-p", "flywheel", "--format", "json").stdout)
    assert data["problems"] == []
    return [(t["id"], t["status"], t["text"]) for t in data["tasks"]]


def _archive_all(project: Project) -> str:
    tasks.archive(project, today=dt.date.today() + dt.timedelta(days=9))
    return (project.root / "TASKS.yaml").read_bytes().decode()


@pytest.mark.parametrize("before, after", [
    ("[]\n", "- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("[]", "- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("[ ]\n", "- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("[]   \n# the end\n", "- id: T-1\n  text: Ship it\n  status: todo\n# the end\n"),
    ("# my queue\n\n[]\n# the end\n",
     "# my queue\n\n- id: T-1\n  text: Ship it\n  status: todo\n# the end\n"),
    ("# my queue\r\n[]\r\n", "# my queue\r\n- id: T-1\r\n  text: Ship it\r\n  status: todo\r\n"),
    ("\ufeff[]\n", "\ufeff- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("", "- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("# only\n# comments\n", "# only\n# comments\n- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("# no newline", "# no newline\n- id: T-1\n  text: Ship it\n  status: todo\n"),
    ("tasks: []  # none yet\nowner: me\n",
     "tasks: # none yet\n  - id: T-1\n    text: Ship it\n    status: todo\nowner: me\n"),
    ("tasks: ~\r\n", "tasks:\r\n  - id: T-1\r\n    text: Ship it\r\n    status: todo\r\n"),
])
def test_cli_add_to_an_empty_queue(cli, project: Project, before: str, after: str) -> None:
    assert _edit(cli, project, before, "add", "Ship it") == after
    assert _listed(cli) == [("T-1", "todo", "Ship it")]
    with Days() as days:
        done = _edit(cli, project, after, "done", "T-1")
    eol = "\r\n" if "\r\n" in after else "\n"
    last = after.rindex("status: todo") + len("status: todo") + len(eol)
    indent = "    " if "tasks:" in after else "  "
    assert done in days.either(lambda d: after[:last].replace("status: todo", "status: done")
                               + f"{indent}completed-at: {d}{eol}" + after[last:])
    assert _listed(cli) == [("T-1", "done", "Ship it")]
    emptied = _archive_all(project)
    assert tasks.load(project).tasks == [] and tasks.load(project).problems == []
    if "tasks:" in before:  # the mapping keeps its key: `tasks: []`
        assert emptied.startswith("tasks: []")


@pytest.mark.parametrize("before", [
    "tasks:\n", "tasks:", "tasks:\r\n", "'tasks':\n", "owner: me\ntasks:\nnotes: x\n",
    "tasks:\n# added below\n",
])
def test_cli_add_under_a_bare_tasks_key_adds_no_blank_line(cli, project: Project,
                                                           before: str) -> None:
    # `tasks:` with nothing after it once gained an empty line above the first task
    eol = "\r\n" if "\r\n" in before else "\n"
    colon = before.index(":", before.index("tasks")) + 1
    head, tail = before[:colon], before[colon:].removeprefix(eol)
    block = eol.join(["", "  - id: T-1", "    text: Ship it", "    status: todo", ""])
    assert _edit(cli, project, before, "add", "Ship it") == head + block + tail
    assert _listed(cli) == [("T-1", "todo", "Ship it")]


def test_cli_add_after_hand_written_tasks(cli, project: Project) -> None:
    before = ("\ufeff# queue — comments, blank lines, quoting and flow style\n"
              "- {id: T-1, text: \"a: quoted\", status: todo}  # flow\n"
              "\n"
              "# about T-2\n"
              "- id: 'T-2'\n"
              "  text: multi\n"
              "    line\n"
              "  status: doing   # kept\n"
              "  why: |\n"
              "    two\n"
              "    lines\n"
              "# trailing comment\n")
    new = "- id: T-3\n  text: \"x: y # z\"\n  status: todo\n  depends-on: [T-1, T-2]\n"
    at = before.index("# trailing")
    after = _edit(cli, project, before, "add", "x: y # z", "-d", "T-1,T-2")
    assert after == before[:at] + new + before[at:]
    assert _listed(cli) == [("T-2", "doing", "multi line"), ("T-1", "todo", "a: quoted"),
                            ("T-3", "todo", "x: y # z")]
    # a BOM before the first task, and a comment indented into the last task: both stay put
    bom = "\ufeff- id: T-1\n  text: a\n  status: todo\n  # T-1's own note\n# the end\n"
    at = bom.index("# the end")
    assert _edit(cli, project, bom, "add", "b") == (bom[:at] + "- id: T-2\n  text: b\n"
                                                    "  status: todo\n" + bom[at:])
    # no trailing newline, CRLF: the last line is ended in the file's own style
    crlf = "- id: T-1\r\n  text: a\r\n  status: todo"
    assert _edit(cli, project, crlf, "add", "b") == (crlf + "\r\n- id: T-2\r\n  text: b\r\n"
                                                      "  status: todo\r\n")


@pytest.mark.parametrize("before, after", [
    # a key whose value is empty gets one; a comment after it stays
    ("- id: T-1\n  text: a\n  status:\n",
     "- id: T-1\n  text: a\n  status: done\n  completed-at: {d}\n"),
    ("- id: T-1\n  text: a\n  status:   # fill in\n",
     "- id: T-1\n  text: a\n  status: done   # fill in\n  completed-at: {d}\n"),
    ("- id: T-1\n  text: a\n  status: todo\n  completed-at:\n  why: b\n",
     "- id: T-1\n  text: a\n  status: done\n  completed-at: {d}\n  why: b\n"),
    ("- id: T-1\r\n  text: a\r\n  status:",
     "- id: T-1\r\n  text: a\r\n  status: done\r\n  completed-at: {d}\r\n"),
    ("- id: T-1\n  text: a\n  status: \"todo\"  # q\n# next\n",
     "- id: T-1\n  text: a\n  status: \"done\"  # q\n  completed-at: {d}\n# next\n"),
    ("- id: T-1\n  text: a\n  status: 'todo'\n  completed-at: ''\n",
     "- id: T-1\n  text: a\n  status: 'done'\n  completed-at: '{d}'\n"),
    ('[{"id": "T-1", "text": "a", "status": "todo"}]',
     '[{"id": "T-1", "text": "a", "status": "done", completed-at: {d}}]'),
    ("- status: todo\n  id: T-1\n  text: a\n",
     "- status: done\n  id: T-1\n  text: a\n  completed-at: {d}\n"),
    # flow mappings: the new key goes inside the braces, in the person's spacing
    ("- { id: T-1, text: a, status: todo }  # spaced\n",
     "- { id: T-1, text: a, status: done, completed-at: {d} }  # spaced\n"),
    ("- {id: T-1, text: a, status: }\n",
     "- {id: T-1, text: a, status: done, completed-at: {d} }\n"),
    ("- {id: T-1,\n   text: a,\n   status: todo}\n",
     "- {id: T-1,\n   text: a,\n   status: done, completed-at: {d}}\n"),
    ("- &first {id: T-1, text: a, status: todo}\n",
     "- &first {id: T-1, text: a, status: done, completed-at: {d}}\n"),
    ("tasks: [{id: T-1, text: a, status: todo}]  # one\n",
     "tasks: [{id: T-1, text: a, status: done, completed-at: {d}}]  # one\n"),
])
def test_cli_done_on_hand_written_tasks(cli, project: Project, before: str, after: str) -> None:
    with Days() as days:
        done = _edit(cli, project, before, "done", "T-1")
    assert done in days.either(lambda d: after.replace("{d}", d))
    assert _listed(cli) == [("T-1", "done", "a")]
    assert _archive_all(project).count("T-1") == 0
    assert "### T-1: a" in (project.root / "tasks-archive.md").read_text()


@pytest.mark.parametrize("before, after", [
    # the comment lines directly above an archived task go with it
    ("- {id: T-2, text: b, status: todo}\n# about T-1\n# more\n- " + T1_DONE + "\n",
     "- {id: T-2, text: b, status: todo}\n"),
    ("tasks:\n  - {id: T-2, text: b, status: todo}\n\n  # about T-1\n  - " + T1_DONE
     + "\n  # about T-3\n  - {id: T-3, text: c, status: todo}\n",
     "tasks:\n  - {id: T-2, text: b, status: todo}\n\n"
     "  # about T-3\n  - {id: T-3, text: c, status: todo}\n"),
    ("- {id: T-2, text: b, status: todo}\r\n# about T-1\r\n- " + T1_DONE,
     "- {id: T-2, text: b, status: todo}\r\n"),
    # … but not past a blank line, nor the first task's (a header), nor a comment indented
    # into the task above (it belongs to that task)
    ("- {id: T-2, text: b, status: todo}\n# kept: a blank line follows\n\n- " + T1_DONE + "\n",
     "- {id: T-2, text: b, status: todo}\n# kept: a blank line follows\n\n"),
    ("# header\n- " + T1_DONE + "\n- {id: T-2, text: b, status: todo}\n",
     "# header\n- {id: T-2, text: b, status: todo}\n"),
    ("- id: T-2\n  text: b\n  status: todo\n  # the end of T-2\n- " + T1_DONE + "\n",
     "- id: T-2\n  text: b\n  status: todo\n  # the end of T-2\n"),
    ("\ufeff- " + T1_DONE + "\n- {id: T-2, text: b, status: todo}\n",
     "\ufeff- {id: T-2, text: b, status: todo}\n"),
    ("tasks:   # the list\n  # about T-1\n  - " + T1_DONE + "\nowner: me\n",
     "tasks: []   # the list\n  # about T-1\nowner: me\n"),
    # a comment indented into an archived task, below it, goes with it
    ("- {id: T-2, text: b, status: todo}\n- id: T-1\n  text: a\n  status: done\n"
     "  completed-at: 2026-01-01\n  # T-1's own note\n# about T-3\n"
     "- {id: T-3, text: c, status: todo}\n",
     "- {id: T-2, text: b, status: todo}\n# about T-3\n- {id: T-3, text: c, status: todo}\n"),
    ("- {id: T-2, text: b, status: todo}\n- " + T1_DONE + "\n    # T-1's own note",
     "- {id: T-2, text: b, status: todo}\n"),
])
def test_cli_archive_takes_a_tasks_own_comments(cli, project: Project, before: str,
                                                     after: str) -> None:
    path = project.root / "TASKS.yaml"
    path.write_bytes(before.encode())
    result = tasks.archive(project, today=dt.date(2026, 1, 9))
    assert [t.id for t in result.tasks] == ["T-1"] and not result.rewritten
    assert path.read_bytes().decode() == after
    kept = [t for t in (("T-2", "todo", "b"), ("T-3", "todo", "c")) if t[0] in after]
    assert sorted(_listed(cli)) == kept


@pytest.mark.parametrize("text, message", [
    ("- id: T-1\n  text: a\n  status:\ttodo\n", "TASKS.yaml:3: invalid YAML"),
    ("- id: T-1\n  text: a\n  status: todo\n  status: doing\n", "duplicate key 'status'"),
    ("- id: T-1\r  text: a\r  status: todo\r", "bare CR"),
    ("owner: me\n", "must be a list of tasks"),
    ("tasks: later\n", "`tasks:` must be a list of tasks"),
    ("- {id: T-1, text: a, status: todo}\n---\n- {id: T-2, text: b, status: todo}\n",
     "another document"),
    ("- id: T-1\n  text: caf\xe9\n  status: todo\n", "not UTF-8"),
])
@pytest.mark.parametrize("command", [("add", "x"), ("done", "T-1"), ("archive",)])
def test_cli_edits_refuse_a_file_they_cannot_read(cli, project: Project, text: str,
                                                  message: str, command: tuple[str, ...]) -> None:
    path = project.root / "TASKS.yaml"
    raw = text.encode("latin-1" if "\xe9" in text else "utf-8")
    path.write_bytes(raw)
    archive = (project.root / "tasks-archive.md").read_bytes()
    log = _git_log(project)
    r = cli("tasks", *command, "-p", "flywheel")
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr and "Traceback" not in r.output
    assert path.read_bytes() == raw and _git_log(project) == log
    assert (project.root / "tasks-archive.md").read_bytes() == archive


def test_cli_rewrite_keeps_the_bom_header_and_line_endings(cli, project: Project) -> None:
    # a trailing comma in a flow mapping defeats the textual edit: the file is rewritten from
    # its data, and that rewrite once dropped a BOM with the header after it, and CRLF
    before = ("\ufeff# my queue\r\n# kept\r\n\r\n- {id: T-1, text: a, status: todo, }  # lost\r\n"
              "- id: T-2\r\n  text: b\r\n  status: todo\r\n  why: |\r\n    two\r\n    lines\r\n")
    path = project.root / "TASKS.yaml"
    path.write_bytes(before.encode())
    with Days() as days:
        r = cli("tasks", "done", "T-1", "-p", "flywheel")
    assert r.exit_code == 0, r.output
    assert "rewritten from its data" in r.stderr
    assert path.read_bytes().decode() in days.either(lambda d: (
        "\ufeff# my queue\r\n# kept\r\n"
        f"- id: T-1\r\n  text: a\r\n  status: done\r\n  completed-at: '{d}'\r\n"
        "- id: T-2\r\n  text: b\r\n  status: todo\r\n"
        "  why: 'two\r\n\r\n    lines\r\n\r\n    '\r\n"))
    assert _listed(cli) == [("T-2", "todo", "b"), ("T-1", "done", "a")]
    assert tasks.load(project).get("T-2").why == "two\nlines\n"  # type: ignore[union-attr]


def test_tasks_on_one_line_are_told_apart(cli, project: Project) -> None:
    # two tasks on one line once shared an item: `done T-2` marked T-1 done, and archiving
    # T-2 dropped T-1 (in neither file) and kept T-2
    one_line = "# q\ntasks: [{id: T-1, text: a, status: todo}, {id: T-2, text: b, status: todo}]\n"
    with Days() as days:
        after = _edit(cli, project, one_line, "done", "T-2")
    todo_b = "b, status: todo}"
    assert after in days.either(
        lambda d: one_line.replace(todo_b, f"b, status: done, completed-at: {d}}}"))
    assert _listed(cli) == [("T-1", "todo", "a"), ("T-2", "done", "b")]
    path = project.root / "TASKS.yaml"
    path.write_text(one_line.replace(todo_b, "b, status: done, completed-at: 2026-01-01}"))
    result = tasks.archive(project, today=dt.date(2026, 1, 9))
    assert [t.id for t in result.tasks] == ["T-2"] and result.rewritten
    assert path.read_text() == "# q\ntasks:\n- id: T-1\n  text: a\n  status: todo\n"
    assert "### T-2: b" in (project.root / "tasks-archive.md").read_text()


def test_textual_edits_of_rarer_layouts_keep_the_rest(project: Project) -> None:
    # a top-level `[]`: replaced by the task's block, the comments around it kept
    path = _write(project, "# q\n[]  \n# after\n")
    assert not tasks.add_task(project, "a").rewritten
    assert path.read_text() == "# q\n- id: T-1\n  text: a\n  status: todo\n# after\n"
    # a key written with no value gets one in place
    _write(project, "tasks:\n  - id: T-1\n    text: a\n    status: todo\n    completed-at:\n"
                    "    why: x  # keep\n")
    assert not tasks.set_status(project, "T-1", "done", today=dt.date(2026, 2, 3)).rewritten
    assert path.read_text() == ("tasks:\n  - id: T-1\n    text: a\n    status: done\n"
                                "    completed-at: 2026-02-03\n    why: x  # keep\n")
    # the comment above an archived task (not the first) goes with it
    _write(project, GOOD.replace("    status: doing\n", "    status: done\n"
                                 "    completed-at: 2026-01-05\n"))
    assert [t.id for t in tasks.archive(project, today=dt.date(2026, 2, 1)).tasks] == \
        ["T-1", "T-2"]
    assert path.read_text() == ("# my queue — keep this comment\ntasks:\n\n  - id: T-3\n"
                                "    text: Benchmark it\n    status: todo\n    priority: P0\n"
                                "    depends-on:\n      - T-2\n")
