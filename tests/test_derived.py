"""cortexfs.derived: the store-wide files every regeneration refreshes, after the indexes."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path

from cortexfs.derived import GENERATORS
from cortexfs.regen import regenerate
from cortexfs.store import Project, Store


def test_every_generator_is_a_function_taking_the_context_and_dry_run() -> None:
    assert GENERATORS == ["cortexfs.hippocampus:regen", "cortexfs.overview:regen"]
    for entry in GENERATORS:
        module, _, name = entry.partition(":")
        function = getattr(importlib.import_module(module), name)
        assert list(inspect.signature(function).parameters)[:2] == ["ctx", "dry_run"]


def test_a_regeneration_writes_what_the_generators_make(store: Store, project: Project,
                                                        write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="A derived fact")
    written = regenerate(store, ["flywheel"]).written
    names = {path.name for path in written}
    assert {"HIPPOCAMPUS.md", "OVERVIEW.md"} <= names
    assert "A derived fact" in (store.context / "HIPPOCAMPUS.md").read_text()
    assert not {path.name for path in regenerate(store, ["flywheel"]).written} & names
