"""cortexfs.view.pages: the pages of the site — an atom's page with what cites it and what
it cites, every value of the store escaped, pages keyed by everything they are made of."""

from __future__ import annotations

from view_store import HOSTILE_SUMMARY

from cortexfs.regen import context
from cortexfs.store import Project, Store
from cortexfs.view import pages
from cortexfs.view.markdown import renderer
from cortexfs.view.model import ProjectModel, load_project


def model(store: Store, project: Project) -> ProjectModel:
    return load_project(context(store), project)


def test_an_atom_page_shows_its_atom_and_its_relations(store: Store, viewed: Project) -> None:
    pm = model(store, viewed)
    am = pm.resolve("EXP-001")
    assert am is not None
    body = "# EXP-001: title\n\nSee K-001 and EXP-999.\n"
    named = pages.mentions(body)
    assert named == ["EXP-001", "EXP-999", "K-001"]
    data = pages.atom_data(pm, am)
    assert (data["id"], data["project"], data["file"]) == ("EXP-001", viewed.name,
                                                           "experiments/EXP-001.md")
    page = pages.render_atom(renderer(), pm, data, body)
    assert page.startswith("<!doctype html>") and "Content-Security-Policy" in page
    assert 'class="atom-ref">K-001</a>' in page and "EXP-999.html" not in page
    assert ": title</h1>" not in page  # the body's heading: the page's own title says it


def test_the_store_s_values_are_escaped_on_every_page(store: Store, viewed: Project) -> None:
    pm = model(store, viewed)
    out = [pages.render_project(renderer(), pm, pages.project_data(pm)), pages.render_graph(pm),
           pages.render_search()]
    for am in pm.atoms:
        out.append(pages.render_atom(renderer(), pm, pages.atom_data(pm, am), None))
    text = "".join(out)
    assert HOSTILE_SUMMARY not in text and "<script>alert" not in text
    assert "Evil &lt;/script&gt;&lt;script&gt;alert" in text


def test_a_page_s_key_changes_with_what_it_is_made_of(store: Store, viewed: Project) -> None:
    assert pages.digest("a", 1) == pages.digest("a", 1) != pages.digest("a", 2)
    pm = model(store, viewed)
    am = pm.resolve("EXP-001")
    assert am is not None
    ident = pages.identity()
    key = pages.atom_key(ident, pm, am, [])
    assert key == pages.atom_key(ident, pm, am, []) != pages.atom_key(ident, pm, am, ["K-001"])
