"""Atom bodies and governance files as HTML: CommonMark (markdown-it-py) with tables.

Raw HTML in the markdown is not passed through but shown as text (`html: False`), links
with a `javascript:`, `vbscript:`, `file:` or `data:` URL are not made (markdown-it's own
link check), images are not loaded (the site must work offline and must not call out: an
image becomes a link to it), and links to other atom files or bare atom ids (`EXP-042`,
`K-7`) become links to those atoms' pages.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from cortexfs.atoms import ATOM_ID
from cortexfs.escape import external_href, html
from cortexfs.frontmatter import HTML_COMMENT
from cortexfs.layout import ATOM_EXT, atom_folder

# an atom id (as written) → the relative URL of its page, or None when it has none
Resolver = Callable[[str], "str | None"]


def renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # with `html` off these two rules never match, yet every line and every inline
    # position would try them: rendering is 10-15 % faster without them
    md.disable(["html_block", "html_inline"])
    md.core.ruler.push("cortex_links", _rewrite_links)
    md.add_render_rule("image", _render_image)
    return md


def render(md: MarkdownIt, text: str, resolve: Resolver | None = None) -> str:
    """`text` as HTML; atom ids that `resolve` knows become links. HTML comments (the
    scaffolded files' instructions) are left out, as a markdown viewer would hide them."""
    if "<!--" in text:
        text = HTML_COMMENT.sub("", text)
    return md.render(text, {"resolve": resolve})


def _rewrite_links(state: Any) -> None:
    resolve: Resolver | None = state.env.get("resolve")
    for block in state.tokens:
        if block.type == "inline" and block.children:
            block.children = _inline(block.children, resolve)


def _inline(children: Sequence[Token], resolve: Resolver | None) -> list[Token]:
    out: list[Token] = []
    depth = 0
    dropped: list[int] = []  # link nesting levels whose opening was dropped
    for tok in children:
        if tok.type == "link_open":
            depth += 1
            href = _link_target(str(tok.attrGet("href") or ""), resolve)
            if href is None:
                dropped.append(depth)
                continue
            tok.attrSet("href", href)
            if external_href(href):
                tok.attrSet("rel", "noopener noreferrer nofollow")
        elif tok.type == "link_close":
            depth -= 1
            if dropped and dropped[-1] == depth + 1:
                dropped.pop()
                continue
        if tok.type == "text" and depth == 0 and resolve is not None \
                and ATOM_ID.search(tok.content):
            out.extend(_link_ids(tok.content, resolve))
            continue
        out.append(tok)
    return out


def _link_target(href: str, resolve: Resolver | None) -> str | None:
    """Where a markdown link may point in the site: the web, an anchor, or another atom's
    page (a link to `../knowledge/K-001.md`); None (the link is shown as text) otherwise,
    since a relative path into the store leads nowhere in the site."""
    if external_href(href) or href.startswith("#"):
        return href
    name = posixpath.basename(href.split("#", 1)[0].split("?", 1)[0])
    if resolve is not None and atom_folder(name):
        return resolve(name[:-len(ATOM_EXT)])
    return None


def id_parts(text: str, resolve: Resolver) -> Iterator[tuple[str, str | None]]:
    """`text` in parts: each atom id that `resolve` knows as (the id, its href), the text
    around them as (text, None)."""
    pos = 0
    for m in ATOM_ID.finditer(text):
        href = resolve(m.group())
        if href is None:
            continue
        if m.start() > pos:
            yield text[pos:m.start()], None
        yield m.group(), href
        pos = m.end()
    if pos < len(text):
        yield text[pos:], None


def _link_ids(text: str, resolve: Resolver) -> list[Token]:
    out: list[Token] = []
    for part, href in id_parts(text, resolve):
        if href is None:
            out.append(_text(part))
            continue
        link = Token("link_open", "a", 1)
        link.attrs = {"href": href, "class": "atom-ref"}
        out += [link, _text(part), Token("link_close", "a", -1)]
    return out


def _text(content: str) -> Token:
    tok = Token("text", "", 0)
    tok.content = content
    return tok


def _render_image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tok = tokens[idx]
    alt = self.renderInlineAsText(tok.children or [], options, env) or "image"
    href = external_href(str(tok.attrGet("src") or ""))
    label = html(f"[image: {alt}]")
    if href is None:
        return f'<span class="image-ref">{label}</span>'
    return (f'<a class="image-ref" href="{html(href)}" rel="noopener noreferrer nofollow">'
            f'{label}</a>')
