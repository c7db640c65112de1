"""cortexfs.status: the sections and the current phase a STATUS.md holds."""

from __future__ import annotations

from cortexfs.status import STATUS_SECTIONS, phase_of, read_status


def test_every_section_and_the_phase_line() -> None:
    info = read_status("# Status\n\n## Current Phase\n\n<!-- what now -->\n- 2: build the "
                       "  engine\n\n## Recent progress\n\n## Blockers\n\n## What's next\n")
    assert info.sections == {"Current phase": 3, "Recent progress": 8, "Open blockers": 10,
                             "Next steps": 12}
    assert info.phase == "2: build the engine" and info.missing == [] and info.lines == 12


def test_headings_match_loosely_and_the_first_one_wins() -> None:
    info = read_status("## Phase 2: build\n## Done\n## Completed\n## TODO\n")
    assert info.sections == {"Current phase": 1, "Recent progress": 2, "Next steps": 4}
    assert info.missing == ["Open blockers"]
    assert info.phase == "2: build"  # nothing under it: what the heading says after "phase"


def test_a_level_one_heading_or_a_word_inside_another_is_no_section() -> None:
    info = read_status("# Current phase\n## Emphases\n## Untodo list\n")
    assert info.sections == {} and info.phase is None
    assert info.missing == list(STATUS_SECTIONS)


def test_a_phase_heading_with_nothing_under_it_or_after_it_has_no_phase() -> None:
    assert read_status("## Current phase\n\n## Next steps\n- ship\n").phase is None
    assert read_status("## Current phase\n\n   \n").phase is None
    assert read_status("## Current phase\n1. Discovery\n").phase == "Discovery"


def test_phase_of_a_text_or_of_none() -> None:
    assert phase_of("## Current phase\n- 3: ship\n") == "3: ship"
    assert phase_of("## Next steps\n- ship\n") is None
    assert phase_of("") is None and phase_of(None) is None
