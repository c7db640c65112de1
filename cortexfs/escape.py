"""Every value cortex writes into a YAML, markdown or HTML file is escaped here: one
function per target, and no other escaping anywhere.

The values come from atoms, command-line options, MCP arguments and synced files, so they
are data from strangers: a summary must not break an index table, start a heading, hide an
`<!-- hx: … -->` comment, load a remote image (`![](http://…)`), carry a live
`[link](javascript:…)` or `<script>`, and a `--executor` must not add YAML keys.

- `yaml_scalar`: a value after `key: ` that loads back to exactly itself (lists inline).
- `cell`: the text of one markdown table cell (index.md, OVERVIEW.md).
- `line`: one line of markdown text: a list item, a heading's text, a HIPPOCAMPUS.md
  summary; optionally clipped.
- `comment`: a word inside an HTML comment (HIPPOCAMPUS.md's `<!-- hx: … -->` fields).
- `link`: a relative path as a markdown link target.
- `html`: text for an HTML page (element content or a quoted attribute) — markupsafe's
  escaping, the same the view's templates autoescape with, so a value reads the same
  whether a template or a chart wrote it.
- `script_json` / `data_script`: a value inside a script the view's pages load.
- `url_part`: one path segment of a relative URL; `external_href`: a web or mail link a
  page may point at, or None.

Markdown markup that is only text after escaping stays readable: `\\[x\\](javascript:…)`
shows as typed, it just is not a link. (The access log's JSON lines are the one other
target: `accesslog.format_line` writes them and `accesslog.renamed` rewrites them, there
because the hook cannot afford this module's imports.)
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from markupsafe import Markup

# What makes a cell or a line need more than stripping: line breaks, the cell separator,
# code spans, HTML, entities, backslashes, link and image brackets.
SPECIAL = r"[|`<>&\\\[\]\r\n\t\x0b\x0c\x1c-\x1e\x85\u2028\u2029]"
_SPECIAL = re.compile(SPECIAL)
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_INLINE = str.maketrans({"<": "&lt;", ">": "&gt;", "|": "\\|", "`": "\\`", "[": "\\[",
                         "]": "\\]"})
# what makes a line something else than a paragraph when it starts it
_BLOCK_START = re.compile(r"(?:[#>=|+*-]|\d+[.)])")
_UNSAFE_WORD = re.compile(r"[^\w.+#/-]+")


def _flat(value: object) -> str:
    return " ".join(("" if value is None else str(value)).split())


def _inline(text: str) -> str:
    """`text` (on one line) with every inline markup character made literal."""
    if "&" in text:
        text = _ENTITY.sub("&amp;", text)
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    return text.translate(_INLINE)


def cell(value: object) -> str:
    """`value` as the text of one markdown table cell: on one line, with `|`, backticks,
    HTML, entities and link brackets made literal."""
    text = "" if value is None else str(value)
    if _SPECIAL.search(text):
        return _inline(_flat(text))
    return text.strip()


def line(value: object, limit: int | None = None) -> str:
    """`value` as one line of markdown text (a list item's or a heading's text): what
    `cell` escapes, and a start that would make it a heading, quote, list or rule escaped.
    With `limit`, longer text is cut to that many characters (before escaping) with `…`."""
    text = _flat(value)
    if limit is not None and len(text) > limit:
        text = text[:limit - 1].rstrip() + "…"
    if _SPECIAL.search(text):
        text = _inline(text)
    if _BLOCK_START.match(text):
        text = "\\" + text
    return text


def comment(value: object) -> str:
    """A word for a field of an HTML comment: nothing but letters, digits and `.+#/-`
    (so never `-->`, `|` or a space); runs of anything else become `_`."""
    return _UNSAFE_WORD.sub("_", _flat(value)).strip("_")


def link(path: str) -> str:
    """A relative path as a markdown link target: percent-encoded but for `/._-~`."""
    return quote(path, safe="/._-~")


def html(value: object) -> Markup:
    """`value` as HTML text: `&`, `<`, `>`, `"` and `'` as entities."""
    from markupsafe import escape as markup_escape

    return markup_escape("" if value is None else str(value))


# --- the view's pages: scripts and URLs -------------------------------------------------------

_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                  "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")
_SAFE_SCHEMES = ("http://", "https://", "mailto:")


def script_json(value: Any) -> str:
    """`value` as JSON that is also safe inside a script: `</script>`, `<!--`, `&` and the
    line separators JavaScript once treated as newlines cannot appear literally."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def data_script(name: str, value: Any) -> str:
    """A data file the view's pages load with a script tag (which, unlike fetch, also works
    from file://): it hands `value` to `cortexData(name, …)` in assets/site.js."""
    return f"cortexData({script_json(name)},{script_json(value)});\n"


def url_part(value: str) -> str:
    """One path segment of a relative URL (a project name, an atom file stem)."""
    return quote(value, safe="")


def external_href(url: str) -> str | None:
    """`url` when it is a web or mail link a page may point at, else None."""
    text = url.strip()
    return text if text.lower().startswith(_SAFE_SCHEMES) else None


# --- YAML ------------------------------------------------------------------------------------

_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ ./:+-]*")
_FLOW_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]*")


def yaml_scalar(value: Any) -> str:
    """`value` as inline YAML (after `key: `) that loads back to exactly `value`: plain when
    that is certain, else a JSON string (which YAML reads as a double-quoted one), lists
    in flow style. Never a line break, so never a second key."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_flow_item(v) for v in value) + "]"
    text = str(value)
    from cortexfs.frontmatter import reads_as_itself

    if _PLAIN_SAFE.fullmatch(text) and reads_as_itself(text):
        return text
    return _quoted(text)


# What JSON leaves raw but YAML does not read back as itself inside double quotes: line and
# paragraph separators and NEL (YAML folds them), DEL, C1 controls, the BOM, surrogates.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _quoted(text: str) -> str:
    """A double-quoted YAML string (JSON's escapes are YAML's) holding exactly `text`."""
    dumped = json.dumps(text, ensure_ascii=False)
    if _YAML_UNSAFE.search(dumped):
        dumped = _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
    return dumped


def _flow_item(value: Any) -> str:
    from cortexfs.frontmatter import reads_as_itself

    if isinstance(value, str) and _FLOW_SAFE.fullmatch(value) \
            and reads_as_itself(value, in_list=True):
        return value
    if isinstance(value, str):
        return _quoted(value)
    return yaml_scalar(value)
