"""The packaged atom and OVERVIEW.md templates rendered without Jinja: what Jinja renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import templates
from cortexfs.atoms import KINDS

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


_cells = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_projects = st.lists(st.fixed_dictionaries({
    "name": _cells, "link": _cells, "phase": _cells, "experiments": st.integers(0, 10**5),
    "knowledge": st.integers(0, 10**5), "patterns": st.integers(0, 10**5), "newest": _cells}),
    max_size=3)


@settings(max_examples=300, deadline=None)
@given(projects=_projects, last_scan=st.one_of(st.none(), _cells), last_scan_file=_cells,
       last_scan_link=_cells)
def test_overview_rendered_without_jinja_is_what_jinja_renders(**values: Any) -> None:
    from cortexfs.overview import render_packaged

    expected = templates.environment(None).get_template("store/OVERVIEW.md.j2").render(**values)
    assert render_packaged(values) == expected


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
