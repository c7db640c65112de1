"""The write gate: `cortex new` warns about (and --strict refuses) near-duplicate atoms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiny_model import make_tiny_model

from cortexfs import dedup
from cortexfs import recall as rc
from cortexfs.atoms import EXPERIMENT, KNOWLEDGE
from cortexfs.store import Project, Store


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")


@pytest.fixture
def existing(write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads by 40 percent",
               tags="[cache, latency]")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency during backfill",
               tags="[shard]")


def test_jaccard_of_terms() -> None:
    a = dedup.gate_terms("Cache invalidation on write cut stale reads", ["cache"])
    b = dedup.gate_terms("cache invalidations on writes cut the stale reads", [])
    assert a == b  # stems, stop words out, tags folded in
    assert dedup.jaccard(a, b) == 1.0
    assert dedup.jaccard(set(), set()) == 0.0


def test_rephrasing_is_a_duplicate(project: Project, existing: None) -> None:
    dups = dedup.find_duplicates(project, EXPERIMENT,
                                 "Cache invalidation on writes cut stale reads 40 percent",
                                 ["cache"])
    assert [d.id for d in dups] == ["EXP-001"]
    assert dups[0].method == "terms" and dups[0].similarity >= dedup.JACCARD_THRESHOLD
    assert "Cache invalidation on write" in dups[0].describe()


@pytest.mark.parametrize("summary, tags", [
    ("Cache warmup before deploy halves cold-start latency", ["cache", "latency"]),  # topic
    ("Stale reads", ["cache"]),  # a few shared words
])
def test_related_atoms_are_not_duplicates(project: Project, existing: None, summary: str,
                                          tags: list[str]) -> None:
    assert dedup.find_duplicates(project, EXPERIMENT, summary, tags) == []


def test_only_same_kind_same_project(store: Store, project: Project, existing: None,
                                     write_atom: Callable[..., Path]) -> None:
    from cortexfs import scaffold

    summary = "Cache invalidation on write cut stale reads by 40 percent"
    assert dedup.find_duplicates(project, KNOWLEDGE, summary, ["cache"]) == []
    other, _ = scaffold.new_project(store, "other")
    assert dedup.find_duplicates(other, EXPERIMENT, summary, ["cache"]) == []


def test_vectors_when_recall_has_them(store: Store, project: Project, existing: None,
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(make_tiny_model(tmp_path / "m")))
    # no vectors cached yet: the gate does not load the model or embed the store
    assert dedup.find_duplicates(project, EXPERIMENT, "unrelated words", ["x"],
                                 cosine_threshold=-1.0) == []
    rc.forget_open_indexes()
    rc.recall(store, "cache")  # recall embeds the atoms
    dups = dedup.find_duplicates(project, EXPERIMENT, "unrelated words", ["x"],
                                 cosine_threshold=-1.0)
    assert {d.id for d in dups} == {"EXP-001", "EXP-002"}
    assert {d.method for d in dups} == {"vectors"}


# --- through `cortex new` ---------------------------------------------------------------------


def _new(cli: Any, summary: str, *extra: str) -> Any:
    return cli("new", "exp", "-p", "flywheel", "-s", summary, "-t", "cache", "--no-commit",
               *extra)


def test_new_warns_and_writes(cli: Any, project: Project, existing: None) -> None:
    res = _new(cli, "Cache invalidation on writes cut stale reads by 40 percent")
    assert res.exit_code == 0, res.stderr
    assert "warning: EXP-001 (terms similarity" in res.stderr
    assert "Cache invalidation on write cut stale reads by 40 percent" in res.stderr
    assert "--strict" in res.stderr
    assert (project.root / "experiments" / "EXP-003.md").is_file()


def test_new_strict_refuses(cli: Any, project: Project, existing: None) -> None:
    res = _new(cli, "Cache invalidation on writes cut stale reads by 40 percent", "--strict")
    assert res.exit_code == 1
    assert res.stderr.startswith("error: not written: the new atom nearly duplicates EXP-001")
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (project.root / "experiments" / "EXP-003.md").exists()
    assert sorted(p.name for p in (project.root / "experiments").glob("*.tmp")) == []


def test_new_distinct_atom_is_silent(cli: Any, project: Project, existing: None) -> None:
    res = _new(cli, "Bloom filters in front of the cache cut disk reads", "--strict")
    assert res.exit_code == 0 and res.stderr == ""
    assert (project.root / "experiments" / "EXP-003.md").is_file()


def test_new_in_empty_project_and_bad_input(cli: Any, project: Project) -> None:
    assert _new(cli, "First atom ever", "--strict").exit_code == 0
    res = _new(cli, "   ", "--strict")
    assert res.exit_code == 1 and "the summary is empty" in res.stderr


def test_gate_does_not_import_numpy(project: Project, existing: None) -> None:
    # `cortex new` runs the gate on every atom it writes: the ranking half of recall (numpy,
    # ~60 ms) is imported only when recall has vectors to compare with.
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from cortexfs import dedup\n"
            "from cortexfs.atoms import EXPERIMENT\n"
            "from pathlib import Path\n"
            "from cortexfs.store import Store\n"
            f"project = Store(Path({str(project.store.home)!r})).project({project.name!r})\n"
            "dedup.find_duplicates(project, EXPERIMENT, 'cache invalidation cut reads', [])\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    loaded = set(json.loads(out.stdout))
    assert "cortexfs.recall.tokenize" in loaded
    assert "numpy" not in loaded and "cortexfs.recall.query" not in loaded


def test_the_gate_terms_cache_follows_every_change(project: Project, existing: None,
                                                   write_atom: Callable[..., Path]) -> None:
    """The terms kept per file stamp: an edit in place (same size, same second), a new
    atom, a deleted one and a deleted cache all give what a gate without a cache gives."""
    import os

    query = ("Cache invalidation on write cut stale reads", ["cache"])

    def gate() -> list[tuple[str, str, float]]:
        return [(d.id, d.summary, round(d.similarity, 6))
                for d in dedup.find_duplicates(project, EXPERIMENT, *query)]

    cached = project.store.cache_dir / "dedup" / f"{project.name}.experiments.bin"
    first = gate()
    assert cached.exists() and [d[0] for d in first] == ["EXP-001"]
    assert gate() == first  # served by the cache
    path = project.root / "experiments" / "EXP-001.md"
    st = os.stat(path)
    text = path.read_text()
    # the same size and mtime: only the content (the loader's CRC) tells the edit
    path.write_text(text.replace("Cache invalidation", "Queue backpressure"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert gate() == []
    path.write_text(text)
    write_atom("EXP-003", summary="Cache invalidation on writes cut stale reads",
               tags="[cache]")
    assert [d[0] for d in gate()] == ["EXP-003", "EXP-001"]
    (project.root / "experiments" / "EXP-003.md").unlink()
    assert gate() == first
    cached.unlink()
    assert gate() == first
    cached.write_bytes(b"torn")
    assert gate() == first
