"""Decision records: the required parts, numbering, slugs and `cortex decision new`."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from cortexfs import decisions
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project, Store

COMPLETE = """\
# 0001: Store atoms as files

- **Date**: 2026-03-01
- **Status**: accepted

## Context

Agents need memory they can read and diff.

## Alternatives

- **Markdown files in git** — readable, diffable.
- **SQLite** — queryable, opaque.

## Decision

Markdown files in git.

## Consequences

Indexes must be generated.
"""


def _problems(text: str) -> list[str]:
    return [p.message for p in decisions.check_record(text)]


def test_complete_record_passes() -> None:
    assert _problems(COMPLETE) == []


def test_other_spellings_pass() -> None:
    madr = """\
---
date: 2026-03-01
status: accepted
---
# Use git

## Context and Problem Statement

Why.

## Considered Options

### Option one

- good, because it is simple
- bad, because it is slow

### Option two

- good

## Decision Outcome

Option one.

## Consequences

Fine.
"""
    assert _problems(madr) == []
    plain = COMPLETE.replace("- **Date**: 2026-03-01", "Date: 2026-03-01").replace(
        "- **Status**: accepted", "## Status\n\naccepted").replace("## Alternatives",
                                                                    "## ALTERNATIVES")
    assert _problems(plain) == []
    numbered = COMPLETE.replace("- **Markdown", "1. **Markdown").replace("- **SQLite",
                                                                          "2. **SQLite")
    assert _problems(numbered) == []


@pytest.mark.parametrize("old, new, message", [
    ("- **Date**: 2026-03-01\n", "", "no Date"),
    ("- **Status**: accepted\n", "", "no Status"),
    ("2026-03-01", "March 1st", "is not a date"),
    ("2026-03-01", "2026-02-30", "is not a date"),
    ("## Context\n", "## Situation\n", "no Context section"),
    ("## Decision\n", "## Outcome\n", "no Decision section"),
    ("## Consequences\n\nIndexes must be generated.\n", "", "no Consequences section"),
    ("- **SQLite** — queryable, opaque.\n", "", "Alternatives lists 1 option:"),
    ("Markdown files in git.\n", "<!-- fill in -->\n", "the Decision section is empty"),
])
def test_missing_parts_fail(old: str, new: str, message: str) -> None:
    text = COMPLETE.replace(old, new)
    assert text != COMPLETE
    problems = _problems(text)
    assert any(message in p for p in problems), problems


def test_the_template_fails_until_written(store: Store) -> None:
    path = decisions.new_decision(store, "Use git", today=dt.date(2026, 3, 1))
    problems = _problems(path.read_text())
    assert any("Alternatives lists 0 options" in p for p in problems)
    assert any("Context section is empty" in p for p in problems)
    assert not any("Date" in p or "Status" in p for p in problems)


def test_alternatives_inside_a_comment_do_not_count() -> None:
    text = COMPLETE.replace("- **Markdown", "<!--\n- **Markdown").replace(
        "opaque.\n", "opaque.\n-->\n")
    assert any("lists 0 options" in p for p in _problems(text))


@pytest.mark.parametrize("title, slug", [
    ("Store atoms as files", "store-atoms-as-files"),
    ("Use Git, not SQLite!", "use-git-not-sqlite"),
    ("Ünïcödé  titles", "unicode-titles"),
    ("x" * 80, "x" * 60),
    ("word " * 30, ("word-" * 12).rstrip("-")),
])
def test_slugify(title: str, slug: str) -> None:
    assert decisions.slugify(title) == slug
    assert len(decisions.slugify(title)) <= decisions.MAX_SLUG


def test_new_numbers_after_the_highest(store: Store, project: Project) -> None:
    folder = store.context / "decisions"
    (folder / "0007-old.md").write_text(COMPLETE)
    (folder / "DR-0009-seed-style.md").write_text(COMPLETE)
    first = decisions.new_decision(store, "Next one")
    assert first == folder / "0010-next-one.md"
    before = dt.date.today()  # (and after: a midnight may pass in between)
    proj = decisions.new_decision(store, "Project one", "flywheel")
    after = dt.date.today()
    assert proj == project.root / "decisions" / "0001-project-one.md"
    text = proj.read_text()
    assert text.startswith("# 0001: Project one\n")
    assert any(f"- **Date**: {day.isoformat()}" in text for day in (before, after))


@pytest.mark.parametrize("title, message", [
    ("   ", "title is empty"),
    ("!!!", "no letters or digits"),
])
def test_new_bad_titles(store: Store, title: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        decisions.new_decision(store, title)
    assert decisions.records(store.context / "decisions", store.context) == []


def test_cli_decision_new(cli, store: Store, project: Project) -> None:
    r = cli("decision", "new", "Use git for sync")
    assert r.exit_code == 0, r.output
    path = Path(r.stdout.strip())
    assert path == store.context / "decisions" / "0001-use-git-for-sync.md"
    assert path.is_file()
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=store.home,
                         capture_output=True, text=True).stdout.strip()
    assert log == "decision: add 0001-use-git-for-sync"
    r = cli("decision", "new", "Local one", "--project", "flywheel", "--no-commit")
    assert Path(r.stdout.strip()).parent == project.root / "decisions"
    r = cli("decision", "new", "x", "--project", "nope")
    assert r.exit_code == 1 and "no project named 'nope'" in r.stderr
    r = cli("decision", "new", "???")
    assert r.exit_code == 1 and "no letters or digits" in r.stderr


def test_frontmatter_fields_are_read_as_yaml() -> None:
    body = COMPLETE.split("\n", 4)[4]  # the sections, without the title's fields
    record = "---\nDate: 2026-03-01  # when it was taken\nstatus: accepted\n---\n" + body
    assert _problems(record) == []
    late = "---\ndate: 2026-03-01\nstatus: >\n  accepted\n---\n" + body
    assert _problems(late) == []


def test_broken_frontmatter_is_a_problem_with_its_line() -> None:
    body = COMPLETE.split("\n", 4)[4]
    record = "---\ndate: 2026-03-01\nstatus: accepted\nstatus: rejected\n---\n" + body
    problems = decisions.check_record(record)
    # (the fields it may hold are not also reported missing)
    assert [(p.line, p.message.split(":")[0]) for p in problems] == \
        [(4, "invalid YAML in frontmatter")]
    assert "duplicate key 'status'" in problems[0].message
