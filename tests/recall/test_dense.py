"""cortexfs.recall.dense: the dense signal (a tiny random model; the real one is optional),
its vector cache, and abstention."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import fsutil
from cortexfs import recall as rc
from cortexfs.recall import dense, lexical, query, segment
from cortexfs.store import Project, Store
from recall.helpers import ids

FIXTURES = Path(__file__).parent.parent / "fixtures" / "embed"


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



def test_dense_on_a_read_only_store_embeds_in_memory(store: Store, tiny_model: Path,
                                                     atoms: Callable[..., Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # (root ignores permissions: the failing writes are simulated)
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(args[0]))

    monkeypatch.setattr(fsutil, "file_lock", refuse)  # (the recall caches' one lock step)
    monkeypatch.setattr(dense, "atomic_write", refuse)
    monkeypatch.setattr(segment, "save", refuse)
    monkeypatch.setattr(lexical, "write_temp", refuse)
    result = rc.recall(store, "kitten yarn")
    assert "dense" in result.signals and len(result.hits) == 3
    assert not list((store.cache_dir / "recall").rglob("*.npz"))  # nothing could be saved

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")  # not a permission: still an error

    monkeypatch.setattr(fsutil, "file_lock", broken)
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
