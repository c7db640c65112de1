"""cortexfs.recall.docs: what recall keeps of an atom, and rows that name their fields (a
cache written with other fields is rebuilt, never misread)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from cortexfs.atoms import EXPERIMENT, KNOWLEDGE, Atom
from cortexfs.recall import docs
from cortexfs.recall.docs import Doc, decode_row, encode_rows


def knowledge() -> Atom:
    return Atom(Path("flywheel/knowledge/K-001.md"), KNOWLEDGE, {
        "id": "K-001", "date": "2026-03-07", "summary": "Caches on write", "tags": ["cache"],
        "status": "refined:K-002", "evidence": ["EXP-001"], "source-experiments": ["EXP-002"],
        "links": ["EXP-001", "EXP-002", "PAT-001"], "priority": "high", "src": "manual",
        "last-ref": "2026-03-08"})


def test_a_doc_takes_what_recall_ranks_by_from_its_atom() -> None:
    doc = Doc.from_atom(knowledge(), "flywheel/knowledge/K-001.md", "flywheel", "abc")
    assert (doc.kind, doc.id, doc.date, doc.status, doc.priority, doc.src, doc.links) == (
        "knowledge", "K-001", "2026-03-07", "refined", "high", "manual", 3)
    assert doc.evidence == ["EXP-001", "EXP-002"] and doc.last_ref == "2026-03-08"
    experiment = Atom(Path("p/experiments/EXP-001.md"), EXPERIMENT,
                      {"evidence": ["EXP-000"], "priority": 2})
    plain = Doc.from_atom(experiment, "p/experiments/EXP-001.md", "p", "")
    assert plain.evidence == [] and plain.priority == "2" and plain.date is None


def test_rows_round_trip_and_keep_the_columns_out() -> None:
    doc = Doc.from_atom(knowledge(), "flywheel/knowledge/K-001.md", "flywheel", "abc")
    [raw] = encode_rows([doc])
    assert not docs.COLUMNS & set(json.loads(raw))
    assert decode_row(raw, doc.key, doc.project, doc.kind, doc.vsha) == doc
    assert "é" in encode_rows([dataclasses.replace(doc, summary="café")])[0].decode("utf-8")


def test_a_row_with_other_fields_is_refused() -> None:
    doc = Doc.from_atom(knowledge(), "k", "p", "")
    row = json.loads(encode_rows([doc])[0])
    for other in ({**row, "added_later": 1}, {k: v for k, v in row.items() if k != "tags"},
                  list(row)):
        with pytest.raises(ValueError, match="does not have this version's fields"):
            decode_row(json.dumps(other).encode(), "k", "p", "knowledge", "")


def test_codes_of_the_columns() -> None:
    assert docs.status_code("valid") == docs.STATUS_CODE["valid"]
    assert docs.status_code("made-up") == docs.status_code("unknown") == len(docs.STATUSES)
    assert docs.KIND_CODES == ("experiments", "knowledge", "patterns")
    assert sorted(docs.RETIRED) == ["deprecated", "invalidated", "refined", "stale", "superseded"]
    assert docs.date_ordinal("2026-03-07") == dt.date(2026, 3, 7).toordinal()
    assert docs.date_ordinal(None) == 0
    assert docs.date_ordinal("not a date") == 0


def test_doc_rows_name_their_fields() -> None:
    from cortexfs.recall.docs import Doc, decode_row, encode_rows

    doc = Doc(key="p/experiments/EXP-001.md", project="p", kind="experiments", id="EXP-001",
              summary="s", tags=["t"], date=None, status="active", vsha="ab")
    (raw,) = encode_rows([doc])
    assert decode_row(raw, doc.key, "p", "experiments", "ab") == doc
    data = json.loads(raw)
    for change in ({"added": 1}, {"summary": None}):
        row = {**data, **change}
        row = {k: v for k, v in row.items() if v is not None}
        with pytest.raises(ValueError, match="fields"):
            decode_row(json.dumps(row).encode(), doc.key, "p", "experiments", "ab")
