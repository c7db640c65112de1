"""HIPPOCAMPUS.md: strength, sections, idempotence, hierarchy, pointer checks."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import accesslog, hippocampus
from cortexfs.store import Project, Store
from cortexfs.strength import strength
from cortexfs.tokens import estimate

FIXTURES = Path(__file__).parent / "fixtures" / "memory"


def read(project: Project, file: str, ts: str, times: int = 1) -> None:
    accesslog.append(project.access_log,
                     [accesslog.format_line(file, "Read", "s1", ts)] * times)


def generate(store: Store) -> list[Path]:
    return hippocampus.write(store, hippocampus.collect(store))


def hx_of(store: Store, key: str) -> dict[str, str]:
    text = (store.context / "HIPPOCAMPUS.md").read_text()
    at = text.index(f"<!-- hx: id={key} ")
    return hippocampus.parse_hx(text[at:])


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
    assert hippocampus.write(store, hippocampus.collect(store), dry_run=True) == []
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
    renders: list[int] = []
    real_build = hippocampus.build

    def counting_build(*args: object, **kwargs: object) -> hippocampus.Index:
        renders.append(1)
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    def ctx(fp: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            store=store, projects={"flywheel": load_project(project)},
            access={"flywheel": accesslog.fold(project.access_log)},
            fingerprint=lambda names=None: fp)

    monkeypatch.setattr(hippocampus, "build", counting_build)
    path = store.context / "HIPPOCAMPUS.md"
    assert hippocampus.regen(ctx("a"), dry_run=True) == [path]
    assert not path.exists()
    assert hippocampus.regen(ctx("a")) == [path]
    assert len(renders) == 2
    assert hippocampus.regen(ctx("a")) == [] and len(renders) == 2  # inputs unchanged
    path.write_text("edited by hand\n")
    assert hippocampus.regen(ctx("a"), dry_run=True) == [path]  # the file no longer matches
    assert hippocampus.regen(ctx("a")) == [path]
    assert hippocampus.regen(ctx("b")) == [] and len(renders) == 5  # new inputs: rendered


def test_cortex_index_regen_writes_it_and_a_second_run_changes_nothing(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    from cortexfs.index import regenerate

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
    assert hippocampus.parse_hx(seed) == {
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
    assert "run `cortex index regen`" in str(problems[0])
    path = store.context / "HIPPOCAMPUS.md"
    path.write_text(path.read_text() + "→ ../../etc/passwd | projects §x\n")
    pointers = {p.pointer for p in hippocampus.check_pointers(store)}
    assert "../../etc/passwd" in pointers and "projects" not in pointers
