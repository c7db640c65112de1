"""cortexfs.view.build: the site `cortex view` builds, its escaping, its incremental rebuilds,
its forked worker."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from view_store import age, site_files

from cortexfs.store import Project, Store
from cortexfs.view import search
from cortexfs.view.build import build, default_dir


def _links(text: str) -> list[tuple[str, str]]:
    """(tag, URL) of every href and src in an HTML text."""
    found: list[tuple[str, str]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend((tag, v or "") for k, v in attrs if k in ("href", "src", "action"))

    Parser().feed(text)
    return found


def test_the_site_has_every_page(store: Store, viewed: Project) -> None:
    result = build(store)
    site = default_dir(store)
    assert result.root == site and result.index == site / "index.html"
    files = site_files(site)
    for rel in ("index.html", "search.html", "p/flywheel/index.html", "p/flywheel/graph.html",
                "p/flywheel/EXP-001.html", "p/flywheel/K-001.html", "p/flywheel/PAT-001.html",
                "data/graph/flywheel.js", "data/search/index.js", "assets/site.js",
                "assets/vendor/force-graph.min.js"):
        assert rel in files, rel
    assert result.atoms == 5 and result.projects == 1 and result.written == result.files
    assert result.bytes == sum((site / rel).stat().st_size for rel in
                               [p.relative_to(site).as_posix() for p in site.rglob("*")
                                if p.is_file() and ".cortex-view" not in p.parts])
    store_page = files["index.html"]
    assert 'href="p/flywheel/index.html"' in store_page and "Phase 1" in store_page
    project = files["p/flywheel/index.html"]
    # tasks board: columns, dependencies (a known one links, an unknown one is marked)
    assert 'id="task-T-2"' in project and 'href="#task-T-1"' in project
    assert '<span class="missing">T-9</span>' in project
    assert 'Why: <a class="atom-ref" href="EXP-001.html">EXP-001</a> showed' in project
    assert "Write the &lt;loader&gt;" in project
    # atom tables with what the filters need; the timeline and the heat view
    assert 'data-status="invalidated"' in project and 'data-tags="registry\nbaseline"' in project
    assert 'href="EXP-002.html"><circle class="st-invalidated"' in project
    assert 'class="heat"' in project and 'title="EXP-001 · 2026-03-12: 3"' in project
    # STATUS.md rendered, its comment hidden, its raw HTML shown as text
    assert "Baseline measured (" in project and "&lt;b&gt;bold&lt;/b&gt;" in project
    assert "The first file a new session reads" not in project
    atom = files["p/flywheel/EXP-001.html"]
    assert '<a href="K-001.html" class="atom-ref">K-001</a>' in atom  # an id in the body
    assert "<table>" in atom  # markdown tables
    # backlinks: K-001 cites it as evidence, PAT-001 as a source experiment
    assert "cited as evidence by" in atom and "a source experiment of" in atom
    assert "6 reads logged on 3 days" in atom
    k = files["p/flywheel/K-001.html"]
    # its evidence chain: EXP-001, and EXP-002 which is invalidated
    assert 'evidence</span> <a class="atom-ref" href="EXP-002.html">EXP-002</a>' in k
    pattern = files["p/flywheel/PAT-001.html"]
    assert "Superseded by" in pattern or "superseded" in pattern
    graph = json.loads(re.search(r"cortexData\(\"graph/flywheel\",(.*)\);", files[
        "data/graph/flywheel.js"]).group(1))
    assert [n[1] for n in graph["nodes"]] == ["EXP-001", "EXP-002", "EXP-003", "K-001",
                                               "PAT-001"]
    assert [0, 1, 2] in graph["edges"]  # EXP-001 links EXP-002
    assert [3, 0, 0] in graph["edges"]  # K-001 rests on EXP-001


def test_every_internal_link_resolves(store: Store, viewed: Project) -> None:
    site = build(store).root
    for rel, text in site_files(site).items():
        if not rel.endswith(".html"):
            continue
        for tag, url in _links(text):
            if re.match(r"^[a-z]+:", url):
                assert url.startswith(("http://", "https://", "mailto:")), (rel, url)
                continue
            path, _, fragment = url.partition("#")
            target = (site / rel).parent / path.split("?")[0] if path else site / rel
            assert target.is_file(), f"{rel}: <{tag}> {url} leads nowhere"
            if fragment and "=" not in fragment:  # (#tag=x is a filter, not an anchor)
                assert f'id="{fragment}"' in target.read_text(), f"{rel}: no #{fragment}"


def test_store_values_are_escaped_everywhere(store: Store, viewed: Project) -> None:
    files = site_files(build(store).root)
    atom = files["p/flywheel/EXP-003.html"]
    for text in (atom, files["p/flywheel/index.html"]):
        assert "&lt;script&gt;alert(&#34;s&#34;)&lt;/script&gt;" in text
        assert "{{ 7*7 }}" in text and ">49<" not in text  # template syntax is text
        assert "&lt;b&gt;tag&lt;/b&gt;" in text
    assert "&lt;img src=x onerror=" in atom and "&lt;script&gt;window.__pwned" in atom
    assert "[click me](javascript:" in atom  # the link is not made
    assert 'href="http://tracker.invalid/pixel.png"' in atom  # an image is a link, not a load
    assert "<img" not in atom
    assert '<span class="missing">EXP-999' not in atom  # a missing id is plain text
    for rel, text in files.items():
        if rel.endswith(".html"):
            assert "<script>" not in text, rel  # the only scripts are files of the site
            for _, url in _links(text):
                assert not url.lower().lstrip().startswith(("javascript:", "data:")), (rel, url)
        elif rel.startswith("data/"):
            assert "<" not in text and ">" not in text, rel  # JSON with < and > escaped
    assert "\\u003c/script\\u003e" in files["data/graph/flywheel.js"]
    # every page carries the policy that only the site's own scripts run
    assert "script-src &#39;self&#39;" in files["p/flywheel/EXP-003.html"]


def test_rebuilds_rewrite_only_what_changed(store: Store, viewed: Project,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first = build(store)
    assert build(store).written == 0  # nothing changed: nothing written
    # an edit of K-001's summary: its page, the pages that show it (EXP-001 and EXP-002
    # list it as a backlink, PAT-001 in its chain), the project page, graph and search data
    k = viewed.root / "knowledge" / "K-001.md"
    k.write_text(k.read_text().replace("need a schema check", "need a schema check first"))
    age(viewed.root)
    again = build(store)
    written = set(again.changed)
    assert {"p/flywheel/K-001.html", "p/flywheel/EXP-001.html", "p/flywheel/EXP-002.html",
            "p/flywheel/PAT-001.html", "p/flywheel/index.html", "data/graph/flywheel.js",
            "index.html"} <= written
    assert "p/flywheel/EXP-003.html" not in written and "assets/site.js" not in written
    assert again.files == first.files + 1  # the search bucket of the new word, "fi"
    assert "data/search/s0/fi.js" in written
    # a read of one atom: its page, the project page (heat) and the store page (reads)
    with open(viewed.access_log, "a", encoding="utf-8") as f:
        f.write('{"file": "EXP-003.md", "tool": "Read", "ts": "2026-03-13T10:00:00.000Z", '
                '"session": "t"}\n')
    age(viewed.root)
    written = set(build(store).changed)
    assert "p/flywheel/EXP-003.html" in written and "p/flywheel/EXP-001.html" not in written
    # a deleted atom: its page goes, and the pages that linked to it change
    (viewed.root / "patterns" / "PAT-001.md").unlink()
    age(viewed.root)
    result = build(store)
    # (with it the search buckets of the words only it had)
    assert result.removed >= 1 and not (result.root / "p/flywheel/PAT-001.html").exists()
    assert "p/flywheel/K-001.html" in result.changed  # PAT-001 no longer cites it
    # a page damaged by hand is written again
    page = result.root / "p/flywheel/EXP-003.html"
    page.write_text("damaged")
    assert "p/flywheel/EXP-003.html" in build(store).changed
    assert "damaged" not in page.read_text()
    # after all that, the site is what a first build makes (pages that shrank included)
    fresh = build(store, out=result.root.parent / "fresh")
    assert site_files(result.root) == site_files(fresh.root)




def test_symlinked_atoms_are_not_shown(store: Store, viewed: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("---\nid: K-002\ndate: 2026-03-01\nproject: flywheel\nsummary: "
                       "\"SECRET FROM OUTSIDE\"\ntags: [x]\nevidence: [EXP-001]\n---\nsecret\n")
    (viewed.root / "knowledge" / "K-002.md").symlink_to(outside)
    result = build(store)
    assert not (result.root / "p/flywheel/K-002.html").exists()
    assert not any("SECRET" in text for text in site_files(result.root).values())
    assert result.warnings == ["flywheel: 1 symlinked atom file(s) skipped (not part of the "
                               "store)"]


def test_out_folder_is_checked(store: Store, viewed: Project, tmp_path: Path, cli) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    result = cli("view", "--out", str(busy))
    assert result.exit_code == 1
    assert "is not empty and is not a site `cortex view` built" in result.stderr
    assert (busy / "notes.txt").read_text() == "mine"
    result = cli("view", "--out", str(store.context / "site"))
    assert result.exit_code == 1 and "inside the store" in result.stderr
    assert not (store.context / "site").exists()
    out = tmp_path / "elsewhere" / "site"
    assert cli("view", "--out", str(out)).exit_code == 0
    assert (out / "index.html").is_file()
    assert cli("view", "--out", str(out)).exit_code == 0  # its own site: rebuilt in place
    assert cli("view", "nosuch").exit_code == 1
    assert cli("view", "--port", "70000", "--serve").exit_code == 1
    result = cli("view", "--port", "8000")
    assert result.exit_code == 1 and "--port goes with --serve" in result.stderr


def test_a_forked_worker_builds_the_same_site(store: Store, viewed: Project, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs.view import build as build_module

    monkeypatch.setattr(search, "SEGMENT", 2)  # segments done by either process or both
    serial = build(store, out=tmp_path / "serial")
    monkeypatch.setattr(build_module, "PARALLEL_MIN", 2)  # fork for these few atoms too
    monkeypatch.setattr(build_module, "CHUNK", 1)
    parallel = build(store, out=tmp_path / "parallel")
    assert site_files(serial.root) == site_files(parallel.root)
    assert parallel.written == serial.written
    assert build(store, out=tmp_path / "parallel").written == 0  # its manifest is whole


def test_shares_give_every_job_to_one_process() -> None:
    from cortexfs.view.build import Shares

    for count in (1, 8, 9, 100):
        shares = Shares(count)
        front, back = shares.front(), shares.back()
        taken: list[int] = []
        for turn in range(1000):  # the two ends claim in turn, at their own speeds
            if (got := next(front if turn % 3 else back, None)) is not None:
                taken.append(got)
        shares.close()
        assert sorted(taken) == list(range(count))
        assert shares.front_end <= shares.back_start
        assert {*range(shares.front_end), *range(shares.back_start, count)} == set(taken)


def test_an_empty_store_has_a_site(store: Store, cli) -> None:
    result = cli("view")
    assert result.exit_code == 0, result.output
    page = (default_dir(store) / "index.html").read_text()
    assert "No projects yet" in page
    assert "0 atoms in 0 projects:" in result.stdout


def test_damaged_state_only_costs_a_rebuild(store: Store, viewed: Project) -> None:
    first = build(store)
    before = site_files(first.root)
    for path in [*(first.root / ".cortex-view").iterdir(),
                 *(store.cache_dir / "view").rglob("*.bin")]:
        if path.is_file():
            path.write_bytes(b"not a cache")
    (first.root / "p/flywheel/EXP-001.html").write_text("torn")  # a build killed mid-write
    again = build(store)
    assert site_files(again.root) == before
    assert build(store).written == 0


def test_out_may_not_be_a_file(store: Store, viewed: Project, tmp_path: Path, cli) -> None:
    (tmp_path / "file").write_text("x")
    result = cli("view", "--out", str(tmp_path / "file"))
    assert result.exit_code == 1 and "is a file: choose a folder" in result.stderr


def test_a_watcher_does_not_count_the_reads_of_a_build(store: Store, viewed: Project,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from watchdog.events import FileClosedNoWriteEvent

    from cortexfs import watch
    from cortexfs.autocommit import is_locked
    from cortexfs.layout import VIEW_LOCK
    from cortexfs.view import pages

    watcher = watch.Watcher(store, debounce=0.0, regenerate=lambda s, p: None)
    monkeypatch.setattr(watch, "HOLD", 0.0)
    monkeypatch.setattr(watch, "OWN_GRACE", 0.0)  # (no grace period after the build)
    log = viewed.access_log.read_text()
    render = pages.render_atom
    locked: list[bool] = []

    def render_atom(*args: object, **kwargs: object) -> str:
        # what inotify would report of the body the build just read
        locked.append(is_locked(store.locks_dir / VIEW_LOCK))
        watcher.on_event(FileClosedNoWriteEvent(str(viewed.root / "experiments" / "EXP-001.md")))
        return render(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pages, "render_atom", render_atom)
    build(store)
    watcher.tick()
    assert locked and all(locked)
    assert viewed.access_log.read_text() == log
