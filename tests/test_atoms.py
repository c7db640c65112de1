"""cortexfs.atoms: the three kinds, their ids and file names, and how an atom's fields read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cortexfs.atoms import (
    EXPERIMENT,
    KINDS,
    KNOWLEDGE,
    PATTERN,
    Atom,
    as_date,
    as_list,
    id_number,
    kind_of_filename,
    kind_of_id,
    split_status,
    status_group,
)


def test_ids_and_file_names_name_their_kind() -> None:
    assert [k.format_id(7) for k in KINDS] == ["EXP-007", "K-007", "PAT-007"]
    assert EXPERIMENT.format_id(1234) == "EXP-1234"
    assert kind_of_id("EXP-042b") is EXPERIMENT and kind_of_id("K-7") is KNOWLEDGE
    assert kind_of_id("PAT-001") is PATTERN
    assert [kind_of_id(x) for x in ("EXP", "EXP-", "XYZ-001", "exp-001", "K-001.md")] == [
        None] * 5
    assert kind_of_filename("EXP-042b.md") is EXPERIMENT
    assert [kind_of_filename(x) for x in ("EXP-042.txt", "index.md", "EXP-042.md\n",
                                           "notes-EXP-001.md")] == [None] * 4
    assert EXPERIMENT.file_re.match("EXP-042b.md") and not KNOWLEDGE.file_re.match("EXP-042b.md")


def test_id_number_reads_the_number_with_or_without_a_suffix() -> None:
    assert [id_number(x) for x in ("EXP-042", "EXP-042b", "K-7", "PAT-1000")] == [42, 42, 7, 1000]
    assert id_number("PAT") is None and id_number("README") is None


def test_status_splits_into_name_and_reference() -> None:
    assert split_status(None) == split_status("") == ("active", None)
    assert split_status("superseded:EXP-050") == ("superseded", "EXP-050")
    assert split_status(" Refined : K-002 ") == ("refined", "K-002")
    assert split_status("invalidated:") == ("invalidated", None)
    assert split_status("valid") == ("valid", None)
    assert [status_group(s) for s in ("invalidated", "stale", "deprecated", "refined",
                                      "superseded", "valid", "challenged", "made-up")] == [
        "invalidated", "superseded", "superseded", "superseded", "superseded", "active",
        "active", "active"]


def test_list_and_date_fields_are_read_leniently() -> None:
    assert as_list(None) == [] and as_list("") == []
    assert as_list("a, b,,c ") == ["a", "b", "c"]
    assert as_list([" a ", None, "", 3]) == ["a", "3"]
    assert as_list(5) == ["5"]
    assert as_date(dt.datetime(2026, 3, 7, 12, 0)) == dt.date(2026, 3, 7)
    assert as_date(dt.date(2026, 3, 7)) == dt.date(2026, 3, 7)
    assert as_date(" 2026-03-07T10:00:00Z") == dt.date(2026, 3, 7)
    assert as_date("March 7") is None and as_date(20260307) is None and as_date(None) is None


def test_an_atom_reads_its_fields_from_its_frontmatter() -> None:
    atom = Atom(Path("p/knowledge/K-003.md"), KNOWLEDGE, {
        "id": "K-003", "date": "2026-03-07", "project": "flywheel", "summary": "A finding",
        "tags": "x, y", "status": "superseded:K-004", "evidence": ["EXP-001", "EXP-002"],
        "source-experiments": "EXP-002, EXP-003", "links": ["PAT-001"], "refs": 4,
        "last-ref": "2026-03-08"})
    assert (atom.id, atom.file_id, atom.project, atom.summary) == (
        "K-003", "K-003", "flywheel", "A finding")
    assert atom.date == dt.date(2026, 3, 7) and atom.tags == ["x", "y"]
    assert (atom.status, atom.status_ref, atom.group) == ("superseded", "K-004", "superseded")
    assert atom.cited_experiments() == ["EXP-001", "EXP-002", "EXP-003"]
    assert atom.links == ["PAT-001"] and atom.refs == 4 and atom.last_ref == "2026-03-08"


def test_missing_or_odd_fields_read_as_nothing() -> None:
    atom = Atom(Path("p/experiments/EXP-009.md"), EXPERIMENT, {"refs": True, "summary": None})
    assert atom.id == "EXP-009"  # the file's id when the frontmatter has none
    assert (atom.date, atom.project, atom.summary, atom.status) == (None, None, "", "active")
    assert atom.refs == 0 and atom.last_ref is None and atom.tags == []
    assert Atom(Path("EXP-1.md"), EXPERIMENT, {"refs": -3, "id": 12}).refs == 0
    assert Atom(Path("EXP-1.md"), EXPERIMENT, {"id": 12}).id == "12"
