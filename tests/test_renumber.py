"""cortexfs.renumber: a colliding local atom gets the next id free on both sides, and every
mention of it the local side wrote is rewritten (sync's end-to-end tests are test_sync.py)."""

from __future__ import annotations

import os
from pathlib import Path

from cortexfs import renumber
from cortexfs.atoms import EXPERIMENT, KNOWLEDGE, Kind
from cortexfs.renumber import Collision
from cortexfs.store import Store


def test_rewrite_text_touches_only_the_ids_meant() -> None:
    text = ("---\nid: EXP-004\n# a comment stays\nevidence:\n  - EXP-004\n  - EXP-0040\n"
            "status: superseded:EXP-004\nlinks: [EXP-004b, K-004]\n---\n"
            "EXP-004 and EXP-004.md, not EXP-0041 nor EXP-004b nor PREEXP-004x.\n")
    out = renumber.rewrite_text(text, {"EXP-004": "EXP-009"})
    assert out == ("---\nid: EXP-009\n# a comment stays\nevidence: [EXP-009, EXP-0040]\n"
                   "status: superseded:EXP-009\nlinks: [EXP-004b, K-004]\n---\n"
                   "EXP-009 and EXP-009.md, not EXP-0041 nor EXP-004b nor PREEXP-004x.\n")
    assert renumber.rewrite_text(out, {"EXP-004": "EXP-009"}) == out  # idempotent
    assert renumber.rewrite_text("no frontmatter EXP-004\n", {"EXP-004": "EXP-009"}) == \
        "no frontmatter EXP-009\n"


def test_a_new_id_keeps_a_suffix_next_to_its_sibling(store: Store) -> None:
    def allocated(kind: Kind, old: str, ids: set[str]) -> str:
        [renumbering] = renumber.allocate(store.home, [Collision("flywheel", kind, old)],
                                          "HEAD", "HEAD", taken_extra=ids)
        assert (renumbering.project, renumbering.old) == ("flywheel", old)
        return renumbering.new

    ids = {"EXP-001", "EXP-042", "EXP-042b", "EXP-007"}
    assert allocated(EXPERIMENT, "EXP-042b", ids) == "EXP-042a"
    assert allocated(EXPERIMENT, "EXP-042b", {*ids, "EXP-042a"}) == "EXP-042c"
    assert allocated(EXPERIMENT, "EXP-042", ids) == "EXP-043"
    assert allocated(KNOWLEDGE, "K-001", {"K-001", "K-010"}) == "K-011"


def test_two_collisions_of_one_kind_get_two_new_ids(store: Store) -> None:
    collisions = [Collision("flywheel", EXPERIMENT, "EXP-002"),
                  Collision("flywheel", EXPERIMENT, "EXP-003"),
                  Collision("other", EXPERIMENT, "EXP-002")]
    out = renumber.allocate(store.home, collisions, "HEAD", "HEAD",
                            taken_extra={"EXP-001", "EXP-002", "EXP-003"})
    assert [(r.project, r.old, r.new) for r in out] == [
        ("flywheel", "EXP-002", "EXP-004"), ("flywheel", "EXP-003", "EXP-005"),
        ("other", "EXP-002", "EXP-004")]
    assert renumber.describe(out) == ("flywheel EXP-002 → EXP-004, EXP-003 → EXP-005; "
                                      "other EXP-002 → EXP-004")
    assert out[0].to_json() == {"project": "flywheel", "old": "EXP-002", "new": "EXP-004"}
    assert Collision("p", EXPERIMENT, "EXP-002").path == "context/projects/p/experiments/EXP-002.md"


def test_replace_log_keeps_a_line_appended_while_it_ran(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"file": "EXP-001.md"}\n')
    writer = os.open(log, os.O_WRONLY | os.O_APPEND)

    def whole(data: bytes) -> bytes:
        os.write(writer, b'{"file": "EXP-001.md", "late": 1}\n')  # lands in the old file
        return data.replace(b"EXP-001", b"EXP-002")

    try:
        assert renumber.replace_log(log, whole, lambda d: d.replace(b"EXP-001", b"EXP-002"))
    finally:
        os.close(writer)
    assert log.read_bytes() == b'{"file": "EXP-002.md"}\n{"file": "EXP-002.md", "late": 1}\n'
