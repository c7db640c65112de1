"""`cortex view` in a real browser: headless Chromium over the DevTools protocol.

Every page of a generated site loads from file:// with no console error, no uncaught
exception and no failed load (a Content-Security-Policy violation is one), every link
inside the site leads to a file that exists, the graph draws its nodes, search finds an
atom by a word of its body, and the hostile atom's markup never runs. Skipped where no
Chromium is installed (`apt-get install chromium`; .ci/run installs it).

Set CORTEX_VIEW_SCREENSHOTS=DIR to also save screenshots of the store, a project, an
atom, the graph and search there.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from chromium import Browser, find
from view_store import BODY_WORD, populate

from cortexfs.store import Project, Store
from cortexfs.view.build import build

CHROMIUM = find()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed: "
                                "`apt-get install chromium` to run the browser tests")

# the graph canvas holds something besides its background
DRAWN = """(() => {
  const c = document.querySelector('#graph canvas');
  if (!c || !c.width) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] < 200 || d[i + 2] < 200)) n++;
  return n;
})()"""


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM is not None
    b = Browser(CHROMIUM)
    yield b
    b.close()


def test_the_site_works_in_chromium(store: Store, project: Project, browser: Browser) -> None:
    populate(project)
    site = build(store).root
    shots = os.environ.get("CORTEX_VIEW_SCREENSHOTS")
    pages = sorted(p for p in site.rglob("*.html") if ".cortex-view" not in p.parts)
    assert len(pages) == 9  # store, search, project, graph, 5 atoms
    for page in pages:
        browser.errors.clear()
        browser.open(page.as_uri())
        assert browser.eval("document.title").endswith("cortex view")
        links = browser.eval("Array.from(document.querySelectorAll('a[href]'), "  # SVG's too
                             "a => new URL(a.getAttribute('href'), document.baseURI).href)")
        for link in links:
            url = urlsplit(link)
            if url.scheme == "file":
                assert Path(unquote(url.path)).is_file(), f"{page}: {link} leads nowhere"
            else:
                assert url.scheme in ("http", "https"), f"{page}: {link}"
        if page.name == "graph.html":
            assert int(browser.wait_for("document.body.dataset.graphDrawn")) == 5
            assert browser.wait_for(DRAWN) > 50  # nodes and edges are on the canvas
            assert browser.eval("document.getElementById('graph-count').textContent") == \
                "5 of 5 atoms, 7 edges"
        # the hostile atom: its markup is text, nothing of it ran
        assert browser.eval("window.__pwned === undefined")
        scripts = browser.eval("Array.from(document.scripts, s => s.src)")
        assert all(s.startswith(site.as_uri()) for s in scripts), scripts
        assert browser.errors == [], f"{page}: {browser.errors}"
        if shots and page.name in ("index.html", "EXP-001.html", "graph.html"):
            name = {"index.html": page.parent.name if page.parent != site else "store"}.get(
                page.name, page.stem)
            browser.screenshot(Path(shots) / f"{name}.png")

    browser.open((site / "search.html").as_uri() + f"?q={BODY_WORD[:6]}")
    assert browser.wait_for("document.body.dataset.searchDone") == BODY_WORD[:6]
    hits = browser.eval("Array.from(document.querySelectorAll('#results a'), a => a.textContent)")
    assert hits == ["EXP-001"]  # by a prefix of a word of its body
    browser.eval("(() => { const q = document.getElementById('q'); q.value = 'registry "
                 "schema'; q.dispatchEvent(new Event('input')); })()")
    browser.wait_for("document.body.dataset.searchDone === 'registry schema'")
    hits = browser.eval("Array.from(document.querySelectorAll('#results a'), a => a.textContent)")
    assert hits[0] == "K-001" and set(hits) == {"K-001", "PAT-001"}
    browser.open((site / "search.html").as_uri() + "?q=exp-003")
    browser.wait_for("document.body.dataset.searchDone")
    assert browser.eval("document.querySelector('#results a').textContent") == "EXP-003"
    assert browser.eval("document.querySelector('#results .summary').textContent").startswith(
        "Evil </script><script>")  # shown as text
    assert browser.errors == []
    if shots:
        browser.screenshot(Path(shots) / "search.png")


def test_project_tables_sort_and_filter(store: Store, project: Project,
                                        browser: Browser) -> None:
    populate(project)
    site = build(store).root
    browser.open((site / "p" / "flywheel" / "index.html").as_uri() + "#tag=baseline")
    visible = "Array.from(document.querySelectorAll('#table-experiments tbody tr'))" \
              ".filter(r => !r.hidden).map(r => r.cells[0].textContent)"
    assert browser.wait_for(f"{visible}.length === 1 && {visible}")
    assert browser.eval(visible) == ["EXP-001"]
    browser.eval("location.hash = '#status=invalidated'")
    browser.wait_for(f"{visible}.length === 1 && {visible}[0] === 'EXP-002'")
    browser.eval("document.querySelector('#table-experiments th').click()")  # sort by id
    browser.eval("document.querySelector('#table-experiments th').click()")  # descending
    rows = "Array.from(document.querySelectorAll('#table-experiments tbody tr'), " \
           "r => r.cells[0].textContent)"
    assert browser.eval(rows) == ["EXP-003", "EXP-002", "EXP-001"]
    assert browser.errors == []
