"""cortexfs.view.site: the site folder — files written only when their key or stat data
changed, nothing written through a link, nothing left that a build did not produce, and no
folder taken over that is not a site."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cortexfs.errors import InvalidInputError
from cortexfs.view.site import STATE_DIR, Site, open_site


def site_at(tmp_path: Path, name: str = "site") -> Site:
    return open_site(tmp_path / name, tmp_path / "store", tmp_path / "store" / ".cache")


def test_a_file_is_written_again_only_when_its_key_or_its_stat_data_moved(
        tmp_path: Path) -> None:
    first = site_at(tmp_path)
    assert first.put("index.html", "k1", lambda: "<p>one</p>") is True
    assert first.put("p/a/EXP-1.html", "k2", lambda: b"atom") is True
    assert first.finish() == [] and first.size() == len("<p>one</p>") + 4
    again = site_at(tmp_path)
    assert again.put("index.html", "k1", lambda: pytest.fail("rendered again")) is False
    assert again.put("p/a/EXP-1.html", "k9", lambda: b"atom, changed") is True
    assert (tmp_path / "site" / "p" / "a" / "EXP-1.html").read_bytes() == b"atom, changed"
    again.finish()
    (tmp_path / "site" / "index.html").write_text("<p>edited by hand</p>")
    third = site_at(tmp_path)
    assert third.keep("p/a/EXP-1.html") is True and third.keep("index.html") is False
    assert third.put("index.html", "k1", lambda: "<p>one</p>") is True
    assert (tmp_path / "site" / "index.html").read_text() == "<p>one</p>"


def test_what_a_build_did_not_produce_is_removed(tmp_path: Path) -> None:
    first = site_at(tmp_path)
    for rel in ("index.html", "p/a/EXP-1.html", "p/b/EXP-2.html"):
        first.put(rel, "k", lambda: "x")
    first.finish()
    second = site_at(tmp_path)
    second.put("index.html", "k", lambda: "x")
    assert sorted(second.finish()) == ["p/a/EXP-1.html", "p/b/EXP-2.html"]
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == [STATE_DIR, "index.html"]


def test_a_link_where_a_page_goes_is_replaced_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.html"
    outside.write_text("theirs")
    (tmp_path / "elsewhere").mkdir()
    site = site_at(tmp_path)
    (tmp_path / "site" / "index.html").symlink_to(outside)
    (tmp_path / "site" / "p").symlink_to(tmp_path / "elsewhere")
    os.link(outside, tmp_path / "site" / "hard.html")
    for rel in ("index.html", "p/EXP-1.html", "hard.html"):
        site.put(rel, "k", lambda: "ours")
    site.finish()
    assert outside.read_text() == "theirs" and list((tmp_path / "elsewhere").iterdir()) == []
    assert not (tmp_path / "site" / "index.html").is_symlink()
    assert (tmp_path / "site" / "p" / "EXP-1.html").read_text() == "ours"


def test_folders_that_are_not_a_site_are_refused(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "thesis.tex").write_text("mine")
    with pytest.raises(InvalidInputError, match="is not empty and is not a site `cortex view` "
                                                "built"):
        site_at(tmp_path, "full")
    assert (tmp_path / "full" / "thesis.tex").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="is a file: choose a folder"):
        site_at(tmp_path, "file")
    with pytest.raises(InvalidInputError, match="is inside the store, where the site would "
                                                "be committed"):
        site_at(tmp_path, "store/context/site")
    with pytest.raises(InvalidInputError, match="holds the store"):
        open_site(tmp_path, tmp_path / "store", tmp_path / "store" / ".cache")
    assert site_at(tmp_path, "store/.cache/site").root.is_dir()  # the default place
