"""Cache files under $CORTEX_HOME/.cache/: versioned, checksummed, disposable.

A cache file is `MAGIC`, a 16-byte BLAKE2b digest of the payload, then the payload in
`marshal` format (fast, and unable to run code when loaded, unlike pickle). The payload
names its format version, its kind and the Python that wrote it. Anything unexpected — a
missing, truncated, corrupt, foreign or outdated file — reads as "no cache", so the caller
rebuilds from the atoms: a cache can make cortex faster, never wrong. Writes go through a
temporary file and a rename, without fsync: a torn cache fails its checksum and is rebuilt.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

try:  # hashlib imports OpenSSL (~5 ms); the blake2 module alone is all we need
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - interpreters without the private module
    from hashlib import blake2b

MAGIC = b"CORTEXCACHE\x01"
FORMAT = 1
_TAG = f"{sys.implementation.cache_tag}:{marshal.version}"  # marshal differs across Pythons
_DIGEST = 16


def digest(data: bytes | memoryview, size: int = _DIGEST) -> bytes:
    """A BLAKE2b digest of `data`."""
    return blake2b(data, digest_size=size).digest()


def load(path: Path, kind: str) -> Any:
    """The data saved at `path` under `kind`, or None when there is no valid cache there."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    head = len(MAGIC) + _DIGEST
    if len(raw) < head or not raw.startswith(MAGIC):
        return None
    payload = memoryview(raw)[head:]
    if digest(payload) != raw[len(MAGIC):head]:
        return None
    try:
        fmt, tag, saved_kind, data = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if fmt != FORMAT or tag != _TAG or saved_kind != kind:
        return None
    return data


def save(path: Path, kind: str, data: Any) -> bool:
    """Save `data` (marshal-able values only) at `path`; False if the cache cannot be written.

    Failing to write a cache is never an error: the next run rebuilds it.
    """
    try:
        payload = marshal.dumps((FORMAT, _TAG, kind, data))
    except ValueError:  # a value marshal cannot write: a bug, but not worth failing for
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + digest(payload) + payload)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
