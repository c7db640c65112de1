"""cortexfs.recall.arrays: named numpy arrays in one file, the checked ones CRC'd, the mapped
ones views of an mmap; anything that is not such a file is a ValueError, never misread."""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortexfs.recall import arrays


def sample() -> dict[str, np.ndarray]:
    return {"ids": np.arange(10, dtype=np.int32), "grid": np.ones((3, 4), np.float32) * 2.5,
            "empty": np.zeros(0, np.int64), "flags": np.array([True, False, True])}


def test_arrays_and_meta_come_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "seg.arr"
    arrays.write(path, sample(), {"name": "s0", "n": [1, 2]}, frozenset({"grid"}))
    out, meta = arrays.read(path)
    assert meta == {"name": "s0", "n": [1, 2]} and list(out) == list(sample())
    for name, array in sample().items():
        assert out[name].dtype == array.dtype and np.array_equal(out[name], array)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temporary


def test_a_file_of_no_arrays_reads(tmp_path: Path) -> None:
    arrays.write(tmp_path / "none.arr", {}, None, frozenset())
    assert arrays.read(tmp_path / "none.arr") == ({}, None)


def test_damage_to_a_checked_array_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "seg.arr"
    arrays.write(path, sample(), {}, frozenset())
    raw = bytearray(path.read_bytes())
    raw[-arrays.ALIGN] ^= 0xFF  # the last array's first byte (its block is padded to ALIGN)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="is damaged"):
        arrays.read(path)


def test_other_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "seg.arr"
    arrays.write(path, sample(), {}, frozenset())
    whole = path.read_bytes()
    path.write_bytes(whole[:-arrays.ALIGN + 1])  # the last array's bytes cut short
    with pytest.raises(ValueError, match="truncated"):
        arrays.read(path)
    path.write_bytes(b"PK\x03\x04 not ours")
    with pytest.raises(ValueError, match="not an array file"):
        arrays.read(path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="not an array file"):
        arrays.read(path)


def test_arrays_of_python_objects_are_never_read(tmp_path: Path) -> None:
    path = tmp_path / "seg.arr"
    arrays.write(path, {"ok": np.arange(3)}, {}, frozenset())
    raw = path.read_bytes()
    size = int.from_bytes(raw[8:16], "little")
    header = raw[16:16 + size].replace(b'"<i8"', b'"|O"', 1)
    assert len(header) == size - 1
    path.write_bytes(raw[:8] + (size - 1).to_bytes(8, "little") + header + b" " + raw[16 + size:])
    with pytest.raises(ValueError, match="holds Python objects"):
        arrays.read(path)


def _mapped(a: Any) -> bool:
    """Whether the array is a view of a memory mapping (not a copy of the bytes)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


def test_array_files(tmp_path: Path) -> None:
    path = tmp_path / "a.arr"
    data = {"ids": np.arange(10, dtype=np.int32), "empty": np.zeros((0, 3), np.int64),
            "small": np.array([1.5, 2.5])}
    arrays.write(path, data, {"k": 1}, mapped=frozenset({"ids", "empty"}))
    got, meta = arrays.read(path)
    assert meta == {"k": 1} and got["ids"].tolist() == list(range(10))
    assert _mapped(got["ids"]) and not _mapped(got["small"])
    assert got["empty"].shape == (0, 3) and got["small"].tolist() == [1.5, 2.5]
    raw = bytearray(path.read_bytes())
    size = int.from_bytes(raw[8:16], "little")
    offset = json.loads(raw[16:16 + size])["arrays"]["small"][2]
    raw[-(-(16 + size) // arrays.ALIGN) * arrays.ALIGN + offset] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="small is damaged"):
        arrays.read(path)
    path.write_bytes(bytes(raw[:40]))
    with pytest.raises((ValueError, OSError)):
        arrays.read(path)
    path.write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(ValueError, match="not an array file"):
        arrays.read(path)
