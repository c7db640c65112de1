"""`cortex validate`: every rule of SPEC §2 with a file that breaks it, a clean realistic
project with no finding, the extension point, and the command's output and exit codes."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import validate as validation
from cortexfs.atoms import KNOWLEDGE, MAX_SUMMARY, PATTERN
from cortexfs.store import Project, Store
from cortexfs.validate import RULES, Finding, Report, validate

EXP = "projects/flywheel/experiments"
K = "projects/flywheel/knowledge"
PAT = "projects/flywheel/patterns"

# The seed's own example frontmatter (seeds/002, "The Three Atom Types"), verbatim.
SEED_EXP_042 = """\
id: EXP-042
date: 2026-03-09
project: flywheel
summary: "Initial object registry extraction from 573 artifacts"
tags: [registry, data-analysis, milestone-2.2]
status: valid
executor: Cortex-lab2
links: [PAT-002]
refs: 2
last-ref: "2026-04-16T03:12:21.074Z"
"""
SEED_K_008 = """\
id: K-008
date: 2026-04-01
project: flywheel
summary: "ANTI-PATTERN: Running smoke tests or broader validation without verifying upstream \
service availability"
tags: [anti-pattern, smoke-test, service-dependency]
evidence: [EXP-021, EXP-022, EXP-025, EXP-033, EXP-040]
refs: 2
last-ref: "2026-04-10T20:42:00.826Z"
"""
SEED_PAT_001 = """\
id: PAT-001
date: 2026-04-01
project: flywheel
summary: "When a multi-stage pipeline yields zero output, per-stage pass-rate quantification \
locates the bottleneck faster than end-to-end retries"
tags: [pipeline, diagnosis, stage-isolation]
source-experiments: [EXP-001, EXP-005, EXP-006, EXP-008]
evidence: [EXP-001, EXP-005, EXP-006, EXP-008]
refs: 2
last-ref: "2026-04-16T03:16:28.890Z"
"""

WriteAtom = Callable[..., Path]


def fm(atom_id: str, **fields: str | None) -> str:
    """Frontmatter for `atom_id`: id, date, project, summary, tags (+ kind's citation), then
    `fields` (a value replaces a default in place, None removes it, new keys go last)."""
    base: dict[str, str | None] = {
        "id": atom_id, "date": "2026-03-09", "project": "flywheel",
        "summary": '"A summary"', "tags": "[a, b]",
    }
    if atom_id.startswith("K-"):
        base["evidence"] = "[EXP-001]"
    if atom_id.startswith("PAT-"):
        base["source-experiments"] = "[EXP-001]"
    base.update({k.replace("_", "-"): v for k, v in fields.items()})
    return "".join(f"{k}: {v}\n" for k, v in base.items() if v is not None)


def findings(store: Store, projects: list[Project] | None = None) -> list[tuple[object, ...]]:
    report = validate(store, projects)
    return [(f.severity, f.rule, f.path, f.line) for f in report.findings]


def messages(store: Store) -> list[str]:
    return [f.message for f in validate(store).findings]


REGISTERED_EXTRA_CHECKS = list(validation.EXTRA_CHECKS)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An initialised store without git: validation never touches git, and this is faster."""
    from cortexfs import scaffold

    s = Store(tmp_path / "cortex")
    scaffold.init_store(s)
    return s


@pytest.fixture(autouse=True)
def atom_rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the atom rules' exact findings: governance checks have their own."""
    monkeypatch.setattr(validation, "EXTRA_CHECKS", [])
    monkeypatch.setattr(validation, "STORE_CHECKS", [])


@pytest.fixture
def base(project: Project, write_atom: WriteAtom) -> Project:
    """flywheel with one valid experiment, EXP-001, that other atoms can cite."""
    write_atom("EXP-001", frontmatter=fm("EXP-001"))
    return project


# --- a clean, realistic project ------------------------------------------------------------


def test_seed_examples_validate_clean(store: Store, project: Project,
                                      write_atom: WriteAtom) -> None:
    for exp in ("EXP-001", "EXP-005", "EXP-006", "EXP-008", "EXP-021", "EXP-022", "EXP-025",
                "EXP-033", "EXP-040"):
        write_atom(exp, frontmatter=fm(exp, status="valid", links="[]"))
    write_atom("EXP-042", frontmatter=SEED_EXP_042)
    write_atom("K-008", frontmatter=SEED_K_008)
    write_atom("PAT-001", frontmatter=SEED_PAT_001)
    write_atom("PAT-002", frontmatter=fm("PAT-002", source_experiments="[EXP-042]",
                                         status="superseded:PAT-001"))
    write_atom("EXP-043", frontmatter=fm("EXP-043", status="invalidated:EXP-042",
                                         invalidated_date="2026-04-02",
                                         invalidated_reason="wrong input set"))
    write_atom("EXP-042b", frontmatter=fm("EXP-042b", status="challenged:EXP-043",
                                          links="[EXP-042, K-008]"))
    report = validate(store)
    assert report.findings == []
    assert report.ok and report.atoms == 15 and report.projects == ["flywheel"]


def test_atoms_written_by_cortex_new_validate_clean(store: Store, project: Project) -> None:
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.authoring import NewAtom, create_atom

    create_atom(project, NewAtom(EXPERIMENT, "Baseline: 10 | 20 `x` <b>", ["a", "b/c"], [], [],
                                 [], executor="lab-2"))
    create_atom(project, NewAtom(EXPERIMENT, "Second run", ["a"], [], [], ["EXP-001"]))
    create_atom(project, NewAtom(KNOWLEDGE, "ANTI-PATTERN: retrying blindly",
                                 ["anti-pattern"], ["EXP-001"], [], ["EXP-002"]))
    create_atom(project, NewAtom(PATTERN, "Stages fail alone", ["pipeline"], ["EXP-001"],
                                 ["EXP-001", "EXP-002"], []))
    assert findings(store) == []


def test_empty_store_and_empty_project(store: Store) -> None:
    assert validate(store).to_dict() == {"ok": True, "errors": 0, "warnings": 0, "atoms": 0,
                                         "projects": [], "findings": []}


# --- errors --------------------------------------------------------------------------------


def test_no_frontmatter(base: Project, store: Store) -> None:
    (base.folder(KNOWLEDGE) / "K-001.md").write_text("# K-001\n\nJust text.\n")
    assert findings(store) == [("error", "frontmatter", f"{K}/K-001.md", 1)]
    assert messages(store) == ["no frontmatter: the file must start with a line '---'"]


def test_unclosed_frontmatter(base: Project, store: Store, write_atom: WriteAtom) -> None:
    path = write_atom("EXP-002", frontmatter=fm("EXP-002"))
    path.write_text(path.read_text().replace("---\n\nBody", "\nBody"))
    assert findings(store) == [("error", "frontmatter", f"{EXP}/EXP-002.md", 1)]


def test_invalid_yaml_reports_its_line(base: Project, store: Store,
                                       write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", summary="a: b"))
    assert findings(store) == [("error", "frontmatter", f"{EXP}/EXP-002.md", 5)]
    assert messages(store)[0].startswith("invalid YAML in frontmatter: mapping values")


def test_frontmatter_that_is_a_list(base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter="- a\n- b\n")
    assert findings(store) == [("error", "frontmatter", f"{EXP}/EXP-002.md", 2)]


def test_binary_file_is_a_frontmatter_error(base: Project, store: Store) -> None:
    (base.folder(KNOWLEDGE) / "K-001.md").write_bytes(b"---\nid: K-001\x00\n---\n")
    assert findings(store) == [("error", "frontmatter", f"{K}/K-001.md", None)]


@pytest.mark.parametrize("atom_id, fields, missing", [
    ("EXP-002", {"tags": None}, "tags"),
    ("EXP-002", {"summary": None}, "summary"),
    ("EXP-002", {"date": ""}, "date"),  # `date:` with no value is YAML null
    ("K-001", {"evidence": None}, "evidence"),
    ("PAT-001", {"source_experiments": None}, "source-experiments"),
])
def test_required_field_missing(base: Project, store: Store, write_atom: WriteAtom,
                                atom_id: str, fields: dict[str, str | None],
                                missing: str) -> None:
    path = write_atom(atom_id, frontmatter=fm(atom_id, **fields))
    rel = path.relative_to(store.context).as_posix()
    assert findings(store) == [("error", "required", rel, None)]
    assert f"needs `{missing}`" in messages(store)[0]


@pytest.mark.parametrize("fields, key, line", [
    ({"tags": "a, b"}, "tags", 6),
    ({"tags": "[a, 2024]"}, "tags", 6),
    ({"summary": "yes"}, "summary", 5),
    ({"summary": "[a, b]"}, "summary", 5),
    ({"id": "2"}, "id", 2),
    ({"project": "[flywheel]"}, "project", 4),
    ({"refs": "-1"}, "refs", 7),
    ({"refs": '"3"'}, "refs", 7),
    ({"refs": "true"}, "refs", 7),
    ({"last_ref": "yesterday"}, "last-ref", 7),
    ({"links": "EXP-001"}, "links", 7),
    ({"links": "[1]"}, "links", 7),
    ({"executor": "{a: 1}"}, "executor", 7),
    ({"status": "[valid]"}, "status", 7),
])
def test_field_of_the_wrong_type(base: Project, store: Store, write_atom: WriteAtom,
                                 fields: dict[str, str], key: str, line: int) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", **fields))
    got = findings(store)
    assert ("error", "type", f"{EXP}/EXP-002.md", line) in got
    # a wrong type is reported once, by `type`, not again by the rules about values
    assert [f for f in got if f[0] == "error"] == [("error", "type", f"{EXP}/EXP-002.md", line)]
    assert f"`{key}`" in messages(store)[0]


@pytest.mark.parametrize("atom_id, fields, line, text", [
    ("K-001", {"evidence": "EXP-001"}, 7, "must be a list of experiment ids"),
    ("K-001", {"evidence": "[]"}, 7, "is empty"),
    ("K-001", {"evidence": "[K-002]"}, 7, "'K-002' is not one"),
    ("PAT-001", {"source_experiments": "[EXP-001, pipeline]"}, 7, "'pipeline' is not one"),
    ("PAT-001", {"evidence": "[1]"}, 8, "1 is not one"),
])
def test_citation_lists_hold_experiment_ids(base: Project, store: Store, write_atom: WriteAtom,
                                            atom_id: str, fields: dict[str, str], line: int,
                                            text: str) -> None:
    path = write_atom(atom_id, frontmatter=fm(atom_id, **fields))
    rel = path.relative_to(store.context).as_posix()
    assert findings(store) == [("error", "type", rel, line)]
    assert text in messages(store)[0]


def test_optional_citation_list_may_be_empty(base: Project, store: Store,
                                             write_atom: WriteAtom) -> None:
    write_atom("PAT-001", frontmatter=fm("PAT-001", evidence="[]"))
    assert findings(store) == []


def test_id_differs_from_file_name(base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-003"))
    assert findings(store) == [("error", "id-filename", f"{EXP}/EXP-002.md", 2)]
    assert messages(store) == ["id 'EXP-003' does not match the file name EXP-002.md: "
                               "fix the id or rename the file"]


def test_id_prefix_differs_from_folder(base: Project, store: Store,
                                       write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("K-002", evidence=None))
    assert sorted(findings(store)) == [("error", "id-filename", f"{EXP}/EXP-002.md", 2),
                                       ("error", "id-folder", f"{EXP}/EXP-002.md", 2)]
    assert "id K-002 is a knowledge id but the file is in experiments/" in messages(store)[1]


def test_misplaced_atom_file(base: Project, store: Store) -> None:
    (base.folder(KNOWLEDGE).parent / "experiments" / "K-001.md").write_text(
        f"---\n{fm('K-001')}---\n")
    assert findings(store) == [("error", "misplaced", f"{EXP}/K-001.md", None)]
    assert "move it to knowledge/" in messages(store)[0]


def test_project_differs_from_folder(base: Project, store: Store,
                                     write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", project="cortex-self"))
    assert findings(store) == [("error", "project", f"{EXP}/EXP-002.md", 4)]
    assert "write `project: flywheel`" in messages(store)[0]


def test_numeric_project_name_matches_its_folder(store: Store, write_atom: WriteAtom) -> None:
    from cortexfs import scaffold

    p2024, _ = scaffold.new_project(store, "2024")
    write_atom("EXP-001", frontmatter=fm("EXP-001", project="2024"), target=p2024)
    assert findings(store) == []


@pytest.mark.parametrize("value", ["yesterday", "2026-13-45", "2026-02-30", "2026-3-9",
                                   "20260309", "'20260309'", "'2026-W10-1'",
                                   "'2026-03-09 garbage'", "[2026-03-09]"])
def test_date_that_is_not_a_date(base: Project, store: Store, write_atom: WriteAtom,
                                 value: str) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", date=value))
    assert findings(store) == [("error", "date", f"{EXP}/EXP-002.md", 3)]
    assert "is not a date: write YYYY-MM-DD" in messages(store)[0]


@pytest.mark.parametrize("value", ["2026-03-09", '"2026-03-09"', "2026-03-09T10:00:00Z",
                                   "2026-03-09 10:00:00", "'2026-03-09T10:00:00.074Z'",
                                   "2026-03-09T10:00:00+02:00", "'2026-03-09T10:00'"])
def test_dates_and_timestamps_are_dates(base: Project, store: Store, write_atom: WriteAtom,
                                        value: str) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", date=value, last_ref=value))
    assert findings(store) == []


def test_invalidated_date_must_be_a_date(base: Project, store: Store,
                                         write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="invalidated:EXP-001",
                                         invalidated_date="last week"))
    assert findings(store) == [("error", "date", f"{EXP}/EXP-002.md", 8)]


@pytest.mark.parametrize("status, text", [
    ("done", "unknown status 'done'"),
    ("superseded:by-the-new-run", "'by-the-new-run' is not an atom id"),
    ("superseded:exp-050", "'exp-050' is not an atom id"),
])
def test_unknown_status(base: Project, store: Store, write_atom: WriteAtom, status: str,
                        text: str) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", status=status))
    assert findings(store) == [("error", "status", f"{EXP}/EXP-002.md", 7)]
    assert text in messages(store)[0]


@pytest.mark.parametrize("status", ["active", "valid", "partial", "challenged:EXP-001",
                                    "corrected", "superseded:EXP-001", "refined:EXP-001",
                                    "stale", "deprecated", "Valid", "''"])
def test_known_statuses(base: Project, store: Store, write_atom: WriteAtom,
                        status: str) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", status=status))
    assert findings(store) == []


def test_duplicate_id_in_a_project(base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-001"))  # a copy whose id was not updated
    assert sorted(findings(store)) == [("error", "duplicate-id", f"{EXP}/EXP-002.md", 2),
                                       ("error", "id-filename", f"{EXP}/EXP-002.md", 2)]
    assert any("duplicate id EXP-001: experiments/EXP-001.md has it too" in m
               for m in messages(store))


def test_ids_differing_only_in_leading_zeros_are_duplicates(base: Project, store: Store,
                                                            write_atom: WriteAtom) -> None:
    write_atom("EXP-1", frontmatter=fm("EXP-1"))
    write_atom("EXP-42", frontmatter=fm("EXP-42"))
    write_atom("EXP-042b", frontmatter=fm("EXP-042b"))  # a suffix makes a different id
    assert findings(store) == [("error", "duplicate-id", f"{EXP}/EXP-1.md", 2)]


def test_same_id_in_two_projects_is_fine(base: Project, store: Store,
                                         write_atom: WriteAtom) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", frontmatter=fm("EXP-001", project="other"), target=other)
    assert findings(store) == []


@pytest.mark.parametrize("atom_id, fields, key_line", [
    ("K-001", {"evidence": "[EXP-001, EXP-099]"}, 7),
    ("PAT-001", {"source_experiments": "[EXP-099]"}, 7),
    ("PAT-001", {"evidence": "[EXP-099]"}, 8),
])
def test_cited_experiment_does_not_exist(base: Project, store: Store, write_atom: WriteAtom,
                                         atom_id: str, fields: dict[str, str],
                                         key_line: int) -> None:
    path = write_atom(atom_id, frontmatter=fm(atom_id, **fields))
    rel = path.relative_to(store.context).as_posix()
    assert findings(store) == [("error", "evidence", rel, key_line)]
    assert "cites EXP-099, which does not exist in project flywheel" in messages(store)[0]


def test_citing_an_experiment_of_another_project_is_an_error(
        base: Project, store: Store, write_atom: WriteAtom) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-007", frontmatter=fm("EXP-007", project="other"), target=other)
    write_atom("K-001", frontmatter=fm("K-001", evidence="[EXP-007]"))
    assert findings(store) == [("error", "evidence", f"{K}/K-001.md", 7)]


def test_citing_an_experiment_with_broken_frontmatter_is_one_error(
        base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter="id: [EXP-002\n")
    write_atom("K-001", frontmatter=fm("K-001", evidence="[EXP-002]"))
    assert [f[1] for f in findings(store)] == ["frontmatter"]


# --- warnings ------------------------------------------------------------------------------


def test_link_to_a_missing_atom(base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", links="[EXP-001, PAT-009, see-notes]"))
    assert findings(store) == [("warning", "links", f"{EXP}/EXP-002.md", 7)] * 2
    assert messages(store) == [
        "links to 'see-notes', which is not an atom id (EXP-NNN, K-NNN or PAT-NNN)",
        "links to PAT-009, which does not exist in project flywheel",
    ]
    assert validate(store).ok


def test_status_naming_a_missing_atom(base: Project, store: Store,
                                      write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="superseded:EXP-050"))
    assert findings(store) == [("warning", "status-ref", f"{EXP}/EXP-002.md", 7)]


@pytest.mark.parametrize("summary, tags, line", [
    ('"ANTI-PATTERN: retrying without checking the service"', "[retry]", 6),
    ('"Retrying without checking the service"', "[anti-pattern, retry]", 5),
    ('"Anti-pattern: retrying blindly"', "[retry]", 6),
])
def test_anti_pattern_convention(base: Project, store: Store, write_atom: WriteAtom,
                                 summary: str, tags: str, line: int) -> None:
    write_atom("K-001", frontmatter=fm("K-001", summary=summary, tags=tags))
    assert findings(store) == [("warning", "anti-pattern", f"{K}/K-001.md", line)]


def test_anti_pattern_convention_is_for_knowledge(base: Project, store: Store,
                                                  write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", summary='"ANTI-PATTERN: x"'))
    write_atom("K-001", frontmatter=fm("K-001", summary='"ANTI-PATTERN: x"',
                                       tags="[Anti-Pattern]"))
    assert findings(store) == []


def test_unknown_keys(base: Project, store: Store, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", author="me", content="a key named content",
                                         evidence="[EXP-001]"))
    assert findings(store) == [("warning", "unknown-key", f"{EXP}/EXP-002.md", line)
                               for line in (7, 8, 9)]
    assert messages(store)[0].startswith("unknown key `author` for experiment (known: id, ")


@pytest.mark.parametrize("summary, text", [
    ('""', "the summary is empty"),
    ('"   "', "the summary is empty"),
    ('"' + "x" * (MAX_SUMMARY + 1) + '"', f"over the {MAX_SUMMARY} limit"),
    ('"first line\\nsecond line"', "spans several lines"),
])
def test_summary_empty_or_too_long(base: Project, store: Store, write_atom: WriteAtom,
                                   summary: str, text: str) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", summary=summary))
    assert findings(store) == [("warning", "summary", f"{EXP}/EXP-002.md", 5)]
    assert text in messages(store)[0]


def test_summary_at_the_limit_is_fine(base: Project, store: Store,
                                      write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", summary='"' + "x" * MAX_SUMMARY + '"'))
    assert findings(store) == []


def test_invalidated_without_a_reason(base: Project, store: Store,
                                      write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="invalidated"))
    write_atom("EXP-003", frontmatter=fm("EXP-003", status="invalidated",
                                         invalidated_reason="bad data"))
    write_atom("EXP-004", frontmatter=fm("EXP-004", status="invalidated:EXP-001"))
    assert findings(store) == [("warning", "tombstone", f"{EXP}/EXP-002.md", 7)]


@pytest.mark.parametrize("name, suggestion", [
    ("exp-1.md", "EXP-001.md"),
    ("EXP-1.MD", "EXP-001.md"),
    ("EXP_042B.md", "EXP-042b.md"),
    ("EXP042.markdown", "EXP-042.md"),
    ("k-7.md", "K-007.md"),
    ("PAT-3-notes.md", "PAT-003.md"),
])
def test_atom_like_file_with_a_bad_name(base: Project, store: Store, name: str,
                                        suggestion: str) -> None:
    (base.folder(KNOWLEDGE) / name).write_text(f"---\n{fm('K-001')}---\n")
    assert findings(store) == [("warning", "filename", f"{K}/{name}", None)]
    assert f"rename it (e.g. to {suggestion})" in messages(store)[0]


def test_other_files_in_atom_folders_are_ignored(base: Project, store: Store) -> None:
    folder = base.folder(KNOWLEDGE)
    (folder / "index.md").write_text("# Knowledge Index\n")
    (folder / "README.md").write_text("notes\n")
    (folder / ".K-001.md.x1y2.tmp").write_text("partial")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "K-002.md").write_text("draft\n")
    assert findings(store) == []


# --- line numbers, paths, report ------------------------------------------------------------


def test_lines_are_found_with_bom_crlf_and_block_lists(base: Project, store: Store) -> None:
    text = ("\ufeff---\r\nid: EXP-002\r\n# a comment\r\ndate: 2026-03-09\r\nproject: flywheel\r\n"
            "tags:\r\n  - a\r\n  - b\r\nsummary: \"s\"\r\nauthor: me\r\n---\r\nBody\r\n")
    (base.folder(KNOWLEDGE).parent / "experiments" / "EXP-002.md").write_bytes(text.encode())
    assert findings(store) == [("warning", "unknown-key", f"{EXP}/EXP-002.md", 10)]


def test_findings_are_sorted_by_path_then_line(base: Project, store: Store,
                                               write_atom: WriteAtom) -> None:
    write_atom("K-001", frontmatter=fm("K-001", project="x", evidence="[EXP-099]"))
    write_atom("EXP-002", frontmatter=fm("EXP-002", date="soon", author="me"))
    assert findings(store) == [
        ("error", "date", f"{EXP}/EXP-002.md", 3),
        ("warning", "unknown-key", f"{EXP}/EXP-002.md", 7),
        ("error", "project", f"{K}/K-001.md", 4),
        ("error", "evidence", f"{K}/K-001.md", 7),
    ]


def test_report_counts_and_json_shape() -> None:
    report = Report([Finding("warning", "links", "b.md", 3, "w"),
                     Finding("error", "date", "a.md", None, "e")], atoms=2, projects=["p"])
    assert [f.path for f in report.findings] == ["a.md", "b.md"]
    assert not report.ok and len(report.errors) == 1 and len(report.warnings) == 1
    assert report.summary() == "1 error, 1 warning in 2 atoms"
    assert report.to_dict() == {
        "ok": False, "errors": 1, "warnings": 1, "atoms": 2, "projects": ["p"],
        "findings": [
            {"severity": "error", "rule": "date", "path": "a.md", "line": None, "message": "e"},
            {"severity": "warning", "rule": "links", "path": "b.md", "line": 3, "message": "w"},
        ],
    }
    assert str(report.findings[1]) == "warning  b.md:3  [links] w"


def test_selected_projects_only(base: Project, store: Store, write_atom: WriteAtom) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", frontmatter=fm("EXP-001", date="never", project="other"),
               target=other)
    assert validate(store, [base]).findings == []
    assert findings(store, [other]) == [("error", "date", "projects/other/experiments/EXP-001.md",
                                         3)]


def test_every_rule_is_documented_and_named_once() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert all(r.description for r in RULES)
    assert {r.name for r in RULES if r.severity == "error"} == {
        "frontmatter", "required", "type", "id-filename", "id-folder", "project", "date",
        "status", "duplicate-id", "evidence", "misplaced"}
    assert {r.name for r in RULES if r.severity == "warning"} == {
        "links", "status-ref", "anti-pattern", "unknown-key", "summary", "tombstone", "filename",
        "access-log"}


# --- the extension point -------------------------------------------------------------------


def test_extra_checks_are_called_and_reported(base: Project, store: Store, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "plugins" / "extra_rules_for_test.py"
    module.parent.mkdir()
    module.write_text(textwrap.dedent("""\
        from cortexfs.validate import Finding

        calls = []

        def check(store, projects):
            calls.append((store, [p.name for p in projects]))
            yield Finding("error", "status-md", "projects/flywheel/STATUS.md", 81,
                          "STATUS.md is 81 lines, over the 80-line limit")
        """))
    monkeypatch.syspath_prepend(str(module.parent))
    monkeypatch.setattr(validation, "EXTRA_CHECKS", ["extra_rules_for_test:check"])
    report = validate(store)
    import extra_rules_for_test  # type: ignore[import-not-found]

    assert extra_rules_for_test.calls == [(store, ["flywheel"])]
    assert [(f.rule, f.path, f.line) for f in report.findings] == [
        ("status-md", "projects/flywheel/STATUS.md", 81)]
    assert not report.ok


# --- the command ---------------------------------------------------------------------------


def test_fresh_project_and_new_atoms_pass_with_every_check(
        cli, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "EXTRA_CHECKS", REGISTERED_EXTRA_CHECKS)
    assert cli("new", "exp", "-p", "flywheel", "-s", "First run", "-t", "a",
               "--no-commit").exit_code == 0
    assert cli("new", "k", "-p", "flywheel", "-s", "A fact", "-t", "a", "-e", "EXP-001",
               "--no-commit").exit_code == 0
    result = cli("validate")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("0 errors, ")


def test_cli_clean_store_exits_0(cli, base: Project) -> None:
    result = cli("validate")
    assert result.exit_code == 0, result.output
    assert result.stdout == "0 errors, 0 warnings in 1 atom\n"


def test_cli_errors_exit_1_with_file_line_and_rule(cli, base: Project,
                                                   write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", summary="a: b"))
    write_atom("EXP-003", frontmatter=fm("EXP-003", author="me"))
    result = cli("validate")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"error    {EXP}/EXP-002.md:5  [frontmatter] invalid YAML in frontmatter: "
        "mapping values are not allowed in this context",
        f"warning  {EXP}/EXP-003.md:7  [unknown-key] unknown key `author` for experiment "
        "(known: id, date, project, summary, tags, status, executor, links, refs, last-ref, "
        "invalidated-date, invalidated-reason, priority, src)",
        "1 error, 1 warning in 3 atoms",
    ]
    assert "Traceback" not in result.output


def test_cli_warnings_alone_exit_0(cli, base: Project, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", links="[EXP-404]"))
    result = cli("validate")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "0 errors, 1 warning in 2 atoms"


def test_cli_json(cli, base: Project, write_atom: WriteAtom) -> None:
    write_atom("EXP-002", frontmatter=fm("EXP-002", date="2026-13-45"))
    result = cli("validate", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)  # only JSON on stdout
    assert data == {"ok": False, "errors": 1, "warnings": 0, "atoms": 2,
                    "projects": ["flywheel"], "findings": [{
                        "severity": "error", "rule": "date", "path": f"{EXP}/EXP-002.md",
                        "line": 3,
                        "message": "`date` '2026-13-45' is not a date: write YYYY-MM-DD"}]}
    short = cli("validate", "flywheel", "-f", "json")
    assert short.exit_code == 1 and json.loads(short.stdout)["errors"] == 1


def test_cli_named_projects(cli, base: Project, store: Store, write_atom: WriteAtom) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", frontmatter=fm("EXP-001", project="flywheel"), target=other)
    assert cli("validate", "flywheel").exit_code == 0
    assert cli("validate", "other").exit_code == 1
    assert cli("validate", "flywheel", "other").exit_code == 1


def test_cli_unknown_project(cli, base: Project) -> None:
    result = cli("validate", "nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: no project named 'nope' (projects: flywheel); ")


def test_cli_bad_format(cli, base: Project) -> None:
    result = cli("validate", "--format", "xml")
    assert result.exit_code == 1
    assert "unknown --format 'xml': use text or json" in result.stderr


def test_cli_without_a_store(cli) -> None:
    result = cli("validate")
    assert result.exit_code == 1
    assert "run `cortex init`" in result.stderr


def test_cli_many_atoms(cli, store: Store) -> None:
    from cortexfs import scaffold

    total = 0
    for name in ("alpha", "beta", "gamma"):
        proj, _ = scaffold.new_project(store, name)
        exp_dir = proj.folder(KNOWLEDGE).parent / "experiments"
        for n in range(1, 201):
            links = f"[EXP-{n - 1:03d}]" if n > 1 else "[]"
            text = fm(f"EXP-{n:03d}", project=name, links=links, status="valid")
            (exp_dir / f"EXP-{n:03d}.md").write_text(f"---\n{text}---\n\nBody {n}.\n")
        for n in range(1, 51):
            text = fm(f"K-{n:03d}", project=name, evidence=f"[EXP-{n:03d}, EXP-{n + 100:03d}]")
            (proj.folder(KNOWLEDGE) / f"K-{n:03d}.md").write_text(f"---\n{text}---\n")
        total += 250
    (store.projects_dir / "beta" / "experiments" / "EXP-150.md").write_text(
        "---\n" + fm("EXP-150", project="beta", date="tomorrow") + "---\n")
    result = cli("validate", "--format", "json")
    data = json.loads(result.stdout)
    assert data["atoms"] == total and data["projects"] == ["alpha", "beta", "gamma"]
    assert [(f["rule"], f["path"]) for f in data["findings"]] == [
        ("date", "projects/beta/experiments/EXP-150.md")]
    assert result.exit_code == 1


def test_unchanged_project_is_not_checked_again(base: Project, store: Store,
                                                write_atom: WriteAtom,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The findings of a project whose files did not move come from the cache (no rule
    runs); an edit, a new stray file or a torn access-log line is checked afresh."""
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="bogus"))
    first = findings(store)
    assert first == [("error", "status", f"{EXP}/EXP-002.md", 7)]
    assert (store.cache_dir / "validate" / "flywheel.bin").is_file()
    checked: list[str] = []
    real = validation.check_project
    monkeypatch.setattr(validation, "check_project",
                        lambda p, lp: checked.append(p.name) or real(p, lp))
    assert findings(store) == first and checked == []
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="valid"))
    assert findings(store) == [] and checked == ["flywheel"]
    (base.folder(KNOWLEDGE) / "K_001.md").write_text("---\n---\n", encoding="utf-8")
    assert [f[1] for f in findings(store)] == ["filename"] and len(checked) == 2
    (base.folder(KNOWLEDGE) / "K_001.md").unlink()
    with base.access_log.open("a", encoding="utf-8") as log:
        log.write("torn\n")
    assert [f[1] for f in findings(store)] == ["access-log"] and len(checked) == 3
    assert findings(store) == [("warning", "access-log", "projects/flywheel/_meta/"
                                f"{base.access_log.name}", 1)] and len(checked) == 3


def test_many_findings_share_the_projects_with_a_forked_process(
        base: Project, store: Store, write_atom: WriteAtom,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A first check of many atoms is shared with a second process: the same findings, in
    the projects' order, and each project's findings cached by whichever process made them."""
    from cortexfs import forked, scaffold
    from cortexfs.loader import scan_many

    others = [scaffold.new_project(store, name)[0] for name in ("other", "third")]
    write_atom("EXP-002", frontmatter=fm("EXP-002", status="bogus"))
    for p in others:
        write_atom("EXP-001", frontmatter=fm("EXP-001", date="never", project=p.name),
                   target=p)
    projects = [base, *others]
    scans = scan_many(projects)
    loaded = {sc.project.name: sc.loaded() for sc in scans}
    want = [validation.check_project(p, loaded[p.name]) for p in projects]
    started: list[object] = []
    real_start = forked.start
    monkeypatch.setattr(forked, "start", lambda work: started.append(work) or real_start(work))
    monkeypatch.setattr(validation, "FORK_MIN_ATOMS", 0)
    assert validation.many_findings(scans)(loaded) == want
    assert len(started) == 1 or not forked.can_fork()
    assert all((store.cache_dir / "validate" / f"{p.name}.bin").is_file() for p in projects)
    shutil.rmtree(store.cache_dir / "validate")
    finish = validation.many_findings(scans)
    time.sleep(0.3)  # the caller works meanwhile: the child loads and checks the projects
    assert finish(loaded) == want
    assert all((store.cache_dir / "validate" / f"{p.name}.bin").is_file() for p in projects)
    shutil.rmtree(store.cache_dir / "validate")
    parent, real_check = os.getpid(), validation.check_project

    def check_or_die(*args: object) -> object:
        if os.getpid() != parent:  # the child dies at its first project
            os._exit(3)
        return real_check(*args)

    with monkeypatch.context() as m:  # its projects are checked here
        m.setattr(validation, "check_project", check_or_die)
        finish = validation.many_findings(scans)
        time.sleep(0.3)
        assert finish(loaded) == want
    monkeypatch.setattr(validation, "check_project", None)  # all cached now: no rule runs
    assert validation.many_findings(scans)(loaded) == want
