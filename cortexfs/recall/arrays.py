"""A file of named numpy arrays, memory-mapped when read: the lexical index's container.

Layout: MAGIC, the length of a JSON header, the header — `{"meta": …, "arrays": {name:
[dtype, shape, offset, size, crc32 or null]}}` — then each array's bytes at a 64-byte
aligned offset. One read of the header and one mmap per file open every array: numpy's
.npz parses a header per member through `ast.literal_eval` (~0.8 ms each: 0.65 s for the
850 members of a 100,000-atom index).

Arrays named in `mapped` are views of the mapping (a query reads the pages it touches);
the others are read whole and their CRC-32 checked. Mapped bytes are not checked: damage
shows as ids out of range (IndexError, on which recall rebuilds its index). Writes go to a
temporary file renamed into place, without fsync: a cache lost in a crash is rebuilt.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from cortexfs.fsutil import removed_on_error

MAGIC = b"CXARRAY1"
ALIGN = 64


def write(path: Path, arrays: dict[str, np.ndarray], meta: Any, mapped: frozenset[str]) -> None:
    """Write `arrays` and `meta` (JSON-able) to `path`, atomically."""
    entries: dict[str, list[Any]] = {}
    blobs: list[tuple[int, bytes]] = []
    offset = 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        raw = data.tobytes()
        entries[name] = [data.dtype.str, list(data.shape), offset, len(raw),
                         None if name in mapped else zlib.crc32(raw)]
        blobs.append((offset, raw))
        offset += -(-len(raw) // ALIGN) * ALIGN
    header = json.dumps({"meta": meta, "arrays": entries}).encode("utf-8")
    start = -(-(len(MAGIC) + 8 + len(header)) // ALIGN) * ALIGN
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with removed_on_error(tmp):
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + len(header).to_bytes(8, "little") + header)
            for at, raw in blobs:
                f.seek(start + at)
                f.write(raw)
            f.truncate(start + offset)
        os.replace(tmp, path)


def read(path: Path) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays and meta written at `path`. ValueError (or OSError) for a file that is
    not one, or whose checked arrays do not match their CRC."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 8)
        if len(head) != len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
            raise ValueError(f"{path.name}: not an array file")
        size = int.from_bytes(head[len(MAGIC):], "little")
        header = json.loads(f.read(size))
    start = -(-(len(MAGIC) + 8 + size) // ALIGN) * ALIGN
    entries = header["arrays"]
    end = max((start + e[2] + e[3] for e in entries.values()), default=start)
    if os.path.getsize(path) < end:
        raise ValueError(f"{path.name}: truncated")
    if end > start:  # (a plain array over the mapping: np.memmap's Python-level hooks cost
        # a 100,000-atom query ~10 ms over the thousands of slices it takes)
        with open(path, "rb") as f:
            buf = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
    else:
        buf = np.zeros(0, np.uint8)
    out: dict[str, np.ndarray] = {}
    for name, (dtype, shape, offset, nbytes, crc) in entries.items():
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError(f"{path.name}: {name} holds Python objects")
        view = buf[start + offset:start + offset + nbytes]
        if crc is not None:
            raw = bytes(view)
            if zlib.crc32(raw) != crc:
                raise ValueError(f"{path.name}: {name} is damaged")
            out[name] = np.frombuffer(raw, dtype=dt).reshape(shape)
        else:
            out[name] = view.view(dt).reshape(shape)
    return out, header["meta"]
