"""Every value from the store that `cortex view` writes goes through one of these.

The store is a trust boundary: a summary, tag, body, file or project name may hold
`<script>`, `javascript:` URLs, quotes or `{{ }}`. In HTML it is escaped (markupsafe, which
the page templates' autoescape also uses); in the data files that pages load as scripts
it is JSON with every character that could end or reinterpret a script escaped; in a URL
it is percent-encoded. Pages carry a Content-Security-Policy that allows scripts from the
site's own files only, so even a value that escaped escaping could not run.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

__all__ = ["CSP", "Markup", "data_script", "external_href", "html", "script_json", "url_part"]

# No inline script, no remote anything: the site works offline and a planted `<script>` or
# `onerror=` would not run even if it reached the page. (Inline styles stay allowed: the
# vendored graph library injects its stylesheet.)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'self'")

_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                  "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")
_SAFE_SCHEMES = ("http://", "https://", "mailto:")


def html(value: object) -> Markup:
    """`value` as HTML text: `<`, `>`, `&`, `"` and `'` escaped."""
    return escape("" if value is None else str(value))


def script_json(value: Any) -> str:
    """`value` as JSON that is also safe inside a script: `</script>`, `<!--`, `&` and the
    line separators JavaScript once treated as newlines cannot appear literally."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def data_script(name: str, value: Any) -> str:
    """A data file the pages load with a script tag (which, unlike fetch, also works from
    file://): it hands `value` to `cortexData(name, …)` in assets/site.js."""
    return f"cortexData({script_json(name)},{script_json(value)});\n"


def url_part(value: str) -> str:
    """One path segment of a relative URL (a project name, an atom file stem)."""
    return quote(value, safe="")


def external_href(url: str) -> str | None:
    """`url` when it is a web or mail link a page may point at, else None."""
    text = url.strip()
    return text if text.lower().startswith(_SAFE_SCHEMES) else None
