"""HIPPOCAMPUS.md: strength, sections, idempotence, hierarchy, pointer checks."""

from __future__ import annotations

import os
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import accesslog, hippocampus
from cortexfs.loader import load_project
from cortexfs.store import Project, Store
from cortexfs.strength import strength
from cortexfs.tokens import estimate

FIXTURES = Path(__file__).parent / "fixtures" / "memory"


def read(project: Project, file: str, ts: str, times: int = 1) -> None:
    accesslog.append(project.access_log,
                     [accesslog.format_line(file, "Read", "s1", ts)] * times)


def collect(store: Store) -> hippocampus.MemoryIndex:
    """The index built straight from the store's atoms and folded logs, no cache."""
    projects = store.projects()
    return hippocampus.build([load_project(p, bodies=False) for p in projects],
                             {p.name: accesslog.fold(p.access_log) for p in projects})


def generate(store: Store) -> list[Path]:
    return hippocampus.write(store, collect(store))


_HX = re.compile(r"<!--\s*hx:(.*?)-->", re.DOTALL)


def parse_hx(text: str) -> dict[str, str]:
    """The fields of the first `<!-- hx: k=v | k=v … -->` comment in `text` (which may span
    lines, as in the spec's example); {} when there is none. (How an agent reads an entry's
    metadata: the package writes it and never reads it back.)"""
    m = _HX.search(text)
    if not m:
        return {}
    fields: dict[str, str] = {}
    for part in m.group(1).split("|"):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key.strip()] = " ".join(value.split())
    return fields


def hx_of(store: Store, key: str) -> dict[str, str]:
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    at = text.index(f"<!-- hx: id={key} ")
    return parse_hx(text[at:])


# --- strength --------------------------------------------------------------------------------


def test_strength_formula_and_modifiers() -> None:
    assert round(strength(168), 2) == 0.42  # SPEC §8: one week is 0.42, not the seed's 0.52
    assert strength(24) == pytest.approx(3.4 ** -0.3)
    assert strength(1e6, priority="critical") == 1.0 == strength(1e6, priority="amygdala")
    assert strength(168, priority="high") == pytest.approx(17.8 ** (-0.3 * 0.3))
    assert strength(168, priority="low") == pytest.approx(17.8 ** -0.6)
    assert strength(168, priority="normal") == strength(168) == strength(168, priority="bogus")
    assert strength(168, src="manual", related=3) == pytest.approx(17.8 ** (-0.3 * 0.5 * 0.7))


def test_index_pins_one_week_since_last_read(store: Store, project: Project,
                                             write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date="2026-01-01")
    write_atom("EXP-002", date="2026-01-01")
    read(project, "EXP-001.md", "2026-03-01T12:00:00.000Z")
    read(project, "EXP-002.md", "2026-03-08T12:00:00.000Z")  # the newest event: the clock
    generate(store)
    assert hx_of(store, "flywheel/EXP-001")["str"] == "0.42"
    assert hx_of(store, "flywheel/EXP-002")["str"] == "1.00"
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    assert text.startswith("<!-- hippocampus.md v1.0 | entries: 2 | "
                           "reindexed: 2026-03-08T12:00:00Z -->\n# HIPPOCAMPUS.md — Memory Index\n")


def test_never_read_counts_from_the_date_and_modifiers_apply(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date="2026-03-01")
    write_atom("EXP-002", date="2026-03-08")  # the clock: 168 h after EXP-001's date
    write_atom("EXP-003", date="2026-03-01",
               extra="priority: critical\n")
    write_atom("EXP-004", date="2026-03-01", extra="src: manual\n")
    write_atom("K-001", date="2026-03-01", extra="evidence: [EXP-001, EXP-003, EXP-004]\n")
    generate(store)
    assert hx_of(store, "flywheel/EXP-001")["str"] == "0.42"
    assert hx_of(store, "flywheel/EXP-001")["accessed"] == "never"
    assert hx_of(store, "flywheel/EXP-003")["str"] == "1.00"
    assert hx_of(store, "flywheel/EXP-003")["pri"] == "critical"
    manual = hx_of(store, "flywheel/EXP-004")
    assert manual["src"] == "manual" and manual["str"] == f"{17.8 ** -0.15:.2f}"
    k = hx_of(store, "flywheel/K-001")
    assert k["rel"] == "flywheel/EXP-001,flywheel/EXP-003,flywheel/EXP-004"
    assert k["str"] == f"{17.8 ** -0.21:.2f}"  # 3 related: 0.7 × the forgetting rate
    assert hx_of(store, "flywheel/EXP-001")["rel"] == "flywheel/K-001"  # both directions


# --- idempotence -----------------------------------------------------------------------------


def test_regeneration_is_idempotent_and_ignores_the_wall_clock(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    write_atom("EXP-001", date="2025-01-01")
    read(project, "EXP-001.md", "2025-06-01T00:00:00.000Z")
    first = generate(store)
    assert first == [store.context / "HIPPOCAMPUS.md"]
    before = (store.context / "HIPPOCAMPUS.md").read_bytes()
    import datetime as real_dt

    class Later(real_dt.datetime):
        @classmethod
        def now(cls, tz: real_dt.tzinfo | None = None) -> Later:  # type: ignore[override]
            return cls(2030, 1, 1, tzinfo=tz)

    monkeypatch.setattr(real_dt, "datetime", Later)
    assert generate(store) == []
    assert hippocampus.write(store, collect(store), dry_run=True) == []
    assert (store.context / "HIPPOCAMPUS.md").read_bytes() == before


def test_a_new_read_moves_the_clock(store: Store, project: Project,
                                    write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date="2026-01-01")
    write_atom("EXP-002", date="2026-01-01")
    generate(store)
    assert hx_of(store, "flywheel/EXP-001")["str"] == "1.00"
    read(project, "EXP-002.md", "2026-01-08T00:00:00.000Z")
    assert generate(store) == [store.context / "HIPPOCAMPUS.md"]
    assert hx_of(store, "flywheel/EXP-001")["str"] == "0.42"
    assert hx_of(store, "flywheel/EXP-002")["hits"] == "1"


def test_generator_entry_point_and_its_skip_cache(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs.loader import load_project

    write_atom("EXP-001")
    builds: list[str] = []
    renders: list[int] = []
    real_part, real_render = hippocampus.project_part, hippocampus.render

    def counting_part(name: str, *args: object) -> hippocampus.Part:
        builds.append(name)
        return real_part(name, *args)  # type: ignore[arg-type]

    def counting_render(index: hippocampus.MemoryIndex, *args: object) -> Any:
        renders.append(1)
        return real_render(index, *args)  # type: ignore[arg-type]

    def ctx(fp: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            store=store, projects={"flywheel": load_project(project)},
            access={"flywheel": accesslog.fold(project.access_log)},
            fingerprint=lambda names=None, dated=True: fp, added=lambda name, before, since: None)

    monkeypatch.setattr(hippocampus, "project_part", counting_part)
    monkeypatch.setattr(hippocampus, "render", counting_render)
    path = store.context / "HIPPOCAMPUS.md"
    assert hippocampus.regen(ctx("a"), dry_run=True) == [path]
    assert not path.exists()
    assert hippocampus.regen(ctx("a")) == [path]
    assert len(renders) == 2 and builds == ["flywheel"]  # the project's part: from the cache
    assert hippocampus.regen(ctx("a")) == [] and len(renders) == 2  # inputs unchanged
    path.write_text("edited by hand\n")
    assert hippocampus.regen(ctx("a"), dry_run=True) == [path]  # the file no longer matches
    assert hippocampus.regen(ctx("a")) == [path]
    assert hippocampus.regen(ctx("b")) == [] and len(renders) == 5  # new inputs: rendered
    assert builds == ["flywheel", "flywheel"]
    # a damaged part cache is rebuilt, never trusted
    part_file = store.cache_dir / "hippocampus" / "flywheel.bin"
    part_file.write_bytes(part_file.read_bytes()[:-3] + b"xyz")
    assert hippocampus.regen(ctx("c")) == [] and builds == ["flywheel"] * 3


def test_cortex_index_regen_writes_it_and_a_second_run_changes_nothing(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    from cortexfs.regen import regenerate

    write_atom("EXP-001", date="2026-01-01")
    path = store.context / "HIPPOCAMPUS.md"
    assert path in regenerate(store).written
    before = path.read_bytes()
    assert path not in regenerate(store).written
    assert regenerate(store, dry_run=True).written == []
    read(project, "EXP-001.md", "2026-01-08T00:00:00.000Z")
    assert path in regenerate(store, dry_run=True).written
    assert path.read_bytes() == before
    assert path in regenerate(store).written
    assert "| hits=1 |" in path.read_text()


def test_listed_as_a_derived_generator() -> None:
    from cortexfs.derived import GENERATORS

    assert "cortexfs.hippocampus:regen" in GENERATORS


# --- sections --------------------------------------------------------------------------------


def test_sections_quick_access_time_decay_and_meta(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    for n in range(1, 26):
        write_atom(f"EXP-{n:03d}", date="2026-03-01", summary=f"Run {n}")
        read(project, f"EXP-{n:03d}.md", "2026-03-01T00:00:00.000Z", times=n)
    write_atom("EXP-026", date="2023-01-01", summary="Forgotten")
    write_atom("EXP-027", date="2026-03-01", extra="status: invalidated:EXP-001\n")
    write_atom("EXP-028", date="2026-03-01", extra="status: superseded:EXP-002\n")
    write_atom("EXP-029", date="2026-02-15", summary="Mid-month")
    read(project, "EXP-025.md", "2026-03-20T00:00:00.000Z")  # the clock
    generate(store)
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## Quick Access", "## By Topic", "## By Time", "## Associations",
                     "## Decay Queue", "## Meta"]
    quick = text.split("## Quick Access")[1].split("## By Topic")[0]
    ids = [line[4:] for line in quick.splitlines() if line.startswith("### ")]
    assert ids == [f"flywheel/EXP-{n:03d}" for n in range(25, 5, -1)]  # top 20 by hits
    assert "| hits=26 |" in quick  # EXP-025: 25 reads plus the newest
    by_time = text.split("## By Time")[1].split("## Associations")[0]
    week, month, older = (by_time.split("### This Week")[1].split("### This Month")[0],
                          by_time.split("### This Month")[1].split("### Older")[0],
                          by_time.split("### Older")[1])
    assert "EXP-025" in week and "EXP-001 " in month and "EXP-029" in older
    decay = text.split("## Decay Queue")[1].split("## Meta")[0]
    assert "flywheel/EXP-026 — Forgotten (str 0.09)" in decay
    assert "EXP-027" not in text and "EXP-028" not in text
    assert "- Not indexed: 1 invalidated, 1 superseded" in text
    assert "- Entries: 27 in 1 project (experiments 27, knowledge 0, patterns 0)" in text


def test_summaries_cannot_break_the_format(store: Store, project: Project,
                                           write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="# not a heading → not a pointer <!-- nor a comment -->",
               tags="[\"we|rd\", \"x-->y\"]")
    generate(store)
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    assert "\\# not a heading -> not a pointer &lt;!-- nor a comment --&gt;" in text
    assert hx_of(store, "flywheel/EXP-001")["tags"] == "we_rd,x--_y"
    assert hippocampus.check_pointers(store) == []


def test_empty_store_still_gets_an_index(store: Store) -> None:
    generate(store)
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    assert text.startswith("<!-- hippocampus.md v1.0 | entries: 0 | reindexed: never -->")
    assert "_No reads recorded yet._" in text and "_No entries._" in text


def test_parse_hx_reads_the_seed_example() -> None:
    seed = (FIXTURES / "hippocampus-seed.md").read_text()
    assert parse_hx(seed) == {
        "id": "acme-deploy", "created": "2026-01-10", "accessed": "2026-01-31", "hits": "23",
        "str": "0.92", "tags": "deploy,vercel,acme", "rel": "railway-services,cloudflare-dns"}
    pointer_line = next(line for line in seed.splitlines() if line.startswith("→"))
    assert hippocampus.pointers_of(pointer_line) == ["TOOLS.md", "projects/acme.ai/PROJECT.md"]


# --- hierarchy -------------------------------------------------------------------------------


def test_past_the_ceiling_the_index_goes_hierarchical_and_back(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    long = "A fairly long summary that describes what this experiment found in detail " * 2
    paths = [write_atom(f"EXP-{n:03d}", summary=f"{n} {long}", tags=f"[t{n % 7}, shared]",
                        date=f"2026-0{1 + n % 3}-1{n % 9}") for n in range(1, 181)]
    for n in range(1, 40):
        read(project, f"EXP-{n:03d}.md", f"2026-03-2{n % 9}T00:00:00.000Z", times=n % 5 + 1)
    written = generate(store)
    context = store.context
    master = (context / "HIPPOCAMPUS.md").read_text()
    assert "| layout: hierarchical -->" in master.splitlines()[0]
    assert estimate(master) <= hippocampus.MASTER_MAX_TOKENS
    topic = (context / ".hippocampus" / "topics" / "flywheel.md").read_text()
    assert topic.count("<!-- hx: id=flywheel/EXP-") == 180
    assert (context / ".hippocampus" / "meta.json").is_file()
    assert (context / ".hippocampus" / "temporal" / "2026-03.md").is_file()
    assert context / ".hippocampus" / "decay-queue.md" in written
    assert hippocampus.check_pointers(store) == []
    assert generate(store) == []  # idempotent in this layout too
    for path in paths[10:]:
        path.unlink()
    removed = generate(store)
    assert context / ".hippocampus" / "topics" / "flywheel.md" in removed
    assert not (context / ".hippocampus").exists()
    assert "layout: hierarchical" not in (context / "HIPPOCAMPUS.md").read_text()


# --- pointer checks --------------------------------------------------------------------------


def test_check_pointers_finds_dangling_and_escaping_pointers(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    assert hippocampus.check_pointers(store) == []  # not generated yet: nothing to check
    gone = write_atom("EXP-001")
    write_atom("EXP-002")
    generate(store)
    assert hippocampus.check_pointers(store) == []
    gone.unlink()
    problems = hippocampus.check_pointers(store)
    assert problems and {p.pointer for p in problems} == {
        "projects/flywheel/experiments/EXP-001.md"}
    assert "run `cortex index regen --all`" in str(problems[0])
    path = store.context / "HIPPOCAMPUS.md"
    path.write_text(path.read_text() + "→ ../../etc/passwd | projects §x\n")
    pointers = {p.pointer for p in hippocampus.check_pointers(store)}
    assert "../../etc/passwd" in pointers and "projects" not in pointers


# --- incremental regeneration == a rebuild from nothing -------------------------------------


def _generated(store: Store) -> dict[str, bytes]:
    """Every generated file of the store (indexes, overviews, CORTEX.md, hippocampus)."""
    out = {}
    for path in sorted(store.context.rglob("*")):
        rel = path.relative_to(store.context).as_posix()
        if path.is_file() and (path.name in ("index.md", "CORTEX.md", "OVERVIEW.md",
                                             "HIPPOCAMPUS.md") or rel.startswith(".hippocampus")):
            out[rel] = path.read_bytes()
    return out


@pytest.mark.parametrize("trust_stat", [False, True], ids=["racy", "settled"])
def test_incremental_regeneration_equals_a_rebuild_from_nothing(
        store: Store, project: Project, write_atom: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, trust_stat: bool) -> None:
    """After each of a sequence of edits, reads and deletions, what the incremental run
    (every cache warm) leaves on disk is byte for byte what a run with no cache writes —
    with every file racily fresh (content compared), and with settled stat data (trusted:
    each change then gets an mtime of its own, as time passing gives it)."""
    import shutil
    import time

    from cortexfs import scaffold
    from cortexfs.regen import regenerate

    monkeypatch.setattr(hippocampus, "MAX_TOKENS", 300)  # the hierarchical layout, surely
    monkeypatch.setattr(hippocampus, "MASTER_MAX_TOKENS", 1_000)
    clock = [1_700_000_000]
    if trust_stat:  # what regeneration writes is seconds old by the next step
        real = time.time_ns
        monkeypatch.setattr(time, "time_ns", lambda: real() + 10_000_000_000)

    def settle(*paths: Path) -> None:
        if not trust_stat:
            return
        for path in paths:
            for p in (path, path.parent):
                if p.exists():
                    clock[0] += 1
                    os.utime(p, (clock[0], clock[0]))

    other, _ = scaffold.new_project(store, "other")
    a = [write_atom(f"EXP-{n:03d}", summary=f"Run {n} of the registry", date=f"2026-03-0{n}",
                    tags=f"[t{n % 3}, registry]", extra="links: [EXP-002]\n" if n > 2 else "")
         for n in range(1, 8)]
    write_atom("K-001", summary="Retries need jitter", extra="evidence: [EXP-001, EXP-003]\n")
    write_atom("PAT-001", summary="Registry drift", extra="source-experiments: [EXP-002]\n")
    b = [write_atom(f"EXP-{n:03d}", summary=f"Other {n}", date="2026-02-01", target=other)
         for n in range(1, 4)]
    settle(*a, *b)

    def edit_summary() -> None:
        text = a[0].read_text().replace("Run 1 of", "Run 9 of")  # the same size
        a[0].write_text(text)
        settle(a[0])

    def reads() -> None:
        read(project, "EXP-002.md", "2026-03-20T10:00:00.000Z", times=3)
        read(other, "EXP-001.md", "2026-03-21T10:00:00.000Z")
        settle(project.access_log, other.access_log)

    def delete_and_invalidate() -> None:
        (project.root / "knowledge" / "K-001.md").unlink()
        path = a[3]
        path.write_text(path.read_text().replace("tags:", "status: invalidated:EXP-005\ntags:"))
        settle(path, project.root / "knowledge")

    def new_things() -> None:
        third, _ = scaffold.new_project(store, "third")
        p = write_atom("EXP-001", summary="Third", date="2026-04-01", target=third)
        status = project.root / "STATUS.md"
        status.write_text(status.read_text().replace("Phase 1", "Phase 2"))
        notes = project.root / "experiments" / "notes.md"
        notes.write_text("# Notes on runs\n")
        (store.context / "ideas" / "graph").mkdir()
        (store.context / "ideas" / "graph" / "sketch.md").write_text("# Sketch\n")
        settle(p, status, notes, store.context / "ideas" / "graph" / "sketch.md")

    def hand_edits() -> None:
        cortex = project.root / "CORTEX.md"
        cortex.write_text("Hand-written note.\n" + cortex.read_text())
        notes = project.root / "experiments" / "notes.md"
        notes.write_text("# Notes on reruns\n")  # a description changes, not the listing
        settle(cortex, notes)

    def topics_edited_by_hand() -> None:  # a project whose key did not move: its entries
        topics = store.context / ".hippocampus" / "topics"  # from its part file, or built
        (store.cache_dir / "hippocampus" / "third.bin").unlink()
        for name in ("other", "third"):
            path = topics / f"{name}.md"
            path.write_text(path.read_text() + "A hand-written line.\n")
            settle(path)

    def remove_project() -> None:
        shutil.rmtree(other.root)
        settle(store.projects_dir)

    def replace_log() -> None:
        project.access_log.write_text(
            accesslog.format_line("EXP-005.md", "Read", "s2", "2026-03-02T00:00:00.000Z")
            .decode())
        settle(project.access_log)

    def damage_caches() -> None:
        for path in store.cache_dir.rglob("*.bin"):
            raw = bytearray(path.read_bytes())
            raw[-1] ^= 0xFF
            path.write_bytes(bytes(raw))
        text = a[1].read_text().replace("Run 2", "Run 8")
        a[1].write_text(text)
        settle(a[1])

    steps = [lambda: None, edit_summary, reads, delete_and_invalidate, new_things, hand_edits,
             topics_edited_by_hand, remove_project, replace_log, damage_caches]
    for n, step in enumerate(steps):
        step()
        regenerate(store)
        assert regenerate(store).written == [], f"step {n}: a second run still writes"
        incremental = _generated(store)
        # the generators' cache-free paths agree too
        assert hippocampus.write(store, collect(store), dry_run=True) == []
        from cortexfs import overview
        from cortexfs.loader import load_project

        assert overview.refresh(store, {p.name: load_project(p).atoms
                                        for p in store.projects()}, dry_run=True) == []
        copy = tmp_path / f"rebuilt-{n}"
        shutil.copytree(store.home, copy, ignore=shutil.ignore_patterns(".cache"))
        rebuilt = Store(copy)
        assert regenerate(rebuilt, dry_run=True).written == [], f"step {n}"
        regenerate(rebuilt)
        assert _generated(rebuilt) == incremental, f"step {n}: {step.__name__}"
        shutil.rmtree(copy)
        if n == 2:
            assert (store.context / ".hippocampus" / "topics" / "flywheel.md").is_file()


def test_a_new_day_rebuilds_no_entries(store: Store, project: Project,
                                       write_atom: Callable[..., Path],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Only index.md depends on the date (its cold list): HIPPOCAMPUS.md's cached entries
    and the overview's rows survive midnight."""
    import datetime as dt

    from cortexfs import overview, regen
    from cortexfs.regen import run

    write_atom("EXP-001", date="2026-01-01")
    monkeypatch.setattr(run, "utc_now", lambda: dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    regen.regenerate(store)
    built: list[str] = []
    real_part, real_summary = hippocampus.project_part, overview.summarize
    monkeypatch.setattr(hippocampus, "project_part",
                        lambda name, *a: built.append(name) or real_part(name, *a))
    monkeypatch.setattr(overview, "summarize",
                        lambda atoms: built.append("summary") or real_summary(atoms))
    monkeypatch.setattr(run, "utc_now", lambda: dt.datetime(2026, 2, 2, tzinfo=dt.UTC))
    written = regen.regenerate(store).written
    assert project.root / "experiments" / "index.md" in written  # EXP-001 is cold now
    assert built == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_cold_run_builds_the_entries_on_both_cores(
        store: Store, project: Project, write_atom: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a forked worker, each process builds (and caches) the entries of the projects it
    indexed; the files are those of a run without one."""
    import shutil

    from cortexfs import forked, regen, scaffold
    from cortexfs.regen import run, worker

    other, _ = scaffold.new_project(store, "other")
    for n in range(1, 6):
        write_atom(f"EXP-{n:03d}", summary=f"Run {n}", date=f"2026-03-0{n}")
        write_atom(f"EXP-{n:03d}", summary=f"Other {n}", date="2026-02-01", target=other)
    read(other, "EXP-002.md", "2026-03-20T00:00:00.000Z")
    now = run.utc_now()
    monkeypatch.setattr(run, "utc_now", lambda: now)  # the same "Last updated" both times
    pristine = tmp_path / "pristine"
    shutil.copytree(store.home, pristine)
    regen.regenerate(store)
    serial = _generated(store)
    shutil.rmtree(store.home)
    shutil.copytree(pristine, store.home)
    parent = os.getpid()
    built: list[str] = []
    real = hippocampus.project_part

    def spy(name: str, *args: object) -> hippocampus.Part:
        if os.getpid() == parent:
            built.append(name)
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(hippocampus, "project_part", spy)
    monkeypatch.setattr(worker, "FORK_MIN_FILES", 1)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    regen.regenerate(store)
    assert _generated(store) == serial
    assert len(built) == 1  # the other project's entries came from the worker


def test_pointer_existence_is_what_the_file_system_says(store: Store) -> None:
    root = store.context
    (root / "a").mkdir()
    (root / "a" / "file.md").write_text("x")
    (root / "a" / "gone.md").symlink_to(root / "nowhere.md")
    (root / "a" / "link.md").symlink_to(root / "a" / "file.md")
    pointers = ["a/file.md", "a/link.md", "a/b/../file.md", "a", "a/gone.md", "a/missing.md",
                "nowhere/x.md", "../a/file.md", "/etc/passwd"]
    (root / "HIPPOCAMPUS.md").write_text("".join(f"- entry → {p}\n" for p in pointers))
    nothing, out = "leads to nothing in the knowledge root", "leads out of the knowledge root"
    assert {p.pointer: p.reason for p in hippocampus.check_pointers(store)} == {
        "a/gone.md": nothing, "a/missing.md": nothing, "nowhere/x.md": nothing,
        "../a/file.md": out, "/etc/passwd": out}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.05, 0.5, 1.0]),
                          st.one_of(st.none(), st.integers(-2, 2))), max_size=30),
       st.randoms())
def test_the_orders_sorted_in_passes_are_those_of_one_tuple_key(
        rows: list[tuple[int, float, int | None]], rng: Any) -> None:
    """Ties included, and whatever order the entries come in."""
    entries: list[Any] = [types.SimpleNamespace(key=f"p/K-{n:03d}", hits=hits, strength=strength,
                                     event_us=event) for n, (hits, strength, event)
               in enumerate(rows)]
    rng.shuffle(entries)
    index: Any = types.SimpleNamespace(entries=entries)
    never = hippocampus.NEVER_US
    assert hippocampus.by_strength(entries) == sorted(
        entries, key=lambda e: (-e.strength, -e.hits, e.key))
    assert hippocampus.recent_first(entries) == sorted(
        entries, key=lambda e: (-(e.event_us if e.event_us is not None else never), e.key))
    assert hippocampus.decay_queue(index) == sorted(
        (e for e in entries if e.strength < hippocampus.DECAY_THRESHOLD),
        key=lambda e: (e.strength, e.key))


def test_hierarchical_files_whose_inputs_did_not_move_are_not_rendered(
        store: Store, project: Project, write_atom: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In the hierarchical layout a run renders the temporal files, decay queue and topic
    files whose inputs moved (and those no longer as written), the others not at all; what
    it leaves on disk is byte for byte a run with no cache."""
    import shutil
    import time

    from cortexfs import scaffold
    from cortexfs.regen import regenerate

    monkeypatch.setattr(hippocampus, "MAX_TOKENS", 300)
    monkeypatch.setattr(hippocampus, "MASTER_MAX_TOKENS", 1_000)
    real_ns = time.time_ns  # what regeneration writes is seconds old by the next step
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + 10_000_000_000)
    clock = [1_700_000_000]

    def settle(*paths: Path) -> None:
        for path in paths:
            for p in (path, path.parent):
                clock[0] += 1
                os.utime(p, (clock[0], clock[0]))

    other, _ = scaffold.new_project(store, "other")
    mine = [write_atom(f"EXP-{n:03d}", summary=f"Run {n}", date=f"2026-0{1 + n % 3}-0{n}",
                       extra="links: [EXP-001]\n" if n > 1 else "") for n in range(1, 10)]
    theirs = [write_atom(f"EXP-{n:03d}", summary=f"Other {n}", date=f"2026-0{1 + n % 3}-1{n}",
                         target=other) for n in range(1, 10)]
    write_atom("EXP-001", summary="The clock", date="2099-01-01", target=scaffold.new_project(
        store, "late")[0])  # holds the store clock still while the others change
    settle(*mine, *theirs)
    regenerate(store)
    temporal = store.context / ".hippocampus" / "temporal"
    rendered: list[str] = []
    real_render = hippocampus.render_views

    def spy(*args: Any) -> Any:
        for rel, text in real_render(*args):
            if rel.startswith((".hippocampus/temporal/", ".hippocampus/topics/")):
                rendered.append(rel.rsplit("/", 1)[1].removesuffix(".md"))
            yield rel, text

    monkeypatch.setattr(hippocampus, "render_views", spy)

    def new_atom() -> None:
        settle(write_atom("EXP-010", summary="New in March", date="2026-03-30"))

    def hand_edit_a_month() -> None:
        path = temporal / "2026-02.md"
        path.write_text(path.read_text() + "a line by hand\n")
        settle(path)

    def edit_a_shared_month() -> None:
        text = theirs[1].read_text().replace("Other 2", "Other two")
        theirs[1].write_text(text)
        settle(theirs[1])

    def delete_the_queue() -> None:
        (store.context / ".hippocampus" / "decay-queue.md").unlink()

    def move_the_clock() -> None:
        read(other, "EXP-003.md", "2099-02-01T00:00:00.000Z")
        settle(other.access_log)

    expected = [["2026-03", "flywheel"], ["2026-02"], ["2026-03", "other"], [],
                ["2026-01", "2026-02", "2026-03", "2099-01", "2099-02", "flywheel", "late",
                 "other"]]
    for n, step in enumerate([new_atom, hand_edit_a_month, edit_a_shared_month,
                              delete_the_queue, move_the_clock]):
        step()
        rendered.clear()
        regenerate(store)
        assert sorted(rendered) == expected[n], step.__name__
        assert regenerate(store).written == [], step.__name__
        copy = tmp_path / f"rebuilt-{n}"
        shutil.copytree(store.home, copy, ignore=shutil.ignore_patterns(".cache"))
        rebuilt = Store(copy)
        regenerate(rebuilt)
        assert _generated(rebuilt) == _generated(store), step.__name__
        shutil.rmtree(copy)


def _part_cache(store: Store, name: str) -> Any:
    """(key, head, the part's rows) as cached (the rows unmarshalled: marshal's bytes depend
    on which equal values happen to be one object)."""
    import marshal

    from cortexfs import cache

    saved = cache.load(store.cache_dir / "hippocampus" / f"{name}.bin", hippocampus.PART_KIND)
    return saved[0], saved[1], marshal.loads(saved[2])


def _spied_with_added(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Watch `hippocampus.with_added`: the list gets, per call, whether it patched."""
    used: list[bool] = []
    real = hippocampus.with_added

    def spy(*args: Any) -> hippocampus.Part | None:
        part = real(*args)
        used.append(part is not None)
        return part

    monkeypatch.setattr(hippocampus, "with_added", spy)
    return used


@pytest.mark.parametrize(("new_id", "extra", "patched"), [
    # cites an entry, an id that is none (kept for later) and itself; EXP-004 is cited by
    # EXP-001 and read in the log before it exists; it goes between EXP-002 and EXP-010
    ("EXP-004", "links: [EXP-002, EXP-099, EXP-004]\n", True),
    ("K-002", "evidence: [EXP-001]\nlinks: [K-001]\n", True),
    ("PAT-001", "source-experiments: [EXP-010]\n", False),  # the project's first pattern
    ("EXP-005", "status: superseded\n", False),  # not indexed
    ("EXP-006", "id: EXP-002\n", False),  # an id taken: the file name is not the id
    ("EXP-007", "", None),  # and an atom edited by hand: not one new file, so not tried
    ("EXP-008", "", None),  # and a read appended to the log: the same
])
def test_a_new_atom_is_added_to_the_cached_part_exactly_as_a_rebuild_makes_it(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch, new_id: str, extra: str, patched: bool | None,
        ) -> None:
    """`cortex new` adds its atom to its project's cached part instead of rebuilding it:
    the part and every generated file are those of a run from no cache at all."""
    import datetime as dt
    import shutil

    from cortexfs import regen
    from cortexfs.regen import run

    now = dt.datetime(2026, 3, 20, tzinfo=dt.UTC)
    monkeypatch.setattr(run, "utc_now", lambda: now)
    write_atom("EXP-001", summary="First", extra="links: [EXP-004, EXP-002]\n")
    write_atom("EXP-002", summary="Second", date="2026-03-01")
    write_atom("EXP-010", summary="Tenth", date="2026-03-05", extra="evidence: [EXP-077]\n")
    write_atom("K-001", summary="Known", extra="evidence: [EXP-001, EXP-004]\n")
    read(project, "EXP-001.md", "2026-03-10T00:00:00.000Z", times=2)
    read(project, "EXP-004.md", "2026-03-12T00:00:00.000Z")
    regen.regenerate(store)
    if "id:" in extra:
        path = write_atom(new_id, summary="The new one", frontmatter=(
            f"{extra}date: 2026-03-15\nproject: flywheel\nsummary: \"The new one\"\n"
            "tags: [c]\n"))
    else:
        path = write_atom(new_id, summary="The new one", date="2026-03-15", extra=extra)
    if new_id == "EXP-007":
        write_atom("EXP-002", summary="Second, edited", date="2026-03-01")
    if new_id == "EXP-008":
        read(project, "EXP-002.md", "2026-03-13T00:00:00.000Z")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # the newest file
    used = _spied_with_added(monkeypatch)
    regen.regenerate(store)
    assert used == ([] if patched is None else [patched])
    files, part = _generated(store), _part_cache(store, project.name)
    shutil.rmtree(store.cache_dir)
    regen.regenerate(store)
    assert _generated(store) == files
    assert _part_cache(store, project.name) == part
    assert used == ([] if patched is None else [patched])


def test_a_new_atom_beside_an_id_used_twice_rebuilds_the_part(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two files with one id leave one entry, placed by the first file and pointing at the
    second: an atom added by its file name would go in the wrong place, so the part is
    rebuilt (found in review: the patched part listed EXP-002 before EXP-001)."""
    import datetime as dt
    import shutil

    from cortexfs import regen
    from cortexfs.regen import run

    now = dt.datetime(2026, 3, 20, tzinfo=dt.UTC)
    monkeypatch.setattr(run, "utc_now", lambda: now)
    write_atom("EXP-001", summary="First", date="2026-03-01")
    write_atom("EXP-003", summary="Third, with the first's id", frontmatter=(
        "id: EXP-001\ndate: 2026-03-03\nproject: flywheel\nsummary: \"dup\"\ntags: [c]\n"))
    write_atom("EXP-010", summary="Tenth", date="2026-03-05")
    regen.regenerate(store)
    path = write_atom("EXP-002", summary="New", date="2026-03-15")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # the newest file
    used = _spied_with_added(monkeypatch)
    regen.regenerate(store)
    assert used == [False]
    files, part = _generated(store), _part_cache(store, project.name)
    shutil.rmtree(store.cache_dir)
    regen.regenerate(store)
    assert _generated(store) == files
    assert _part_cache(store, project.name) == part


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_views_and_topic_files_made_in_a_forked_process_are_those_made_here(
        store: Store, project: Project, write_atom: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past FORK_MIN_CHARS of topic files to render, about half of the projects' views and
    topic files are made in a forked process: the files are those of a run without it, and
    a process that fails leaves its share to this one."""
    import shutil

    from cortexfs import forked, regen, scaffold
    from cortexfs.regen import run

    monkeypatch.setattr(hippocampus, "MAX_TOKENS", 300)  # the hierarchical layout, surely
    monkeypatch.setattr(hippocampus, "MASTER_MAX_TOKENS", 1_000)
    for name in ("other", "third"):
        target, _ = scaffold.new_project(store, name)
        for n in range(1, 7):
            write_atom(f"EXP-{n:03d}", summary=f"{name} {n}", date=f"2026-02-0{n}",
                       tags=f"[t{n % 2}]", target=target)
    for n in range(1, 9):
        write_atom(f"EXP-{n:03d}", summary=f"Run {n}", date=f"2026-03-0{n}",
                   extra="links: [EXP-002]\n" if n > 2 else "")
    read(project, "EXP-002.md", "2026-03-20T00:00:00.000Z")
    now = run.utc_now()
    monkeypatch.setattr(run, "utc_now", lambda: now)
    pristine = tmp_path / "pristine"
    shutil.copytree(store.home, pristine)
    regen.regenerate(store)
    here = _generated(store)
    parent = os.getpid()
    makers = tmp_path / "makers"  # the pid of each process that made a view
    real_view = hippocampus.project_view

    def view(entries: Any, ref_us: Any) -> Any:
        with open(makers, "a") as f:
            f.write(f"{os.getpid()}\n")
        if failing and os.getpid() != parent:
            os._exit(3)  # the forked process dies at its first view
        return real_view(entries, ref_us)

    monkeypatch.setattr(hippocampus, "project_view", view)
    monkeypatch.setattr(hippocampus, "FORK_MIN_CHARS", 1)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    for failing in (False, True):
        shutil.rmtree(store.home)
        shutil.copytree(pristine, store.home)
        makers.unlink(missing_ok=True)
        regen.regenerate(store)
        assert _generated(store) == here
        pids = makers.read_text().split()
        assert len(pids) == (4 if failing else 3)  # (the one that died began one)
        assert sum(pid != str(parent) for pid in pids) == (1 if failing else 2)
