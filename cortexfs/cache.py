"""Cache files under $CORTEX_HOME/.cache/: keyed by the code that wrote them, checksummed,
disposable.

Also here: the one rule by which stat data vouches for a file's content (`racy`), and the
stamps built on it (`file_state` / `still`, `stamp`), with git's caution about "racily
clean" files.

A cache file is `MAGIC`, a CRC-32 of the payload, then the payload in
`marshal` format (fast, and unable to run code when loaded, unlike pickle). The payload
names the code that wrote it (`code_key`: a digest of the package's own sources, by their
stat data as Python's bytecode cache checks them, so a new or edited cortex never reads an
older one's rows — no version constant to bump), the
Python that wrote it, and its kind: a name, plus whatever describes its rows (the field
names of a record type), so that a cache written with other fields reads as absent. Anything
unexpected — a missing, truncated, corrupt, foreign or outdated file — reads as "no
cache", so the caller rebuilds from the atoms: a cache can make cortex faster, never
wrong, and any cache file may be deleted at any time. Writes go through a temporary file
and a rename, without fsync: a torn cache fails its checksum and is rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import marshal
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

try:  # hashlib imports OpenSSL (~5 ms); the blake2 module alone is all we need
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - interpreters without the private module
    from hashlib import blake2b

MAGIC = b"CORTEXCACHE\x03"
_TAG = f"{sys.implementation.cache_tag}:{marshal.version}"  # marshal differs across Pythons
_DIGEST = 16


def digest(data: bytes | memoryview, size: int = _DIGEST) -> bytes:
    """A BLAKE2b digest of `data`."""
    return blake2b(data, digest_size=size).digest()


def _check(payload: bytes | memoryview) -> bytes:
    """What tells a whole cache file from a torn or damaged one. A CRC (4 GB/s here) and not
    `digest` (1 GB/s): this guards against accidents, not an adversary (who could rewrite
    either), and a no-op regen of 100,000 atoms checks ~30 MB of caches."""
    return zlib.crc32(payload).to_bytes(4, "big")


@functools.cache
def code_key() -> str:
    """A digest of every Python source of the cortexfs package: what decides the content
    of every cache, once per process that reads or writes one.

    Each source counts by its stat data (name, mtime in ns, size), as Python's own bytecode
    cache decides which code runs (by a source's mtime and size, the mtime in seconds):
    ~100 stats, ~0.5 ms, where reading and hashing the ~1 MB of sources took 6-11 ms of
    every command. A source whose mtime is within the racy window (just edited: an edit of
    the same size may follow in the same tick) counts by its content."""
    root = os.path.dirname(__file__)
    sources: list[tuple[bytes, str]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = folder[len(root):].encode()
        sources.extend((rel + b"/" + n.encode(), os.path.join(folder, n))
                       for n in names if n.endswith(".py"))
    h = blake2b(digest_size=_DIGEST)
    now = time.time_ns()
    for rel, path in sorted(sources):
        st = os.stat(path)
        if racy(st.st_mtime_ns, now):
            with open(path, "rb") as f:
                h.update(rel + b"\0content\0" + f.read())
        else:
            h.update(rel + f"\0stat\0{st.st_mtime_ns} {st.st_size}".encode())
    return h.hexdigest()


def load(path: Path, kind: Any) -> Any:
    """The data saved at `path` under `kind`, or None when there is no valid cache there."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    head = len(MAGIC) + 4
    if len(raw) < head or not raw.startswith(MAGIC):
        return None
    payload = memoryview(raw)[head:]
    if _check(payload) != raw[len(MAGIC):head]:
        return None
    try:
        code, tag, saved_kind, data = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if code != code_key() or tag != _TAG or saved_kind != kind:
        return None
    return data


def save(path: Path, kind: Any, data: Any) -> bool:
    """Save `data` (marshal-able values only) at `path`; False if the cache cannot be written.

    Failing to write a cache is never an error: the next run rebuilds it.
    """
    try:
        payload = marshal.dumps((code_key(), _TAG, kind, data))
    except ValueError:  # a value marshal cannot write: a bug, but not worth failing for
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _check(payload) + payload)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


RACY_NS = 2_000_000_000  # mtime granularity we do not trust (FAT: 2 s; ext4/tmpfs: a tick)
Stamp = tuple[int, int, int]  # (mtime_ns, size, inode): what stat data says of a file's content


def stamp_of(st: os.stat_result) -> Stamp:
    """A file's stamp, the one shape every cache of cortex keeps (with `racy` beside it)."""
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def racy(mtime_ns: int, now_ns: int) -> bool:
    """Whether a file last modified at `mtime_ns` is "racily clean" at `now_ns`: a later
    write could keep the same mtime and size, so its stat data cannot vouch for its content
    yet (compare the content, or remember nothing derived from it)."""
    return now_ns - mtime_ns < RACY_NS

# what is remembered of a file: [digest of its content, mtime_ns, size, inode, racy]
FileState = list[Any]


def file_state(path: str | os.PathLike[str], content_digest: str,
               now_ns: int | None = None) -> FileState | None:
    """What `still` needs to tell later that `path` is unchanged, given the digest of the
    content the caller just read or wrote there; None when it cannot be stat-ed.

    A file modified within RACY_NS of now is "racy": a later write could keep the same
    mtime and size, so `still` compares its content instead of trusting its stat data.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    now = time.time_ns() if now_ns is None else now_ns
    return [content_digest, *stamp_of(st), racy(st.st_mtime_ns, now)]


def still(path: str | os.PathLike[str], state: Any) -> bool:
    """Whether `path` still holds what `state` (from `file_state`) describes."""
    if not (isinstance(state, list) and len(state) == 5):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    if list(stamp_of(st)) != state[1:4]:
        return False
    if not state[4]:
        return True
    try:
        with open(path, "rb") as f:
            return bool(digest(f.read()).hex() == state[0])
    except OSError:
        return False


def stamp(path: str | os.PathLike[str], now_ns: int) -> Stamp | None:
    """(mtime_ns, size, inode) of `path` — (0, -1, 0) when it does not exist — or None when
    it changed within RACY_NS of `now_ns`, so that its stat data cannot vouch for its
    content yet (nothing derived from it should be remembered)."""
    try:
        st = os.stat(path)
    except OSError:
        return (0, -1, 0)
    return None if racy(st.st_mtime_ns, now_ns) else stamp_of(st)
