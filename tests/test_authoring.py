"""cortexfs.authoring: atoms rendered without Jinja are what Jinja renders; `cortex new`'s
library call gates before it writes, and racing processes never share an id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import templates
from cortexfs.atoms import KINDS
from cortexfs.loader import atom_paths

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_texts = st.lists(_text, max_size=3)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([k.name for k in KINDS]), id=_text, date=_text, project=_text,
       summary=_text, summary_yaml=_text, tags_yaml=_text, evidence=_texts,
       evidence_yaml=_text, sources=_texts, sources_yaml=_text, links_yaml=_text,
       executor=_text, executor_yaml=_text)
def test_atoms_rendered_without_jinja_are_what_jinja_renders(kind: str, **values: Any) -> None:
    from cortexfs.authoring import render_packaged

    expected = templates.environment(None).get_template(f"atoms/{kind}.md.j2").render(**values)
    assert render_packaged(next(k for k in KINDS if k.name == kind), values) == expected


def test_cortex_new_imports_no_jinja_without_an_override(store: Any, project: Any) -> None:
    """`cortex new` renders the atom and OVERVIEW.md (its counts moved) without Jinja; a store
    that overrides the atom template gets it rendered through Jinja."""
    import subprocess
    import sys

    script = ("import sys\nfrom cortexfs.cli.main import app\nsys.argv = ['cortex', *sys.argv[1:]]"
              "\ntry:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
              "print('jinja2' in sys.modules)\n")
    new = [sys.executable, "-c", script, "new", "exp", "-p", project.name, "-s", "a finding",
           "-t", "x"]
    first = subprocess.run(new, capture_output=True, text=True, check=True)
    assert first.stdout.split()[-1] == "False"
    assert (store.context / "OVERVIEW.md").read_text().count("| 1 | 0 | 0 |") == 1
    override = store.templates_dir / "atoms" / "experiment.md.j2"
    override.parent.mkdir(parents=True)
    override.write_text("---\nid: {{ id }}\ndate: {{ date }}\nsummary: {{ summary_yaml }}\n"
                        "tags: {{ tags_yaml }}\n---\n\nmine\n")
    second = subprocess.run([*new[:-3], "another finding", "-t", "x"], capture_output=True,
                            text=True, check=True)
    assert second.stdout.split()[-1] == "True"
    assert second.stdout.split()[-2].endswith("EXP-002.md")
    assert (Path(second.stdout.split()[-2])).read_text().endswith("\nmine\n")


def test_concurrent_new_never_share_an_id(project) -> None:
    """Real processes racing for ids: every one gets its own."""
    code = (
        "import sys\n"
        "from cortexfs.store import Store\n"
        "from cortexfs.atoms import EXPERIMENT\n"
        "from cortexfs.authoring import NewAtom, create_atom\n"
        "p = Store.open().project('flywheel')\n"
        "for i in range(10):\n"
        "    create_atom(p, NewAtom(EXPERIMENT, f'run {sys.argv[1]} {i}', ['race'], [], [], []))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)]) for n in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    paths = sorted(p.name for _, p in atom_paths(project))
    assert paths == [f"EXP-{n:03d}.md" for n in range(1, 41)]
    summaries = {p.read_text().split("summary: ")[1].split("\n")[0] for _, p in
                 atom_paths(project)}
    assert len(summaries) == 40


def test_add_atom_refuses_before_writing_and_takes_a_body(project) -> None:
    """The library call behind `cortex new` and MCP add_atom: gate first, one write."""
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.authoring import NewAtom, add_atom, kind_named
    from cortexfs.errors import CortexError, InvalidInputError

    req = NewAtom(EXPERIMENT, "Registry extraction from artifacts", ["registry"], [], [], [])
    first = add_atom(project, req, body="## Results\n\n573 artifacts.\n")
    assert first.duplicates == [] and first.change.created == [first.atom.path]
    assert first.change.message == "atom: add EXP-001 — Registry extraction from artifacts"
    assert first.atom.path.read_text().endswith("---\n\n## Results\n\n573 artifacts.\n")
    second = add_atom(project, req)
    assert [d.id for d in second.duplicates] == ["EXP-001"]
    with pytest.raises(CortexError):
        add_atom(project, req, strict=True)
    assert sorted(p.name for _, p in atom_paths(project)) == ["EXP-001.md", "EXP-002.md"]
    with pytest.raises(InvalidInputError, match="use exp, k or pat"):
        kind_named("zzz")


def test_add_atom_gives_the_projects_scan_with_the_new_atom(project, write_atom) -> None:
    """What the gate read, the new atom refreshed in it: what a scan taken afterwards gives
    (a regeneration that follows uses it rather than walking the project again)."""
    import os

    from cortexfs import loader
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.authoring import NewAtom, add_atom

    for i in range(1, 4):
        write_atom(f"EXP-{i:03d}", summary=f"run {i}")
    write_atom("K-001", frontmatter="id: [x\n")
    loader.scan(project)
    os.utime(project.root / "experiments" / "EXP-002.md", ns=(1, 1_000_000_000))
    added = add_atom(project, NewAtom(EXPERIMENT, "A new run", ["a"], [], [], []))
    assert added.scan is not None and added.atom.path.name == "EXP-004.md"
    fresh = loader.scan(project, save=False)
    assert added.scan.folders == fresh.folders and added.scan.others == fresh.others
    assert [added.scan.inputs_digest(k) for k in KINDS] == [fresh.inputs_digest(k) for k in KINDS]
    assert [(a.path, a.meta) for a in added.scan.loaded().atoms] == \
        [(a.path, a.meta) for a in fresh.loaded().atoms]
    assert [str(e) for e in added.scan.errors()] == [str(e) for e in fresh.errors()]
    added.scan.save()  # (the regeneration's save): the next walk finds the records current
    assert loader.scan(project, save=False).parsed == 0
