"""Rendering an index.md: list cells, and the packaged templates rendered without Jinja."""

from __future__ import annotations

import types
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import escape
from cortexfs.regen import render


def test_list_cells_read_lists_as_atoms_do() -> None:
    """The fast path of list cells gives what Atom's list properties + cell() give."""
    import random

    from cortexfs.atoms import as_list

    rng = random.Random(7)
    pieces = ["a", "b", " ", "\xa0", "", "|", ",", "\t", "x y", "<", "1"]
    for _ in range(3000):
        value: Any = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 3)))
                      for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.1:
            value = [*value, None, 3, True]
        assert render.list_cell(value) == escape.cell(", ".join(as_list(value))), value
    assert render.list_cell("a, b") == "a, b"
    assert render.list_cell(None) == ""


_cells = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


class _FakeRow(types.SimpleNamespace):
    pass


_rows = st.lists(st.builds(_FakeRow, id=_cells, date=_cells, summary=_cells, tags=_cells,
                           refs=st.integers(0, 10**6), links=_cells, evidence=_cells,
                           sources=_cells, status=_cells, invalidated_by=_cells), max_size=3)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["experiments", "knowledge", "patterns"]), title=_cells,
       project=_cells, use_when=_cells, updated=_cells, total=st.integers(0, 3),
       active=_rows, invalidated=_rows, superseded=_rows,
       stats=st.builds(render.Stats, total=st.integers(0, 9), active=st.integers(0, 9),
                       invalidated=st.integers(0, 9), superseded=st.integers(0, 9),
                       challenged=_cells, hot=_cells, cold=_cells))
def test_rendering_without_jinja_is_what_jinja_renders(kind: str, **values: Any) -> None:
    from cortexfs import templates
    from cortexfs.atoms import KINDS

    folder_kind = next(k for k in KINDS if k.folder == kind)
    expected = templates.environment(None).get_template(f"index/{kind}.md.j2").render(**values)
    assert render.render_packaged(folder_kind, values) == expected
