"""A tiny random BERT in the all-MiniLM-L6-v2 file layout, for testing the dense path
without the 90 MB model (CI installs no `embed` extra)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

_WORD_TEXT = ("cat kitten dog puppy yarn ball tax report invoice budget cache latency shard "
              "memory recall vector session the a of and to is")
WORDS = _WORD_TEXT.split()
PIECES = ("##s", "##ing", "##ed", "##er")


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors format: u64 header length, JSON header, raw little-endian bytes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def make_tiny_model(folder: Path, hidden: int = 8, heads: int = 2, layers: int = 2,
                    seed: int = 0) -> Path:
    """Write config.json, vocab.txt and model.safetensors of a random tiny BERT."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *PIECES,
             *"abcdefghijklmnopqrstuvwxyz0123456789.,!?'-",
             *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789")]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    inter = hidden * 2
    config = {"hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": layers,
              "intermediate_size": inter, "max_position_embeddings": 64,
              "layer_norm_eps": 1e-12, "vocab_size": len(vocab), "type_vocab_size": 2}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 32}')
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    t: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": w(len(vocab), hidden),
        "embeddings.position_embeddings.weight": w(64, hidden),
        "embeddings.token_type_embeddings.weight": w(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t[p + f"attention.self.{n}.weight"] = w(hidden, hidden)
            t[p + f"attention.self.{n}.bias"] = w(hidden)
        t[p + "attention.output.dense.weight"] = w(hidden, hidden)
        t[p + "attention.output.dense.bias"] = w(hidden)
        t[p + "attention.output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        t[p + "attention.output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
        t[p + "intermediate.dense.weight"] = w(inter, hidden)
        t[p + "intermediate.dense.bias"] = w(inter)
        t[p + "output.dense.weight"] = w(hidden, inter)
        t[p + "output.dense.bias"] = w(hidden)
        t[p + "output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        t[p + "output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
    write_safetensors(folder / "model.safetensors", t)
    return folder
