"""cortexfs.escape: every value written into YAML or markdown, one function per target."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexfs import escape, frontmatter
from cortexfs.errors import InvalidInputError
from cortexfs.escape import script_json
from cortexfs.store import Project, Store

HOSTILE = ("[x](javascript:alert(1)) [y](http://evil.example/) ![](http://evil.example/p.png) "
           "<script>alert(1)</script> <img src=x onerror=alert(1)> `code` | pipe "
           "<!-- hidden --> &amp; → ## not a heading")


def _html(markdown: str) -> str:
    from markdown_it import MarkdownIt  # (installed with rich)

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _assert_inert(html: str) -> None:
    """No image, script, comment or other HTML of the text's own; links only cortex's (to
    relative paths in the store, never to a scheme)."""
    for live in ("<img", "<script", "<!--", "<b>"):
        assert live not in html, (live, html)
    hrefs = re.findall(r'<a href="([^"]*)"', html)
    assert all(":" not in h and not h.startswith("//") for h in hrefs), hrefs
    assert html.count("<a ") == len(hrefs)


def test_executor_cannot_add_yaml_keys(cli: Any, project: Project) -> None:
    # the template put it in the YAML unquoted: an invalidated atom, exit 0
    result = cli("new", "exp", "-p", "flywheel", "-s", "x", "-t", "a", "--no-commit",
                 "--executor", "bob\nstatus: invalidated\nrefs: 999")
    assert result.exit_code == 1 and "executor must be one line" in result.stderr
    assert not list((project.root / "experiments").glob("EXP-*.md"))
    odd = 'bob: "the builder" #1 [x] {y} & *z'
    result = cli("new", "exp", "-p", "flywheel", "-s", "x", "-t", "a", "--no-commit",
                 "--executor", odd)
    assert result.exit_code == 0, result.stderr
    from cortexfs.frontmatter import read

    meta = read(project.root / "experiments" / "EXP-001.md").meta
    assert meta["executor"] == odd and meta["status"] == "active" and "refs" not in meta


def test_an_override_that_splices_raw_values_is_refused(cli: Any, project: Project) -> None:
    from cortexfs.templates import package_dir

    override = project.store.templates_dir / "atoms" / "experiment.md.j2"
    override.parent.mkdir(parents=True)
    override.write_text((package_dir("templates") / "atoms" / "experiment.md.j2").read_text()
                        .replace("{{ executor_yaml }}", "{{ executor }}"))
    result = cli("new", "exp", "-p", "flywheel", "-s", "x", "-t", "a", "--no-commit",
                 "--executor", "bob # the builder")
    assert result.exit_code == 1, result.output
    assert "does not write `executor` back as given" in result.stderr
    assert "{{ executor_yaml }}" in result.stderr
    assert not list((project.root / "experiments").glob("EXP-*.md"))


def test_generated_files_neutralise_links_images_and_html(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    from cortexfs.regen import regenerate

    write_atom("EXP-001", summary=HOSTILE.replace('"', "'"), tags='["<b>t</b>", "[l](x)"]')
    (project.root / "notes.md").write_text(f"# {HOSTILE}\n")  # described in CORTEX.md
    regenerate(store)
    for path in (project.root / "experiments" / "index.md", store.context / "HIPPOCAMPUS.md",
                 project.root / "CORTEX.md"):
        text = path.read_text()
        assert "javascript:alert(1)" in text, path  # still there, as text
        # cortex's own comments fill whole lines; no summary can start one (`<` escaped)
        own = re.compile(r"^<!-- .* -->$", re.M)
        _assert_inert(_html(own.sub("", text)))
    hippo = (store.context / "HIPPOCAMPUS.md").read_text()
    assert "&lt;script&gt;" in hippo and "<script>" not in hippo  # escaped like index.md


@given(st.text(max_size=60))
@settings(max_examples=300, derandomize=True, deadline=None)
def test_cell_and_line_are_one_inert_line(text: str) -> None:
    for out in (escape.cell(text), escape.line(text), escape.line(text, 10)):
        assert "\n" not in out and "\r" not in out
        _assert_inert(_html(out))
    cell = escape.cell(text)
    unescaped = [i for i, ch in enumerate(cell) if ch == "|" and (i == 0 or cell[i - 1] != "\\")]
    assert not unescaped or cell[:unescaped[0]].endswith("\\\\")  # (an escaped backslash)


@given(st.one_of(st.text(max_size=40), st.lists(st.text(max_size=10), max_size=4),
                 st.integers(), st.booleans(), st.none()))
@settings(max_examples=500, derandomize=True, deadline=None)
def test_yaml_scalar_loads_back_as_one_value(value: Any) -> None:
    dumped = escape.yaml_scalar(value)
    assert "\n" not in dumped
    assert yaml.safe_load(f"k: {dumped}\nother: 1\n") == {"k": value, "other": 1}


@pytest.mark.parametrize("value", [
    "plain", "EXP-001", "2026-03-09", "yes", "no", "null", "~", "123", "0x1F", "1:30",
    "a: b", "a #b", "#x", " padded ", "", "it's", 'say "hi"', "back\\slash", "line\nbreak",
    "2026-04-16T03:12:21.074Z", "café", ["a", "b c", "yes", "1", "x,y", "[z]"], [], 7, True,
    None,
])
def test_yaml_scalar_round_trips_through_the_parser(value: Any) -> None:
    text = f"---\nk: {escape.yaml_scalar(value)}\n---\n"
    assert frontmatter.parse(text).meta["k"] == value
    assert yaml.safe_load(f"k: {escape.yaml_scalar(value)}")["k"] == value


def test_mcp_add_atom_refuses_nul_and_oversized_bodies(store: Store, project: Project) -> None:
    from cortexfs.mcp_server import add_atom

    folder = project.root / "experiments"
    for body, says in (("text\x00more", "binary"), ("x" * 1_000_001, "byte limit"),
                       ("\ud800", "not UTF-8")):
        with pytest.raises(InvalidInputError, match=says):
            add_atom(store, "exp", "flywheel", "s", ["a"], body=body, commit=False)
        assert not list(folder.glob("EXP-*.md"))
    with pytest.raises(InvalidInputError):
        add_atom(store, "exp", "flywheel", "nul\x00summary", ["a"], commit=False)
    assert not list(folder.glob("EXP-*.md"))
    added = add_atom(store, "exp", "flywheel", "fine", ["a"], body="# Body\n" + HOSTILE,
                     commit=False)
    assert json.dumps(added) and (folder / "EXP-001.md").exists()


def test_script_json_cannot_end_a_script() -> None:
    text = script_json({"s": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"s": "</script><!-- \u2028 & >"}
