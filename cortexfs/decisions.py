"""Decision records: `NNNN-title.md` files in a `decisions/` folder, their checks and creation.

A record holds a Date and a Status (as `- **Date**: 2026-05-01` lines, `Date:` lines, their
own `## Date` sections, or frontmatter keys) and the sections Context, Alternatives (at least
two: list items, or sub-headings when the options have their own headings), Decision and
Consequences. Section headings match case-insensitively by their first word, so
"## Context and problem statement" or "## Alternatives considered" count.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from cortexfs import escape, frontmatter, layout, templates, wall
from cortexfs.atoms import as_date
from cortexfs.errors import AtomParseError, InvalidInputError
from cortexfs.fsutil import atomic_write, file_lock
from cortexfs.store import Store
from cortexfs.wording import plural

RECORD_NAME = re.compile(r"^(\d{4})-([a-z0-9]+(?:-[a-z0-9]+)*)\.md\Z")
_NUMBERED = re.compile(r"^(?:DR-)?(\d{4})-")
MAX_SLUG = 60
MIN_ALTERNATIVES = 2

FIELDS = ("Date", "Status")
# section → the words a heading may start with
SECTIONS: dict[str, tuple[str, ...]] = {
    "Context": ("context", "background", "problem"),
    "Alternatives": ("alternatives", "options", "considered options", "alternatives considered",
                     "options considered"),
    "Decision": ("decision",),
    "Consequences": ("consequences",),
}
_FIELD = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?(date|status)(?:\*\*|__)?[ \t]*:"
                    r"(?:\*\*|__)?[ \t]*(.*)$", re.I)
_LIST_ITEM = re.compile(r"^ {0,1}(?:[-*+]|\d+[.)])[ \t]+\S")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


@dataclass
class RecordProblem:
    """Something a decision record lacks; `line` is 1-based where known."""

    line: int | None
    message: str


def check_record(text: str) -> list[RecordProblem]:
    """What a decision record's text lacks (empty list when it is complete)."""
    # HTML comments blanked out with spaces: line numbers and offsets stay the same
    blanked = frontmatter.HTML_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    lines = blanked.splitlines()
    problems: list[RecordProblem] = []
    fields: dict[str, tuple[int | None, str]] = {}
    start = 0
    broken = False
    try:
        span = frontmatter.locate(text)
    except AtomParseError:
        span = None  # no frontmatter: the fields are in the text
    if span is not None:
        start = len(blanked[:span.body_start].splitlines())  # (blanking keeps every offset)
        key_lines = frontmatter.key_lines(text)
        try:
            meta = frontmatter.load_mapping(text[span.fm_start:span.fm_end], "", 2)
        except AtomParseError as e:
            problems.append(RecordProblem(e.line, e.reason))
            meta, broken = {}, True
        for key, value in meta.items():
            if key.lower() in ("date", "status") and value is not None:
                fields.setdefault(key.lower(), (key_lines.get(key), str(value).strip()))
    headings: list[tuple[int, int, str]] = []  # (line index, level, normalised title)
    for i in range(start, len(lines)):
        m = frontmatter.HEADING.match(lines[i])
        if m:
            title = re.sub(r"[^a-z0-9 ]+", " ", m.group(2).lower())
            headings.append((i, len(m.group(1)), " ".join(title.split())))
        else:
            f = _FIELD.match(lines[i])
            if f and f.group(2).strip():
                fields.setdefault(f.group(1).lower(), (i + 1, f.group(2).strip()))
    for i, (idx, _level, title) in enumerate(headings):
        if title in ("date", "status"):
            body = _section(lines, headings, i)[0]
            value = next((ln.strip() for ln in body if ln.strip()), "")
            if value:
                fields.setdefault(title, (idx + 1, value))
    for name in FIELDS:
        if name.lower() not in fields and not broken:  # (a broken frontmatter may hold it)
            problems.append(RecordProblem(None, f"no {name}: add a line `- **{name}**: …` "
                                          "under the title"))
    if "date" in fields:
        line, value = fields["date"]
        found = _ISO_DATE.search(value)
        if found is None or as_date(found.group(1)) is None:
            problems.append(RecordProblem(line, f"Date {value!r} is not a date: write "
                                          "YYYY-MM-DD"))
    for name, starts in SECTIONS.items():
        index = _find_section(headings, starts)
        if index is None:
            problems.append(RecordProblem(None, f"no {name} section: add `## {name}`"))
            continue
        line = headings[index][0] + 1
        body, subs = _section(lines, headings, index)
        if name == "Alternatives":  # sub-headings when the options have their own, else items
            count = subs or sum(1 for ln in body if _LIST_ITEM.match(ln))
            if count < MIN_ALTERNATIVES:
                problems.append(RecordProblem(
                    line, f"Alternatives lists {plural(count, 'option')}: "
                    f"record at least {MIN_ALTERNATIVES} (one list item each, including the "
                    "one chosen)"))
        elif not any(ln.strip() for ln in body):
            problems.append(RecordProblem(line, f"the {name} section is empty: write it"))
    return problems


def _find_section(headings: list[tuple[int, int, str]], starts: tuple[str, ...]) -> int | None:
    return next((i for i, (_idx, level, title) in enumerate(headings)
                 if level >= 2 and any(title == s or title.startswith(s + " ") for s in starts)),
                None)


def _section(lines: list[str], headings: list[tuple[int, int, str]],
             i: int) -> tuple[list[str], int]:
    """The lines under heading `i`, up to the next heading of the same or a higher level
    (sub-headings and their text included), and how many sub-headings one level down."""
    idx, level, _ = headings[i]
    end, subs = len(lines), 0
    for nxt_idx, nxt_level, _ in headings[i + 1:]:
        if nxt_level <= level:
            end = nxt_idx
            break
        subs += nxt_level == level + 1
    return lines[idx + 1:end], subs


# --- files -------------------------------------------------------------------------------------


def record_number(name: str) -> int | None:
    """1 for `0001-use-git.md` (and the seed's `DR-0001-…`); None for other names."""
    m = _NUMBERED.match(name)
    return int(m.group(1)) if m else None


def records(folder: Path, root: Path) -> list[Path]:
    """The markdown files of a decisions folder, except its CORTEX.md / index.md (`root`:
    the store's context/; a linked folder or file is not part of it: cortexfs.wall)."""
    if wall.reason(root, folder):
        return []
    try:
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / n for n in names
            if n.endswith(".md") and n not in (layout.CORTEX_MD, layout.INDEX, "README.md")
            and not n.startswith(".")]


def slugify(title: str) -> str:
    """`Use Git, not SQLite!` → `use-git-not-sqlite` (ASCII, at most 60 characters)."""
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > MAX_SLUG:
        cut = slug[:MAX_SLUG + 1]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else slug[:MAX_SLUG]
    return slug.strip("-")


def new_decision(store: Store, title: str, project: str | None = None,
                 today: dt.date | None = None) -> Path:
    """Write the next `NNNN-slug.md` from the decision template; returns its path."""
    title = " ".join(title.split())
    if not title:
        raise InvalidInputError("the decision title is empty: pass it, e.g. "
                                "`cortex decision new \"Store atoms as files\"`")
    slug = slugify(title)
    if not slug:
        raise InvalidInputError(f"the title {title!r} has no letters or digits to name the "
                                "file after: use a title with some")
    store.require()
    folder = (store.context if project is None else store.project(project).root) \
        / layout.DECISIONS
    lock = store.locks_dir / layout.decisions_lock(project)
    with file_lock(lock, what="decision numbers"):
        numbers = [record_number(p.name) or 0 for p in records(folder, store.context)]
        number = max(numbers, default=0) + 1
        if number > 9999:
            raise InvalidInputError(f"{folder} already holds decision 9999: archive old "
                                    "records before adding more")
        path = folder / f"{number:04d}-{slug}.md"
        text = templates.render(store, "project/decision.md.j2", number=f"{number:04d}",
                                title=escape.line(title), project=project or "",
                                date=(today or dt.date.today()).isoformat())
        atomic_write(path, text, root=store.context)
    return path
