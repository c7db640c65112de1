"""cortexfs.view.search: the site's search index."""

from __future__ import annotations

from view_store import BODY_WORD, site_data

from cortexfs.store import Project, Store
from cortexfs.view import search
from cortexfs.view.build import build


def test_search_index_finds_terms_in_every_field(store: Store, viewed: Project) -> None:
    site = build(store).root
    meta = site_data(site / "data/search/index.js")
    assert meta["docs"] == 5 and meta["stopwords"] == sorted(search.STOPWORDS)
    bucket = search.bucket(BODY_WORD)
    table = site_data(site / f"data/search/s0/{bucket}.js")
    docs = site_data(site / "data/search/docs-0.js")
    postings = table[BODY_WORD]
    assert [docs[postings[0]][2], postings[1]] == ["EXP-001", search.BODY]
    exp001 = docs.index(next(d for d in docs if d[2] == "EXP-001"))
    registry = site_data(site / "data/search/s0/re.js")["registry"]
    fields = dict(zip(registry[::2], registry[1::2], strict=True))
    assert fields[exp001] == search.TAGS | search.SUMMARY  # not in its body
    assert site_data(site / f"data/search/s0/{search.bucket('exp-001')}.js")["exp-001"] == \
        [exp001, search.ID]
    assert search.bucket("k-012") == "k_2d" and search.bucket("été") == "_e9t"


