"""OVERVIEW.md and the generated block of every CORTEX.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import overview, scaffold, templates
from cortexfs.layout import GENERATED_END, GENERATED_START
from cortexfs.loader import load_project
from cortexfs.store import Project, Store


def _atoms(store: Store) -> dict[str, list]:
    return {p.name: load_project(p).atoms for p in store.projects()}


def _refresh(store: Store, dry_run: bool = False) -> list[Path]:
    return overview.refresh(store, _atoms(store), dry_run=dry_run)


def _block(text: str) -> str:
    start = text.index(GENERATED_START)
    return text[start:text.index(GENERATED_END) + len(GENERATED_END)]


def test_overview_lists_each_project(project: Project, write_atom: Callable[..., Path]) -> None:
    store = project.store
    write_atom("EXP-001", date="2026-03-01")
    write_atom("EXP-002", date="2026-03-09")
    write_atom("K-001", date="2026-03-05")
    other, _ = scaffold.new_project(store, "other")
    (other.root / "STATUS.md").write_text("# S\n\n## Current phase\n\n- Phase 3 | ship\n")
    (store.context / "scans" / "2026-02-01.md").write_text("# Scan\n")
    (store.context / "scans" / "2026-04-11-deep.md").write_text("# Scan\n")
    _refresh(store)
    text = (store.context / "OVERVIEW.md").read_text()
    assert "Last knowledge scan: 2026-04-11 ([scans/2026-04-11-deep.md]" in text
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert rows[0].startswith("| [flywheel](projects/flywheel/STATUS.md) | Phase 1 — getting "
                              "started")
    assert rows[0].endswith("| 2 | 1 | 0 | 2026-03-09 |")
    assert rows[1] == "| [other](projects/other/STATUS.md) | Phase 3 \\| ship | 0 | 0 | 0 | — |"


def test_regeneration_is_idempotent(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    first = _refresh(project.store)
    assert project.store.context / "OVERVIEW.md" in first
    assert project.root / "CORTEX.md" in first
    assert _refresh(project.store, dry_run=True) == []
    assert _refresh(project.store) == []


def test_dry_run_writes_nothing(project: Project) -> None:
    before = {p: p.read_bytes() for p in project.store.context.rglob("*.md")}
    would = _refresh(project.store, dry_run=True)
    assert would
    after = {p: p.read_bytes() for p in project.store.context.rglob("*.md")}
    assert before == after
    assert sorted(_refresh(project.store)) == sorted(would)


def test_block_lists_files_with_descriptions(project: Project,
                                             write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    write_atom("EXP-002")
    (project.root / "experiments" / "notes.md").write_text(
        "---\nsummary: \"Raw notes | kept\"\n---\n# ignored heading\n")
    _refresh(project.store)
    block = _block((project.root / "CORTEX.md").read_text())
    assert "- [STATUS.md](STATUS.md) — Status — flywheel" in block
    assert "- [TASKS.yaml](TASKS.yaml) — structured task queue (see: cortex tasks list)" in block
    assert "- [experiments/](experiments/CORTEX.md) — Experiments — flywheel" in block
    assert "_meta" not in block and "CORTEX.md](CORTEX.md)" not in block
    exp = _block((project.root / "experiments" / "CORTEX.md").read_text())
    assert "- [index.md](index.md) — generated index" in exp
    assert "- [notes.md](notes.md) — Raw notes \\| kept" in exp
    assert "- 2 experiment atoms `EXP-NNN.md` (EXP-001 … EXP-002): find them through " \
           "index.md" in exp
    assert "EXP-001.md](" not in exp
    root = _block((project.store.context / "CORTEX.md").read_text())
    assert "- [OVERVIEW.md](OVERVIEW.md)" in root
    assert "- [projects/](projects/CORTEX.md) — Projects" in root
    projects = _block((project.store.projects_dir / "CORTEX.md").read_text())
    assert "- [flywheel/](flywheel/CORTEX.md) — Project flywheel" in projects


def test_hand_written_text_is_kept(project: Project) -> None:
    path = project.root / "CORTEX.md"
    path.write_text(f"# Mine\n\nBefore.\n\n{GENERATED_START}\nold stuff\n{GENERATED_END}\n\n"
                    "After, by hand.\n")
    _refresh(project.store)
    text = path.read_text()
    assert text.startswith("# Mine\n\nBefore.\n\n" + GENERATED_START + "\n## Contents\n")
    assert text.endswith(GENERATED_END + "\n\nAfter, by hand.\n")
    assert "old stuff" not in text


def test_cortex_md_without_markers_gets_the_block_appended(project: Project) -> None:
    path = project.root / "CORTEX.md"
    path.write_text("# Mine\n\nOnly prose.")
    _refresh(project.store)
    text = path.read_text()
    assert text.startswith("# Mine\n\nOnly prose.\n\n" + GENERATED_START)
    assert text.endswith(GENERATED_END + "\n")
    assert _refresh(project.store) == []


def test_broken_markers_leave_the_file_alone(project: Project) -> None:
    path = project.root / "CORTEX.md"
    path.write_text(f"# Mine\n\n{GENERATED_START}\nhand text that must survive\n")
    before = path.read_bytes()
    assert path not in _refresh(project.store)
    assert path.read_bytes() == before


def test_missing_cortex_md_is_created(project: Project) -> None:
    ideas = project.store.context / "ideas" / "graph-memory"
    ideas.mkdir()
    (ideas / "sketch.md").write_text("# A sketch of graph memory\n")
    (project.store.context / "ideas" / "empty").mkdir()
    written = _refresh(project.store)
    assert ideas / "CORTEX.md" in written
    assert not (project.store.context / "ideas" / "empty" / "CORTEX.md").exists()
    text = (ideas / "CORTEX.md").read_text()
    assert text.startswith("# Graph memory\n")
    assert "- [sketch.md](sketch.md) — A sketch of graph memory" in text
    parent = (project.store.context / "ideas" / "CORTEX.md").read_text()
    assert "- [graph-memory/](graph-memory/CORTEX.md) — Graph memory" in parent


def test_crlf_cortex_md_keeps_crlf(project: Project) -> None:
    path = project.root / "CORTEX.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    _refresh(project.store)
    raw = path.read_bytes()
    assert b"## Contents\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")


def test_odd_file_names_are_escaped(project: Project) -> None:
    (project.root / "a file|with<bits>.md").write_text("# Title with `code`\n")
    _refresh(project.store)
    block = _block((project.root / "CORTEX.md").read_text())
    assert "- [a file\\|with&lt;bits&gt;.md](a%20file%7Cwith%3Cbits%3E.md) — Title with " \
           "\\`code\\`" in block


def test_describe_markdown() -> None:
    assert overview.describe_markdown("---\nid: X\nsummary: 'quoted'\n---\n# H\n") == "quoted"
    assert overview.describe_markdown("<!-- c\n# not this -->\n\n## Real\n") == "Real"
    assert overview.describe_markdown("plain first line\nsecond\n") == "plain first line"
    assert overview.describe_markdown("") == ""
    assert len(overview.describe_markdown("# " + "x" * 500)) == overview.MAX_DESCRIPTION


def test_describe_markdown_reads_frontmatter_as_yaml() -> None:
    # the frontmatter is parsed by cortexfs.frontmatter, not line by line
    assert overview.describe_markdown("---\nsummary: kept # a comment\n---\n") == "kept"
    assert overview.describe_markdown("---\nsummary: >\n  folded\n  text\n---\n") == \
        "folded text"
    assert overview.describe_markdown('---\nsummary: "say \\"hi\\""\n---\n') == 'say "hi"'
    assert overview.describe_markdown("\ufeff---\r\nsummary: crlf\r\n---\r\n") == "crlf"
    # frontmatter that is not YAML, or has no summary: the first heading after it
    assert overview.describe_markdown("---\nsummary: [unclosed\n---\n# Heading\n") == \
        "Heading"
    assert overview.describe_markdown("---\nid: X\n---\nsummary: not frontmatter\n") == \
        "summary: not frontmatter"


def test_init_writes_an_empty_overview(store: Store) -> None:
    text = (store.context / "OVERVIEW.md").read_text()
    assert "_No projects yet" in text and "No knowledge scan yet" in text


def test_regen_entry_point_takes_a_regen_context(project: Project,
                                                 write_atom: Callable[..., Path]) -> None:
    import datetime as dt
    from types import MappingProxyType

    from cortexfs import derived
    from cortexfs.regen import RegenContext

    assert "cortexfs.overview:regen" in derived.GENERATORS
    write_atom("EXP-001", date="2026-01-05")
    store = project.store
    loaded = MappingProxyType({p.name: load_project(p) for p in store.projects()})
    ctx = RegenContext(store, dt.datetime.now(dt.UTC), True, ["flywheel"], loaded,
                       MappingProxyType({}))
    would = overview.regen(ctx, dry_run=True)
    assert store.context / "OVERVIEW.md" in would
    assert "2026-01-05" not in (store.context / "OVERVIEW.md").read_text()
    assert overview.regen(ctx) == would
    assert "| 1 | 0 | 0 | 2026-01-05 |" in (store.context / "OVERVIEW.md").read_text()
    assert overview.regen(ctx) == []


def test_a_block_is_recomputed_when_what_it_shows_changes_and_only_then(
        project: Project, write_atom: Callable[..., Path], monkeypatch: Any) -> None:
    """Per-folder signatures: a change to a described file, to a sub-folder's CORTEX.md
    (its title) or to a folder's entries recomputes that folder's block; the blocks of
    folders whose inputs are as they were are neither recomputed nor read."""
    import os
    import time

    from cortexfs import wall
    from cortexfs.regen import regenerate

    store = project.store
    write_atom("EXP-001")
    past = time.time() - 60

    def aged(*paths: Path) -> None:  # stat data older than cache.RACY_NS vouches for content
        nonlocal past
        past += 1
        for path in paths:
            os.utime(path, (past, past))

    def regen_aged() -> None:
        aged(*regenerate(store).written)

    aged(*(Path(folder, name) for folder, _, names in os.walk(store.context) for name in names))
    regen_aged()
    regen_aged()  # the signatures of aged files
    read: list[Path] = []
    real_read = wall.read_bytes

    def reading(root: Path, path: Path, limit: int) -> bytes:
        if path.name == "CORTEX.md":
            read.append(path.parent)
        return real_read(root, path, limit)

    monkeypatch.setattr(wall, "read_bytes", reading)
    regen_aged()
    assert read == []

    status = project.root / "STATUS.md"
    status.write_text(status.read_text().replace("# Status — flywheel", "# Status, renamed", 1))
    knowledge = project.root / "knowledge" / "CORTEX.md"
    knowledge.write_text(knowledge.read_text().replace("# Knowledge — flywheel",
                                                       "# Knowledge, renamed", 1))
    aged(status, knowledge)
    regen_aged()
    block = _block((project.root / "CORTEX.md").read_text())
    assert "- [STATUS.md](STATUS.md) — Status, renamed" in block
    assert "- [knowledge/](knowledge/CORTEX.md) — Knowledge, renamed" in block
    own = {project.root, *(project.root / d for d in ("decisions", "experiments", "knowledge",
                                                       "patterns"))}
    assert set(read) <= own  # flywheel's block, and its folders' titles

    read.clear()
    aged(write_atom("EXP-002"))
    regen_aged()
    assert "(EXP-001 … EXP-002)" in (project.root / "experiments" / "CORTEX.md").read_text()
    # experiments/; flywheel/ and projects/, whose CORTEX.md (or a sub-folder's) the last
    # run rewrote; not the store's other folders
    assert project.root / "experiments" in read
    assert set(read) <= own | {store.projects_dir}


_cells = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_projects = st.lists(st.fixed_dictionaries({
    "name": _cells, "link": _cells, "phase": _cells, "experiments": st.integers(0, 10**5),
    "knowledge": st.integers(0, 10**5), "patterns": st.integers(0, 10**5), "newest": _cells}),
    max_size=3)


@settings(max_examples=300, deadline=None)
@given(projects=_projects, last_scan=st.one_of(st.none(), _cells), last_scan_file=_cells,
       last_scan_link=_cells)
def test_overview_rendered_without_jinja_is_what_jinja_renders(**values: Any) -> None:
    from cortexfs.overview import render_packaged

    expected = templates.environment(None).get_template("store/OVERVIEW.md.j2").render(**values)
    assert render_packaged(values) == expected


@pytest.mark.parametrize(("new_id", "date", "patched"), [
    ("EXP-003", "date: 2026-04-01\n", True),  # the newest atom now
    ("EXP-004", "date: 2026-01-01\n", True),  # older than the newest
    ("K-002", "date: 2026-03-02\nevidence: [EXP-001]\n", True),  # another kind
    ("EXP-005", "", True),  # undated
    ("EXP-006", "date: 2026-04-01\n", False),  # and an atom edited besides
])
def test_a_new_atom_is_counted_into_the_cached_summary_as_counting_them_all_does(
        project: Project, write_atom: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
        new_id: str, date: str, patched: bool) -> None:
    """`cortex new` counts its atom into its project's cached summary instead of reading
    all the project's atoms: OVERVIEW.md and the summary are those of a run from no cache."""
    import os
    import shutil

    from cortexfs import regen

    store = project.store
    write_atom("EXP-001", date="2026-03-01")
    write_atom("EXP-002", date="2026-03-09")
    write_atom("K-001", date="2026-03-05", extra="evidence: [EXP-001]\n")
    regen.regenerate(store)
    if new_id == "EXP-006":
        write_atom("EXP-002", "edited", date="2026-03-09")
    path = write_atom(new_id, frontmatter=f"id: {new_id}\n{date}project: flywheel\n"
                      "summary: \"The new one\"\ntags: [c]\n")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # the newest file
    counted: list[int] = []
    real = overview.summarize
    monkeypatch.setattr(overview, "summarize", lambda atoms: counted.append(1) or real(atoms))
    regen.regenerate(store)
    assert counted == ([] if patched else [1])
    text = (store.context / "OVERVIEW.md").read_text()
    summary = (store.cache_dir / "overview" / "flywheel.bin").read_bytes()
    shutil.rmtree(store.cache_dir)
    (store.context / "OVERVIEW.md").unlink()
    regen.regenerate(store)
    assert (store.context / "OVERVIEW.md").read_text() == text
    assert (store.cache_dir / "overview" / "flywheel.bin").read_bytes() == summary
