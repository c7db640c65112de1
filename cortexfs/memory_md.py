"""MEMORY.md in the neocortex.md v1.0 format: parse, lint, stats, header fix and prune.

The format (seeds/000, neocortex.md): a header of HTML comments (`<!-- neocortex.md v1.0 -->`,
`agent:`, `owner:`, `consolidated:`, `entries: N | tokens: ~T`), a `# Memory` title, the
seven standard `##` sections in order of stability (Identity, People, Projects, Knowledge,
Patterns, Lessons, Context; custom ones allowed, at most 10 in all), and in each section
entries: a `- ` bullet line, continuation lines indented 2 spaces, and optionally one
`<!-- nx: u=DATE c=high|med|low a=N s=docs|user|inferred|tested x="old text" -->` comment.
A superseded fact is written `- ~~old~~ → new (date)`.

Token figures use `cortexfs.tokens.estimate` (characters / 4). An entry's size excludes its
nx comment (machine metadata); section and file sizes include everything.

Pruning (`plan_prune` / `apply_prune`) follows the spec's retention algorithm with the
thresholds of its template footer, made explicit:

- never touched: Identity and Lessons entries, user-marked entries (`s=user`, or the
  cortexfs `keep` flag: `<!-- nx: keep … -->`), entries accessed more than 10 times (a > 10),
  and entries before the first section;
- undated (no `u=`): cannot be aged, so they are only counted;
- an entry is below the retention threshold when it was accessed fewer than 3 times
  (a < 3; a missing `a` counts as 0). Such an entry is archived when older than 90 days
  and never accessed (a = 0), a compression candidate (rewrite it to its gist) when older
  than 30 days, and flagged for review otherwise.

Archived entries move to `memory/archive/YYYY.md` next to the MEMORY.md (YYYY = the year
of the entry's `u=` date), grouped under their section, each with an `archived:` comment.
The archive is written first and MEMORY.md second, each atomically, so a crash in between
leaves an entry in both files, never in neither; a rerun does not archive it twice. The
rest of MEMORY.md is left byte-for-byte (header counts included: `lint --fix` refreshes them).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortexfs.errors import InvalidInputError
from cortexfs.frontmatter import HEADING, split_lines, text_problem
from cortexfs.fsutil import atomic_write, flock
from cortexfs.tokens import estimate

FORMAT_VERSION = "1.0"
# Section: (target entries low, target high, max entries, token budget) — spec §9.2.
SECTION_LIMITS: dict[str, tuple[int, int, int, int]] = {
    "Identity": (5, 10, 15, 500),
    "People": (15, 25, 40, 1_500),
    "Projects": (10, 20, 30, 1_200),
    "Knowledge": (30, 50, 60, 2_500),
    "Patterns": (15, 25, 30, 1_200),
    "Lessons": (15, 25, 30, 1_200),
    "Context": (5, 10, 15, 500),
}
STANDARD_SECTIONS: tuple[str, ...] = tuple(SECTION_LIMITS)
_STANDARD_BY_LOWER = {s.lower(): s for s in STANDARD_SECTIONS}
MAX_SECTIONS = 10
MAX_ENTRY_TOKENS = 100
MAX_TOTAL_TOKENS = 15_000  # the footer's "Max tokens"; above it split (spec §11)
SOFT_TOTAL_TOKENS = 10_000  # "prune when the file grows beyond 10K tokens"
MAX_TOTAL_ENTRIES = 300  # the footer's "Max entries"
# Bytes of a MEMORY.md read at all (~16x the token ceiling): a 12 MB one took 11.5 s to lint.
MAX_BYTES = 1_000_000
COUNT_TOLERANCE = 0.10  # a header token count within 10% (or 100 tokens) is true enough

NX_CONFIDENCE = ("high", "med", "low")
NX_SOURCES = ("docs", "user", "inferred", "tested")
NX_KEYS = ("u", "c", "a", "s", "x")
NX_FLAGS = ("keep",)  # cortexfs extension: the user marked this entry; never prune it
NEVER_PRUNED_SECTIONS = ("Identity", "Lessons")
ARCHIVE_AFTER_DAYS = 90
COMPRESS_AFTER_DAYS = 30
WEAK_ACCESS_BELOW = 3
PROTECTED_ACCESS_ABOVE = 10
LISTED_PER_CODE = 50  # problems of one kind listed before "… and N more"

_VERSION_RE = re.compile(r"^<!--\s*neocortex\.md\s+v(\d+)\.(\d+)\s*-->$", re.IGNORECASE)
_COMMENT_RE = re.compile(r"^<!--(.*)-->$")
_HEADER_FIELD_RE = re.compile(r"^([A-Za-z][\w-]*)\s*:\s*(.*)$")
_COUNT_RE = re.compile(r"^~?\s*(\d[\d,]*(?:\.\d+)?)\s*([kK])?$")
_BULLET_RE = re.compile(r"^[-*+](?:[ \t]|$)")
_RULE_RE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,})[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)")
_NX_OPEN = "<!-- nx:"
_NX_RE = re.compile(r"<!--\s*nx:(.*?)(-->|$)", re.DOTALL)
_NX_TOKEN_RE = re.compile(r'\s*([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"?|\S*)|\s*(\S+)')
_SUPERSEDE_RE = re.compile(r"^~~(.+?)~~\s*(→|->)?\s*(.*)$", re.DOTALL)
_ARCHIVED_RE = re.compile(r"^\s*<!--\s*archived:.*-->\s*$")


@dataclass(frozen=True)
class Problem:
    """One lint finding: `severity` is "error" or "warning"; `line` is 1-based."""

    severity: str
    code: str
    message: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "code": self.code, "line": self.line,
                "message": self.message}

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{self.severity}: {where}{self.message} [{self.code}]"


@dataclass
class NxMeta:
    """An entry's `<!-- nx: … -->` metadata; `fields` are the raw key=value strings."""

    line: int  # 1-based
    raw: str
    fields: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def updated(self) -> dt.date | None:
        return _parse_when(self.fields.get("u", ""))

    @property
    def accesses(self) -> int | None:
        raw = self.fields.get("a")
        if raw is None or not raw.isdecimal():
            return None
        return int(raw) if len(raw) <= 18 else 10**18  # (int() refuses 4,300 digits and more)

    @property
    def user_marked(self) -> bool:
        return self.fields.get("s") == "user" or "keep" in self.flags


@dataclass
class Entry:
    """One `- ` entry with its continuation lines; `start`/`end` index `MemoryDoc.lines`."""

    section: str
    start: int
    end: int
    lines: list[str]
    meta: NxMeta | None = None
    superseded: str | None = None  # the struck-through old text of `~~old~~ → new`
    replacement: str | None = None

    @property
    def line(self) -> int:
        return self.start + 1

    @property
    def content(self) -> str:
        """The entry's text without its nx comment, continuation lines joined by newlines."""
        text = "".join(self.lines)
        if self.meta is not None:
            text = _NX_RE.sub("", text)
        return "\n".join(ln.strip() for ln in text.splitlines() if ln.strip())

    @property
    def tokens(self) -> int:
        return estimate(self.content)

    def first_line(self, width: int = 72) -> str:
        text = self.content.split("\n", 1)[0]
        text = text[1:].strip() if text[:1] in "-*+" else text
        return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Section:
    """One `##` section: its heading line index, the index after its last line, entries."""

    name: str
    start: int
    end: int
    entries: list[Entry] = field(default_factory=list)

    @property
    def line(self) -> int:
        return self.start + 1


@dataclass
class Header:
    """The leading HTML comments. `version` is None when the neocortex.md line is missing."""

    version: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    field_lines: dict[str, int] = field(default_factory=dict)  # key → 1-based line
    last_index: int | None = None  # index of the last header comment line
    present: bool = False


@dataclass
class MemoryDoc:
    """A parsed MEMORY.md. `lines` keep their line endings: joined, they are the file."""

    path: Path
    lines: list[str]
    bom: str
    header: Header
    sections: list[Section]
    title_line: int | None
    problems: list[Problem]
    orphans: list[Entry]  # entries before the first section

    @property
    def text(self) -> str:
        return "".join(self.lines)

    @property
    def entries(self) -> list[Entry]:
        return [e for s in self.sections for e in s.entries]

    @property
    def tokens(self) -> int:
        return estimate(self.bom + self.text)

    def section_text(self, section: Section) -> str:
        return "".join(self.lines[section.start:section.end])


# --- parsing ---------------------------------------------------------------------------------


def read(path: Path) -> MemoryDoc:
    """Read and parse a MEMORY.md; InvalidInputError when it is missing or not text."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise InvalidInputError(
                f"{path} is over {MAX_BYTES:,} bytes, far past the {MAX_TOTAL_TOKENS:,}-token "
                "ceiling of a MEMORY.md: split it into satellite files (neocortex.md §11) "
                "before linting or pruning it")
    except FileNotFoundError:
        raise InvalidInputError(f"no MEMORY.md at {path}: create it (neocortex.md v1.0 "
                                "format) or pass the path of an existing one") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{path} is a folder: pass the path of a MEMORY.md file") \
            from None
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}") from None
    return parse(decode(raw, path), path)


def decode(raw: bytes, path: Path) -> str:
    """The text of a MEMORY.md; InvalidInputError naming what it is instead (UTF-16,
    binary, bare CR line endings, not UTF-8)."""
    problem = text_problem(raw, "a binary file, not a MEMORY.md: check the path")
    if problem:
        raise InvalidInputError(f"{path} is {problem}" if problem.startswith("a ")
                                else f"{path}: {problem}")
    return raw.decode("utf-8")


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def parse(text: str, path: Path | str = "MEMORY.md") -> MemoryDoc:
    """Parse MEMORY.md text (linear in its size; never raises on content)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    lines = split_lines(text[len(bom):])
    problems: list[Problem] = []
    header, body_start = _parse_header(lines, problems)
    doc = MemoryDoc(Path(path), lines, bom, header, [], None, problems, [])
    _parse_body(doc, body_start)
    return doc


def _parse_header(lines: list[str], problems: list[Problem]) -> tuple[Header, int]:
    header = Header()
    i = 0
    while i < len(lines):
        bare = _bare(lines[i]).strip()
        if not bare:
            i += 1
            continue
        m = _COMMENT_RE.match(bare)
        if not m or _NX_OPEN in bare:
            break
        header.last_index = i
        version = _VERSION_RE.match(bare)
        if version:
            if header.version is not None:
                problems.append(Problem("warning", "header-duplicate",
                                        "a second neocortex.md version line: keep one", i + 1))
            header.version = f"{version.group(1)}.{version.group(2)}"
            header.field_lines.setdefault("version", i + 1)
        else:
            _parse_header_fields(m.group(1), i, header, problems)
        i += 1
    header.present = header.last_index is not None
    return header, i


def _parse_header_fields(inner: str, index: int, header: Header,
                         problems: list[Problem]) -> None:
    parts = [p.strip() for p in inner.split("|")]
    recognised = False
    for part in parts:
        m = _HEADER_FIELD_RE.match(part)
        if not m:
            if part:
                problems.append(Problem(
                    "warning", "header-comment",
                    f"header comment part {part[:40]!r} is not `key: value`: write it as "
                    "`<!-- key: value -->` or move it below the header", index + 1))
            continue
        key, value = m.group(1).lower(), m.group(2).strip()
        recognised = True
        if key in header.fields:
            problems.append(Problem("warning", "header-duplicate",
                                    f"header field {key!r} appears twice: keep one", index + 1))
        header.fields[key] = value
        header.field_lines[key] = index + 1
    if not recognised and not inner.strip():
        problems.append(Problem("warning", "header-comment", "empty header comment", index + 1))


class _BodyState:
    def __init__(self, doc: MemoryDoc) -> None:
        self.doc = doc
        self.section: Section | None = None
        self.entry: Entry | None = None
        self.pending_blank = 0  # blank lines seen after the current entry's last line
        self.in_fence = False
        self.in_comment = False
        self.comment_in_entry = False
        self.stray_reported: set[int] = set()

    def close_entry(self) -> None:
        entry = self.entry
        if entry is None:
            return
        entry.end = entry.start + len(entry.lines)
        _finish_entry(entry, self.doc.problems)
        if self.section is not None:
            self.section.entries.append(entry)
        else:
            self.doc.orphans.append(entry)
        self.entry = None
        self.pending_blank = 0

    def close_section(self, end: int) -> None:
        self.close_entry()
        if self.section is not None:
            self.section.end = end
            self.doc.sections.append(self.section)
            self.section = None

    def stray(self, index: int, message: str) -> None:
        key = self.section.start if self.section is not None else -1
        if key in self.stray_reported:
            return
        self.stray_reported.add(key)
        self.doc.problems.append(Problem("warning", "stray-text", message, index + 1))


def _parse_body(doc: MemoryDoc, start: int) -> None:
    st = _BodyState(doc)
    lines = doc.lines
    for i in range(start, len(lines)):
        raw = lines[i]
        bare = _bare(raw)
        stripped = bare.strip()
        if st.in_comment:
            if st.comment_in_entry and st.entry is not None:
                st.entry.lines.append(raw)
            if "-->" in bare:
                st.in_comment = False
            continue
        if st.in_fence:
            if st.entry is not None:  # a fence opened inside an entry runs to its close
                st.entry.lines.append(raw)
            if _FENCE_RE.match(bare):
                st.in_fence = False
            continue
        if not stripped:
            if st.entry is not None:
                st.pending_blank += 1
            continue
        indented = bare[:1] in (" ", "\t")
        if indented and st.entry is not None:
            st.entry.lines.extend(lines[i - st.pending_blank:i])
            st.pending_blank = 0
            st.entry.lines.append(raw)
            if not bare.startswith("  "):
                doc.problems.append(Problem(
                    "warning", "indent",
                    "continuation lines are indented with 2 spaces (found a tab or 1 space)",
                    i + 1))
            if _FENCE_RE.match(bare):
                st.in_fence = True
            if "<!--" in bare and "-->" not in bare.split("<!--")[-1]:
                st.in_comment, st.comment_in_entry = True, True
            continue
        if st.entry is not None and st.pending_blank == 0 and stripped.startswith(_NX_OPEN):
            # an nx comment written at column 0 right under its entry still belongs to it
            st.entry.lines.append(raw)
            doc.problems.append(Problem("warning", "indent",
                                        "indent the nx comment 2 spaces under its entry", i + 1))
            if "-->" not in bare:
                st.in_comment, st.comment_in_entry = True, True
            continue
        heading = HEADING.match(bare)
        if heading and not indented:
            level, name = len(heading.group(1)), heading.group(2).strip()
            if level == 1:
                st.close_entry()
                if doc.title_line is None:
                    doc.title_line = i + 1
                else:
                    doc.problems.append(Problem("warning", "title",
                                                "a second `#` title: keep a single `# Memory`",
                                                i + 1))
                continue
            if level == 2:
                st.close_section(i)
                st.section = Section(name, i, len(lines))
                continue
            st.close_entry()
            doc.problems.append(Problem(
                "warning", "subheading",
                f"sub-heading {stripped[:40]!r}: neocortex.md has `##` sections of `- ` "
                "entries only; make it a section or an entry", i + 1))
            continue
        st.close_entry()
        if _RULE_RE.match(bare):
            continue
        if stripped.startswith("<!--"):
            if "-->" not in bare:
                st.in_comment, st.comment_in_entry = True, False
            continue
        if _FENCE_RE.match(bare):
            st.in_fence = True
            st.stray(i, "a code block outside any entry: indent it 2 spaces under an entry")
            continue
        if _BULLET_RE.match(bare):
            st.entry = Entry(st.section.name if st.section else "", i, i + 1, [raw])
            continue
        if indented:
            st.stray(i, "indented text that belongs to no entry: start an entry with `- `")
        elif st.section is None:
            st.stray(i, "text before the first section: move it into a section as an entry")
        else:
            st.stray(i, f"text in section {st.section.name!r} that is not an entry: start "
                        "each entry with `- `")
    st.close_section(len(lines))


def _finish_entry(entry: Entry, problems: list[Problem]) -> None:
    text = "".join(entry.lines)
    first = _bare(entry.lines[0])
    body = first[1:].strip()
    if not body and len(entry.lines) == 1:
        problems.append(Problem("warning", "empty-entry", "empty entry: delete the bare `-`",
                                entry.line))
    metas = list(_NX_RE.finditer(text))
    if metas:
        if len(metas) > 1:
            problems.append(Problem("error", "nx-duplicate",
                                    "more than one nx comment in one entry: merge them",
                                    entry.line))
        m = metas[0]
        line = entry.line + text.count("\n", 0, m.start())
        entry.meta = _parse_nx(m.group(1), line, closed=bool(m.group(2)))
        problems.extend(entry.meta.problems)
    sup = _SUPERSEDE_RE.match(body)
    if sup:
        entry.superseded = sup.group(1).strip()
        entry.replacement = sup.group(3).strip() or None
        if not sup.group(2) or not entry.replacement:
            problems.append(Problem(
                "warning", "supersession",
                "a struck-through fact without its replacement: write `~~old~~ → new (date)`",
                entry.line))
        elif entry.meta is not None and "x" in entry.meta.fields:
            recorded = _unquote(entry.meta.fields["x"])
            if recorded.strip() != entry.superseded:
                problems.append(Problem(
                    "warning", "supersession",
                    f"nx x={entry.meta.fields['x'][:40]} differs from the struck-through "
                    f"text {entry.superseded[:40]!r}: make them the same", entry.meta.line))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _parse_when(value: str) -> dt.date | None:
    value = value.strip()
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).date()
    except ValueError:
        return None


def _parse_nx(inner: str, line: int, *, closed: bool) -> NxMeta:
    meta = NxMeta(line, inner.strip())
    bad = meta.problems

    def err(message: str) -> None:
        bad.append(Problem("error", "nx-invalid", message, line))

    if not closed:
        err("nx comment is not closed: end it with `-->`")
    for m in _NX_TOKEN_RE.finditer(inner):
        key, value, bare = m.group(1), m.group(2), m.group(3)
        if bare is not None:
            if bare.lower() in NX_FLAGS:
                meta.flags.append(bare.lower())
            else:
                err(f"nx metadata {bare[:30]!r} is not `key=value` (keys: u c a s x)")
            continue
        if key is None:
            continue
        if key in meta.fields:
            err(f"nx field {key}= appears twice: keep one")
            continue
        meta.fields[key] = value
        if key not in NX_KEYS:
            bad.append(Problem("warning", "nx-unknown",
                               f"unknown nx field {key}= (neocortex.md v1.0 defines u c a s x)",
                               line))
        elif value == "" or value == '""':
            err(f"nx field {key}= has no value")
        elif key == "u" and _parse_when(value) is None:
            err(f"nx u={value[:30]} is not a date: use YYYY-MM-DD or ISO 8601")
        elif key == "c" and value not in NX_CONFIDENCE:
            err(f"nx c={value[:30]} is not a confidence: use high, med or low")
        elif key == "a" and not value.isdecimal():  # (isdigit() takes "²", which int() refuses)
            err(f"nx a={value[:30]} is not an access count: use a whole number ≥ 0")
        elif key == "s" and value not in NX_SOURCES:
            err(f"nx s={value[:30]} is not a source: use docs, user, inferred or tested")
        elif key == "x" and value.startswith('"') and (len(value) < 2 or not value.endswith('"')
                                                       or value.endswith('\\"')):
            err('nx x="… is missing its closing quote')
    return meta


# --- lint ------------------------------------------------------------------------------------


@dataclass
class LintReport:
    """The findings of `lint`, plus the true counts that `fix_header` writes."""

    path: Path
    problems: list[Problem]
    entries: int
    tokens: int
    sections: list[str]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def listed(self) -> tuple[list[Problem], dict[str, int]]:
        """The problems to show (at most LISTED_PER_CODE of each code) and the rest per code."""
        shown: list[Problem] = []
        seen: Counter[str] = Counter()
        for p in sorted(self.problems, key=lambda p: (p.line or 0, p.severity != "error")):
            seen[p.code] += 1
            if seen[p.code] <= LISTED_PER_CODE:
                shown.append(p)
        more = {code: n - LISTED_PER_CODE for code, n in seen.items() if n > LISTED_PER_CODE}
        return shown, more

    def to_json(self) -> dict[str, Any]:
        shown, more = self.listed()
        return {"path": str(self.path), "ok": self.ok, "errors": len(self.errors),
                "warnings": len(self.warnings), "entries": self.entries, "tokens": self.tokens,
                "sections": self.sections, "problems": [p.to_json() for p in shown],
                "not_listed": more}


def lint(doc: MemoryDoc) -> LintReport:
    """Check `doc` against neocortex.md v1.0 (see the module docstring for the rules)."""
    problems = list(doc.problems)
    figures = stats(doc)  # (what `cortex memory stats` shows)
    _lint_header(doc, figures, problems)
    _lint_sections(doc, figures, problems)
    _lint_entries(doc, problems)
    total_entries, tokens = figures.entries, figures.tokens
    if tokens > MAX_TOTAL_TOKENS:
        problems.append(Problem(
            "error", "total-tokens",
            f"~{tokens:,} tokens, over the {MAX_TOTAL_TOKENS:,}-token ceiling: prune "
            "(`cortex memory prune`) or split into satellite files (neocortex.md §11)"))
    elif tokens > SOFT_TOTAL_TOKENS:
        problems.append(Problem(
            "warning", "total-tokens",
            f"~{tokens:,} tokens, over the {SOFT_TOTAL_TOKENS:,}-token target: time to "
            "prune or compress"))
    if total_entries > MAX_TOTAL_ENTRIES:
        problems.append(Problem(
            "error", "total-entries",
            f"{total_entries:,} entries, over the {MAX_TOTAL_ENTRIES} maximum: prune or merge "
            "entries"))
    return LintReport(doc.path, problems, total_entries, tokens,
                      [s.name for s in doc.sections])


def _lint_header(doc: MemoryDoc, figures: Stats, problems: list[Problem]) -> None:
    header = doc.header
    if not header.present or header.version is None:
        problems.append(Problem(
            "error", "header-missing",
            "no neocortex.md header: make `<!-- neocortex.md v1.0 -->` the first line", 1))
        if not header.present:
            return
    elif header.version.split(".")[0] != FORMAT_VERSION.split(".")[0]:
        problems.append(Problem(
            "error", "header-version",
            f"neocortex.md v{header.version} is not supported: this cortex reads v1.x",
            header.field_lines.get("version")))
    elif doc.lines and not _VERSION_RE.match(_bare(doc.lines[0]).strip()):
        problems.append(Problem("warning", "header-order",
                                "the neocortex.md version comment should be the first line",
                                header.field_lines.get("version")))
    fields = header.fields
    for key in ("agent", "consolidated"):
        if key not in fields:
            problems.append(Problem("warning", "header-field",
                                    f"header has no `{key}:` comment: add `<!-- {key}: … -->`"))
    if "consolidated" in fields and _parse_when(fields["consolidated"]) is None:
        problems.append(Problem(
            "error", "header-field",
            f"header consolidated: {fields['consolidated'][:30]!r} is not a date: use YYYY-MM-DD",
            header.field_lines["consolidated"]))
    for key in fields:
        if key not in ("agent", "owner", "consolidated", "entries", "tokens"):
            problems.append(Problem("warning", "header-field", f"unknown header field {key!r}",
                                    header.field_lines[key]))
    if header.version is None:
        return  # `--fix` refreshes counts only under a version line: header-missing says so
    if "entries" not in fields or "tokens" not in fields:
        problems.append(Problem(
            "error", "header-counts",
            "header has no `<!-- entries: N | tokens: ~T -->` line: run "
            "`cortex memory lint --fix` to add it"))
        return
    entries_claim = _parse_count(fields["entries"])
    tokens_claim = _parse_count(fields["tokens"])
    line = header.field_lines["entries"]
    if entries_claim is None or tokens_claim is None:
        problems.append(Problem(
            "error", "header-counts",
            f"header counts `entries: {fields['entries'][:20]} | tokens: "
            f"{fields['tokens'][:20]}` are not numbers: run `cortex memory lint --fix`", line))
        return
    actual_entries, actual_tokens = figures.entries, figures.tokens
    if entries_claim != actual_entries:
        problems.append(Problem(
            "warning", "header-counts",
            f"header says {entries_claim:,} entries, the file has {actual_entries:,}: run "
            "`cortex memory lint --fix`", line))
    if abs(tokens_claim - actual_tokens) > max(COUNT_TOLERANCE * actual_tokens, 100):
        problems.append(Problem(
            "warning", "header-counts",
            f"header says ~{tokens_claim:,} tokens, the file has ~{actual_tokens:,}: run "
            "`cortex memory lint --fix`", line))


def _parse_count(value: str) -> int | None:
    m = _COUNT_RE.match(value.strip())
    if not m:
        return None
    number = float(m.group(1).replace(",", ""))
    try:
        return round(number * 1000) if m.group(2) else round(number)
    except OverflowError:  # hundreds of digits: infinity as a float, and no count
        return None


def _lint_sections(doc: MemoryDoc, figures: Stats, problems: list[Problem]) -> None:
    if doc.title_line is None:
        problems.append(Problem("warning", "title",
                                "no `# Memory` title: add it above the first section"))
    problems += [Problem("error", "orphan-entry",
                         "entry before the first section: move it into a section", orphan.line)
                 for orphan in doc.orphans]
    seen: dict[str, int] = {}
    standard_order: list[str] = []
    for section in doc.sections:
        canonical = _canonical(section.name)
        if canonical in seen:
            problems.append(Problem(
                "error", "section-duplicate",
                f"section {section.name!r} appears twice (first on line {seen[canonical]}): "
                "merge them", section.line))
            continue
        seen[canonical] = section.line
        if canonical in STANDARD_SECTIONS:
            if section.name != canonical:
                problems.append(Problem("warning", "section-name",
                                        f"write the section name as {canonical!r}",
                                        section.line))
            standard_order.append(canonical)
        else:
            problems.append(Problem(
                "warning", "section-custom",
                f"custom section {section.name!r} (standard: {', '.join(STANDARD_SECTIONS)})",
                section.line))
    missing = [s for s in STANDARD_SECTIONS if s not in seen]
    if missing:
        problems.append(Problem(
            "error", "section-missing",
            f"missing standard section{'s' if len(missing) > 1 else ''}: "
            f"{', '.join('## ' + m for m in missing)} (an empty one is fine)"))
    expected = [s for s in STANDARD_SECTIONS if s in standard_order]
    if standard_order != expected:
        problems.append(Problem(
            "error", "section-order",
            f"standard sections out of order: {' → '.join(standard_order)}; the order is "
            f"{' → '.join(STANDARD_SECTIONS)} (most to least stable)"))
    if len(doc.sections) > MAX_SECTIONS:
        problems.append(Problem(
            "error", "section-count",
            f"{len(doc.sections)} sections, over the maximum of {MAX_SECTIONS}: merge custom "
            "sections into standard ones"))
    for size in figures.sections:
        if size.target is None or size.max_entries is None or size.budget is None:
            continue  # a custom section: no limits
        if size.entries > size.max_entries:
            problems.append(Problem(
                "error", "section-entries",
                f"{size.name}: {size.entries} entries, over its maximum of {size.max_entries} "
                f"(target {size.target[0]}–{size.target[1]}): prune or merge", size.line))
        if size.tokens > size.budget * 1.5:
            problems.append(Problem(
                "warning", "section-tokens",
                f"{size.name}: ~{size.tokens:,} tokens, well over its ~{size.budget:,} budget: "
                "compress its entries", size.line))


def _lint_entries(doc: MemoryDoc, problems: list[Problem]) -> None:
    for entry in [*doc.orphans, *doc.entries]:
        tokens = entry.tokens
        if tokens > MAX_ENTRY_TOKENS:
            problems.append(Problem(
                "error", "entry-tokens",
                f"entry is ~{tokens} tokens, over the {MAX_ENTRY_TOKENS}-token limit: compress "
                "it to its gist or split it into one concept per entry", entry.line))


def _canonical(name: str) -> str:
    return _STANDARD_BY_LOWER.get(name.strip().lower(), name.strip())


# --- header counts (`lint --fix`) ------------------------------------------------------------


def _round_tokens(tokens: int) -> int:
    return round(tokens, -1) if tokens < 1000 else round(tokens, -2)


def fixed_text(doc: MemoryDoc) -> str | None:
    """The file with its header's entries/tokens counts made true; None when it has no
    neocortex.md header (the fix refreshes counts, it does not invent a header)."""
    header = doc.header
    if not header.present or header.version is None:
        return None
    entries = len(doc.entries) + len(doc.orphans)
    eol = "\r\n" if doc.lines and doc.lines[0].endswith("\r\n") else "\n"
    # 0-based line index → the count keys that line holds
    where: dict[int, list[str]] = {}
    for key in ("entries", "tokens"):
        if key in header.fields:
            where.setdefault(header.field_lines[key] - 1, []).append(key)
    tokens = doc.tokens
    candidate = list(doc.lines)
    for _ in range(10):  # the counts' own digits count too: iterate to a fixed point
        values = {"entries": f"{entries:,}", "tokens": f"~{_round_tokens(tokens):,}"}
        candidate = list(doc.lines)
        if not where:
            at = (header.last_index or 0) + 1
            candidate.insert(at, f"<!-- entries: {values['entries']} | "
                                 f"tokens: {values['tokens']} -->{eol}")
        else:
            add = [k for k in values if k not in header.fields]
            for index, keys in where.items():
                candidate[index] = _rewrite_counts(candidate[index], values, keys + add, eol)
                add = []
        new_tokens = estimate(doc.bom + "".join(candidate))
        if _round_tokens(new_tokens) == _round_tokens(tokens):
            break
        tokens = new_tokens
    return doc.bom + "".join(candidate)


def _rewrite_counts(old: str, values: dict[str, str], keys: list[str], eol: str) -> str:
    """`old` (a header comment line) with the `keys` among entries/tokens set to `values`,
    every other part of the comment kept."""
    bare = _bare(old)
    ending = old[len(bare):] or eol
    m = _COMMENT_RE.match(bare.strip())
    inner = m.group(1) if m else ""
    out: list[str] = []
    done: set[str] = set()
    for part in (p.strip() for p in inner.split("|")):
        fm = _HEADER_FIELD_RE.match(part)
        key = fm.group(1).lower() if fm else None
        if key in keys and key is not None and key not in done:
            out.append(f"{key}: {values[key]}")
            done.add(key)
        elif part:
            out.append(part)
    for key in keys:
        if key not in done:
            out.append(f"{key}: {values[key]}")
    indent = bare[: len(bare) - len(bare.lstrip())]
    return f"{indent}<!-- {' | '.join(out)} -->{ending}"


def lint_file(path: Path, *, fix: bool = False) -> tuple[LintReport, bool]:
    """Lint the MEMORY.md at `path`; with `fix`, first make its header counts true (when it
    has a header). Returns the report (of the fixed file) and whether the file changed."""
    if not fix:
        return lint(read(path)), False
    with _lock(path) as doc:
        new = fixed_text(doc)
        if new is None or new == doc.bom + doc.text:
            return lint(doc), False
        atomic_write(path, new)
        return lint(parse(new, path)), True


# --- stats -----------------------------------------------------------------------------------


@dataclass
class SectionStats:
    """One section's size against the spec's table (None limits for a custom section)."""

    name: str
    line: int
    entries: int
    tokens: int
    target: tuple[int, int] | None
    max_entries: int | None
    budget: int | None

    @property
    def state(self) -> str:
        if self.max_entries is not None and self.entries > self.max_entries:
            return "over max"
        if self.budget is not None and self.tokens > self.budget:
            return "over budget"
        if self.target is not None and self.entries > self.target[1]:
            return "above target"
        return "ok"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "line": self.line, "entries": self.entries,
                "tokens": self.tokens, "target": list(self.target) if self.target else None,
                "max_entries": self.max_entries, "token_budget": self.budget,
                "state": self.state}


@dataclass
class Stats:
    path: Path
    sections: list[SectionStats]
    entries: int
    tokens: int
    with_metadata: int

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "entries": self.entries, "tokens": self.tokens,
                "max_entries": MAX_TOTAL_ENTRIES, "max_tokens": MAX_TOTAL_TOKENS,
                "target_tokens": SOFT_TOTAL_TOKENS, "with_metadata": self.with_metadata,
                "sections": [s.to_json() for s in self.sections]}


def stats(doc: MemoryDoc) -> Stats:
    """Entries and tokens per section against the spec's budgets."""
    out: list[SectionStats] = []
    for section in doc.sections:
        limits = SECTION_LIMITS.get(_canonical(section.name))
        out.append(SectionStats(
            section.name, section.line, len(section.entries),
            estimate(doc.section_text(section)),
            (limits[0], limits[1]) if limits else None,
            limits[2] if limits else None, limits[3] if limits else None))
    entries = doc.entries
    return Stats(doc.path, out, len(entries) + len(doc.orphans), doc.tokens,
                 sum(1 for e in entries if e.meta is not None))


# --- prune -----------------------------------------------------------------------------------


@dataclass
class Judged:
    """A prune decision about one entry, with the figures it rests on."""

    entry: Entry
    action: str  # archive | compress | review
    age_days: int
    accesses: int

    def to_json(self) -> dict[str, Any]:
        return {"line": self.entry.line, "section": self.entry.section, "action": self.action,
                "age_days": self.age_days, "accesses": self.accesses,
                "text": self.entry.content}


@dataclass
class PrunePlan:
    """What `apply_prune` would do to a MEMORY.md as of `today`."""

    doc: MemoryDoc
    today: dt.date
    archive: list[Judged] = field(default_factory=list)
    compress: list[Judged] = field(default_factory=list)
    review: list[Judged] = field(default_factory=list)
    undated: list[Entry] = field(default_factory=list)
    protected: Counter[str] = field(default_factory=Counter)  # reason → entries
    kept: int = 0

    def archive_path(self, entry: Entry) -> Path:
        meta = entry.meta
        updated = meta.updated if meta else None
        year = updated.year if updated else self.today.year
        return archive_dir(self.doc.path) / f"{year}.md"

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.doc.path), "today": self.today.isoformat(),
                "archive": [{**j.to_json(), "to": str(self.archive_path(j.entry))}
                            for j in self.archive],
                "compress": [j.to_json() for j in self.compress],
                "review": [j.to_json() for j in self.review],
                "undated": [{"line": e.line, "section": e.section, "text": e.content}
                            for e in self.undated],
                "protected": dict(sorted(self.protected.items())), "kept": self.kept}


def archive_dir(memory_path: Path) -> Path:
    """Where prune archives the entries of `memory_path`: `memory/archive/` beside it."""
    return memory_path.parent / "memory" / "archive"


def plan_prune(doc: MemoryDoc, today: dt.date) -> PrunePlan:
    """Decide, entry by entry, what the retention rules do (nothing is written)."""
    plan = PrunePlan(doc, today)
    plan.protected["before the first section"] = len(doc.orphans)
    for entry in doc.entries:
        canonical = _canonical(entry.section)
        meta = entry.meta
        accesses = (meta.accesses if meta else None) or 0
        if canonical in NEVER_PRUNED_SECTIONS:
            plan.protected[canonical] += 1
        elif meta is not None and meta.user_marked:
            plan.protected["user-marked"] += 1
        elif accesses > PROTECTED_ACCESS_ABOVE:
            plan.protected[f"accessed > {PROTECTED_ACCESS_ABOVE} times"] += 1
        elif meta is None or meta.updated is None:
            plan.undated.append(entry)
        elif accesses >= WEAK_ACCESS_BELOW:
            plan.kept += 1
        else:
            age = (today - meta.updated).days
            if age > ARCHIVE_AFTER_DAYS and accesses == 0:
                plan.archive.append(Judged(entry, "archive", age, accesses))
            elif age > COMPRESS_AFTER_DAYS:
                plan.compress.append(Judged(entry, "compress", age, accesses))
            else:
                plan.review.append(Judged(entry, "review", age, accesses))
    plan.protected = Counter({k: v for k, v in plan.protected.items() if v})
    return plan


@dataclass
class PruneResult:
    plan: PrunePlan
    written: list[Path]  # archive files first, then MEMORY.md


@contextlib.contextmanager
def _lock(path: Path, timeout: float = 30.0) -> Iterator[MemoryDoc]:
    """An exclusive flock on MEMORY.md itself, so that two `--fix` / `prune` runs take turns;
    the file, read once it is held.

    No lock file anywhere: MEMORY.md need not live in a store, and cortex writes nothing
    outside a store but that file and its archive. Each write replaces the file (a new
    inode), so a run that waited checks, once it holds the lock, that the path still names
    the file it locked, and otherwise locks the new one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            read(path)  # raises the one-line message for a missing or unreadable file
            raise
        try:
            flock(fd, deadline, f"another cortex process has been changing {path} for "
                                f"{timeout:.0f}s; wait for it to finish and try again")
            locked = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (locked.st_dev, locked.st_ino):
                yield read(path)
                return
        finally:
            os.close(fd)  # releases the lock


def apply_prune(path: Path, today: dt.date) -> PruneResult:
    """Archive the entries `plan_prune` marks for archiving: archive files first, then
    MEMORY.md with exactly those entries' lines removed. Returns the files written."""
    with _lock(path) as doc:
        plan = plan_prune(doc, today)
        if not plan.archive:
            return PruneResult(plan, [])
        written: list[Path] = []
        by_file: dict[Path, list[Entry]] = {}
        for judged in plan.archive:
            by_file.setdefault(plan.archive_path(judged.entry), []).append(judged.entry)
        for archive, entries in sorted(by_file.items()):
            if _append_to_archive(archive, entries, today):
                written.append(archive)
        drop = {i for j in plan.archive for i in range(j.entry.start, j.entry.end)}
        kept = [line for i, line in enumerate(doc.lines) if i not in drop]
        try:
            current = path.read_bytes()
        except OSError:
            current = b""
        if current != (doc.bom + doc.text).encode("utf-8"):
            raise InvalidInputError(
                f"{path} changed while it was being pruned (the archived entries are safely in "
                f"{archive_dir(path)}): run `cortex memory prune` again")
        atomic_write(path, doc.bom + "".join(kept))
        written.append(path)
        return PruneResult(plan, written)


_ARCHIVE_HEADER = (
    "<!-- neocortex.md archive v1.0 -->\n"
    "<!-- Entries moved out of MEMORY.md by `cortex memory prune`, grouped by section. -->\n"
    "\n"
    "# Memory archive — {year}\n"
)


def _append_to_archive(archive: Path, entries: list[Entry], today: dt.date) -> bool:
    """Add `entries` under their sections in `archive`; skip ones already archived (a rerun
    after a crash). True when the file changed."""
    doc = read(archive) if archive.exists() else \
        parse(_ARCHIVE_HEADER.format(year=archive.stem), archive)
    lines = list(doc.lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    present = {_canonical(s.name): {_archived_key(e.lines) for e in s.entries}
               for s in doc.sections}
    # insertion points, computed on the original line numbers and applied bottom-up
    inserts: dict[int, list[str]] = {}
    appended: dict[str, list[str]] = {}
    sections = {_canonical(s.name): s for s in doc.sections}
    for entry in entries:
        key = _archived_key(entry.lines)
        name = _canonical(entry.section)
        if key in present.setdefault(name, set()):
            continue
        present[name].add(key)
        block = [_bare(ln) + eol for ln in entry.lines]
        block.append(f"  <!-- archived: {today.isoformat()} -->{eol}")
        target = sections.get(name)
        if target is None:
            appended.setdefault(name, []).extend(block)
            continue
        where = target.entries[-1].end if target.entries else target.start + 1
        inserts.setdefault(where, []).extend(block)
    if not inserts and not appended:
        return False
    for where in sorted(inserts, reverse=True):
        lines[where:where] = inserts[where]
    for name, block in appended.items():
        if lines and _bare(lines[-1]).strip():
            lines.append(eol)
        lines.append(f"## {name}{eol}")
        lines.extend(block)
    atomic_write(archive, doc.bom + "".join(lines))
    return True


def _archived_key(lines: list[str]) -> str:
    return "\n".join(_bare(ln).rstrip() for ln in lines if not _ARCHIVED_RE.match(_bare(ln)))
