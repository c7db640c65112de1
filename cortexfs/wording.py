"""How cortex words counts: "1 error", "2 errors", "1 entry", "3 entries" — one helper.

Every message that prints a count of something goes through `plural`, so no command says
"1 errors" or "2 file(s)". Standard library only.
"""

from __future__ import annotations

# nouns whose plural is not noun + "s"
_IRREGULAR = {
    "entry": "entries", "knowledge": "knowledge", "summary": "summaries",
    "directory": "directories", "dependency": "dependencies", "index": "indexes",
}


def plural(n: int, noun: str, many: str | None = None, *, sep: bool = False) -> str:
    """`1 error`, `2 errors`, `0 errors`; `many` names an irregular plural. With `sep`,
    thousands are separated (`1,200 atoms`)."""
    number = f"{n:,}" if sep else str(n)
    return f"{number} {noun if n == 1 else plural_of(noun, many)}"


def some(items: list[str], limit: int) -> str:
    """The first `limit` items, comma-separated, and how many more: `a, b, c and 4 more`."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def plural_of(noun: str, many: str | None = None) -> str:
    """The plural of `noun` (`many` when given)."""
    if many is not None:
        return many
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"
