"""cortexfs.view.markdown: atom bodies as HTML that runs nothing and calls nowhere, with atom
ids and links to atom files turned into links to their pages."""

from __future__ import annotations

from cortexfs.view.markdown import render, renderer

PAGES = {"EXP-001": "EXP-001.html", "K-002": "../k/K-002.html"}


def html(text: str) -> str:
    return render(renderer(), text, PAGES.get)


def test_commonmark_with_tables_and_strikethrough() -> None:
    out = html("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~gone~~ *yes*\n")
    assert "<h1>Title</h1>" in out and "<table>" in out and "<td>1</td>" in out
    assert "<s>gone</s>" in out and "<em>yes</em>" in out


def test_raw_html_and_comments_are_not_passed_through() -> None:
    out = html("<script>alert(1)</script>\n\ntext <b>bold</b> <!-- hidden note -->\n")
    assert "<script>" not in out and "&lt;script&gt;" in out and "<b>" not in out
    assert "hidden note" not in out


def test_dangerous_links_are_not_made_and_web_links_do_not_leak() -> None:
    out = html("[a](javascript:alert(1)) [b](data:text/html,x) [c](file:///etc/passwd) "
               "[d](https://example.com/x)\n")
    assert out.count("<a ") == 1  # the others are shown as text, not made into links
    assert '<a href="https://example.com/x" rel="noopener noreferrer nofollow">d</a>' in out


def test_images_become_links_and_are_never_loaded() -> None:
    out = html("![a chart](https://tracker.invalid/p.png) ![local](plot.png)\n")
    assert "<img" not in out
    assert ('<a class="image-ref" href="https://tracker.invalid/p.png" rel="noopener '
            'noreferrer nofollow">[image: a chart]</a>') in out
    assert '<span class="image-ref">[image: local]</span>' in out


def test_atom_ids_and_atom_files_link_to_their_pages() -> None:
    out = html("See EXP-001, K-002 and EXP-999. [the finding](../knowledge/K-002.md#why) "
               "[a file](notes/plan.md) [anchor](#top)\n")
    assert '<a href="EXP-001.html" class="atom-ref">EXP-001</a>' in out
    assert '<a href="../k/K-002.html" class="atom-ref">K-002</a>' in out
    assert "EXP-999" in out and 'EXP-999.html' not in out  # no page: plain text
    assert '<a href="../k/K-002.html">the finding</a>' in out
    assert "a file" in out and "notes/plan.md" not in out  # leads nowhere in the site
    assert '<a href="#top">anchor</a>' in out


def test_without_a_resolver_ids_stay_text() -> None:
    out = render(renderer(), "EXP-001 and [it](EXP-001.md)\n")
    assert "<a" not in out and "EXP-001 and it" in out
