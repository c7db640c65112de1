"""All frontmatter handling: splitting, safe YAML loading, normalising, key-only edits.

Quirks handled here and nowhere else: a UTF-8 BOM, CRLF line endings, PyYAML turning
dates into `date` objects, empty frontmatter, `---` lines inside the body, and keys
named `content` (which python-frontmatter's `loads()` would collide with).

Loading has two paths that give identical results. Most atoms are plain `key: value`,
`key: [a, b]` and `  - item` lines, which `fast_mapping` reads without the YAML library
(about ten times faster than even libyaml, and no import). It refuses — returns None —
anything it is not certain about (anchors, escapes, block scalars, nesting, YAML 1.1's
`yes`/`0x1F`/`1:30`/`.inf` scalars, comments after values, tabs …), and then the general
path decides: python-frontmatter's YAML handler (`YAMLHandler.load`) run with our loader
(`safe_loader`: safe, libyaml's where PyYAML has it, a repeated key an error with its
line; impossible dates kept as text), between our two bounds — nesting past MAX_YAML_DEPTH
refused before the load (`too_deep`), aliases expanding past MAX_YAML_VALUES after it
(`unbounded`). A property test (tests/test_frontmatter.py) checks that whatever the fast
path accepts, it reads exactly as the general path does.

python-frontmatter does not split the file or write it: its `parse()` strips the text and
the body (an edit must keep every byte, an error name its line) and drops a frontmatter
that is not a mapping without a word, its `loads()` collides with a key named `content`,
and its `dumps()` rewrites the whole block where `set_keys` changes only its keys. So
`locate` finds the fences and `set_keys` edits in place.

What python-frontmatter costs (benchmarks/parse.py on 10,000 scripts/gen_corpus.py atoms;
2 cores shared with other work, load ~6, so noisy): the fast path reads all of them, 16 µs
a file, and python-frontmatter is not even imported. Forced through the general path they
take 91 µs a file through its handler against 103 µs with yaml.load called directly
(minimums 80 and 80: no cost that can be measured), plus 0.9 ms once per process for the
import. Cold `cortex index regen --all` / `cortex validate` on a 10,000-atom store whose
every atom takes the general path: 2.76 / 2.06 s of CPU, against 2.79 / 2.27 s before.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexfs.errors import AtomParseError, InvalidInputError
from cortexfs.escape import yaml_scalar

BOM = "\ufeff"
MAX_ATOM_BYTES = 1_000_000  # bigger files are not atoms someone wrote by hand: skip them

_FENCE = re.compile(r"^---[ \t]*\r?$")
_CLOSE_LINE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")  # a markdown heading: (#s, title)
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TOP_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]|$)")


@dataclass
class Document:
    """A parsed markdown file: normalised frontmatter, body text, and where the body starts."""

    meta: dict[str, Any]
    body: str
    body_line: int  # 1-based line number of the first body line


@dataclass(frozen=True)
class Span:
    """Where the parts of a file's text are: `text[fm_start:fm_end]` is the YAML,
    `text[body_start:]` the body. Lines are ended by "\\n" (a "\\r" before it belongs to
    the line ending); a BOM is skipped."""

    fm_start: int
    fm_end: int
    body_start: int
    body_line: int  # 1-based line number of the first body line


def locate(text: str, path: str = "<string>") -> Span:
    """Find the frontmatter fences; AtomParseError when there is no (closed) frontmatter."""
    start = len(BOM) if text.startswith(BOM) else 0
    nl = text.find("\n", start)
    first = text[start:] if nl < 0 else text[start:nl]
    if not _FENCE.match(first):
        raise AtomParseError(path, "no frontmatter: the file must start with a line '---'", 1)
    m = _CLOSE_LINE.search(text, nl + 1) if nl >= 0 else None
    if m is None:
        raise AtomParseError(path, "frontmatter is not closed: add a line '---' after it", 1)
    body_start = min(m.end() + 1, len(text))
    return Span(nl + 1, m.start(), body_start, text.count("\n", 0, body_start) + 1)


def split_lines(text: str) -> list[str]:
    """`text` cut after each "\\n", ends kept (str.splitlines would also cut at \\r, \\x0c …)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def parse(text: str, path: str = "<string>") -> Document:
    """Parse a markdown file's text; AtomParseError (with line) when the frontmatter is bad."""
    span = locate(text, path)
    meta = load_mapping(text[span.fm_start:span.fm_end], path, first_line=2)
    return Document(meta, text[span.body_start:], span.body_line)


def read(path: Path) -> Document:
    """Read and parse one file; oversized, binary or undecodable files, and anything that is
    not a regular file, are AtomParseErrors."""
    return parse(decode(read_bytes(path), str(path)), str(path))


def read_bytes(path: Path) -> bytes:
    """The bytes of a file that may be an atom: refused (AtomParseError) without reading
    when it is not a regular file (a directory, or a FIFO that would block) or is too big."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as e:
        with contextlib.suppress(OSError):
            reason = not_a_file(os.lstat(path).st_mode)
            if reason:  # a link (O_NOFOLLOW refused it)
                raise AtomParseError(str(path), reason) from None
        raise AtomParseError(str(path), f"cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        reason = not_a_file(st.st_mode)
        if reason:
            raise AtomParseError(str(path), reason)
        check_size(st.st_size, str(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_ATOM_BYTES + 1)
    except OSError as e:
        raise AtomParseError(str(path), f"cannot read: {e.strerror}") from None
    finally:
        os.close(fd)


def not_a_file(mode: int) -> str | None:
    """Why something named like an atom cannot be one (a directory, a FIFO …), or None."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return ("a symbolic link, not part of the store: cortex does not read through links; "
                "replace it with the file itself")
    what = "a directory" if stat.S_ISDIR(mode) else "a special file (FIFO, socket or device)"
    return f"{what}, not an atom file: rename it or move it out of the atom folder"


def check_size(size: int, path: str) -> None:
    """Refuse a file too big to be an atom someone wrote (before reading it)."""
    if size > MAX_ATOM_BYTES:
        raise AtomParseError(path, f"file is {size:,} bytes, over the {MAX_ATOM_BYTES:,} "
                             "byte limit for an atom: split it or move it out of the atom folder")


def decode(raw: bytes, path: str) -> str:
    """Bytes of a markdown file as text, refusing what cannot be a hand-written atom."""
    check_size(len(raw), path)
    problem = text_problem(raw, "binary file in an atom folder: move it elsewhere")
    if problem:
        raise AtomParseError(path, problem)
    return raw.decode("utf-8")


def decode_text(raw: bytes, path: str) -> str:
    """Bytes of a text file cortex edits (TASKS.yaml …) as text; InvalidInputError naming
    the real problem (UTF-16, a binary file, bare CR line endings, not UTF-8)."""

    problem = text_problem(raw, "a binary file (it holds NUL bytes), not text: replace it "
                           "with a text file")
    if problem:
        raise InvalidInputError(f"{path}: {problem}")
    return raw.decode("utf-8")


def text_problem(raw: bytes, binary: str) -> str | None:
    """Why `raw` is not UTF-8 text with LF (or CRLF) line endings, in words that name the
    real problem; `binary` is what to say of NUL bytes that are not UTF-16."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or _utf16_without_bom(raw):
        return ("UTF-16 text, not UTF-8: re-save the file as UTF-8 "
                "(e.g. `iconv -f UTF-16 -t UTF-8`)")
    if b"\x00" in raw:
        return binary
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 (byte {e.start}): re-save the file as UTF-8"
    if "\r" in text and "\n" not in text:
        return ("its lines end with a bare CR (old Mac line endings), which cortex does not "
                "read as lines: re-save it with LF line endings (e.g. `tr '\\r' '\\n'`)")
    return None


def _utf16_without_bom(raw: bytes) -> bool:
    head = raw[:64]
    if len(head) < 4:
        return False
    return head[1::2].count(0) == len(head) // 2 or head[0::2].count(0) == (len(head) + 1) // 2


def load_mapping(fm_text: str, path: str, first_line: int) -> dict[str, Any]:
    """The frontmatter mapping, normalised: the fast path when it is sure, else YAML."""
    meta = fast_mapping(fm_text)
    return meta if meta is not None else load_yaml_mapping(fm_text, path, first_line)


# --- the fast path ---------------------------------------------------------------------------

# Characters the fast path accepts anywhere: printable (as YAML's reader defines it) minus
# tab, NEL, LS, PS and the BOM, which YAML treats as whitespace or line breaks.
_UNSURE_CHAR = (
    "[^\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_UNSURE_ASCII = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f]")
# One line of frontmatter: `key: value`, `key:`, a block-list item `  - value`, a whole-line
# comment at column 0, or a blank line.
_LINE = re.compile(
    r"^(?:([A-Za-z_][A-Za-z0-9_.-]{0,127}):(?: +(.*))?|( *-) +(.*)|#.*| *)\r?$", re.MULTILINE
)
_DQ = re.compile(r'"([^"\\]*)"')
_SQ = re.compile(r"'((?:[^']|'')*)'")
_INDICATOR = frozenset("-?:,[]{}#&*!|>'\"%@`")
_FLOW_UNSURE = frozenset(":#[]{}")
_FLOW_PLAIN = frozenset(":#[]{}\"'")  # what _flow does not handle
# PyYAML's YAML 1.1 implicit resolvers (yaml/resolver.py), for plain scalars.
_BOOL = re.compile(r"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF")
_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_NULL = frozenset({"~", "null", "Null", "NULL"})
_NUMBERISH = re.compile(r"""
    [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
  | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
  | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
  | [-+]?\.(?:inf|Inf|INF)
  | \.(?:nan|NaN|NAN)
  | [-+]?0b[0-1_]+
  | [-+]?0[0-7_]+
  | [-+]?(?:0|[1-9][0-9_]*)
  | [-+]?0x[0-9a-fA-F_]+
  | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
  | [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
  | [0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
    (?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?
""", re.VERBOSE)
_INT = re.compile(r"0|[1-9][0-9]{0,17}")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")


class _Unsure(Exception):
    """The fast path cannot be certain what YAML makes of this: let YAML decide."""


def fast_mapping(fm_text: str) -> dict[str, Any] | None:
    """The frontmatter as YAML + `normalize` would give it, or None when not certain."""
    if _has_unsure_char(fm_text) or fm_text.count("\r") != fm_text.count("\r\n"):
        return None
    lines = _LINE.findall(fm_text)
    if len(lines) != fm_text.count("\n") + 1:
        return None  # a line of some other shape (indented, `key:value`, a `#` after spaces …)
    out: dict[str, Any] = {}
    key = ""  # the last key, while block-list items may still follow it
    indent = None  # the indentation of that key's `- item` lines
    memo = _MEMO
    try:
        for name, raw, item_indent, item in lines:
            if name:
                if name in out or (name[0] in "yYnNoOtTfF" and _plain(name) != name):
                    return None  # a duplicate, or a key YAML reads as a bool or null
                key, indent = "", None
                raw = raw.rstrip(" \r")
                if not raw:
                    key = name  # `key:` alone: None, or the head of a block list
                    out[name] = None
                    continue
                first = raw[0]
                if first == '"' and len(raw) > 1 and raw[-1] == '"' \
                        and '"' not in raw[1:-1] and "\\" not in raw:
                    out[name] = raw[1:-1]  # the commonest shape, a summary: inline
                    continue
                if first == "[" and raw[-1] == "]" and _FLOW_PLAIN.isdisjoint(raw[1:-1]):
                    out[name] = _flow(raw[1:-1])
                    continue
                value = memo.get(raw, _MISS)
                if value is _MISS:
                    value = _remember(raw, _value(raw))
                out[name] = list(value) if type(value) is tuple else value
            elif item_indent:  # `  -`, the indentation and the dash of a list item
                if not key or (indent is not None and item_indent != indent):
                    return None  # an item with no list to belong to, or a nested list
                if indent is None:
                    indent, out[key] = item_indent, []
                item = item.rstrip(" \r")
                if not item or item[0] in "[{":
                    return None
                value = memo.get(item, _MISS)
                if value is _MISS:
                    value = _remember(item, _value(item))
                out[key].append(value)
    except _Unsure:
        return None
    return out


def _flow(inner: str) -> list[Any]:
    """The items of a flow list with no quotes, brackets, braces, `#` or `:` inside."""
    if not inner.strip(" "):
        return []
    items = []
    memo = _MEMO
    for item in inner.split(","):
        value = memo.get(item, _MISS)
        if value is _MISS:
            token = item.strip(" ")
            if not token:
                raise _Unsure
            value = _remember(item, _plain(token))
        items.append(value)
    return items


def _remember(raw: str, value: Any) -> Any:
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    _MEMO[raw] = tuple(value) if type(value) is list else value
    return value


def _has_unsure_char(text: str) -> bool:
    if text.isascii():
        return _UNSURE_ASCII.search(text) is not None
    # the full character class takes milliseconds to compile: only when a text needs it
    return re.search(_UNSURE_CHAR, text) is not None


# Values repeat across atoms (projects, statuses, dates, tags): remember what each read as.
# Lists are kept as tuples so that no caller can change a remembered value.
_MEMO: dict[str, Any] = {}
_MEMO_MAX = 100_000
_MISS = object()


def _value(raw: str) -> Any:
    if not raw:
        return None
    first = raw[0]
    if first in "\"'":
        return _quoted(raw)
    if first == "[":
        if raw[-1] != "]":
            raise _Unsure
        inner = raw[1:-1]
        if not inner.strip(" "):
            return []
        items = []
        for item in inner.split(","):
            item = item.strip(" ")
            if not item:
                raise _Unsure
            if item[0] in "\"'":
                items.append(_quoted(item))
            elif _FLOW_UNSURE.isdisjoint(item):
                items.append(_plain(item))
            else:
                raise _Unsure
        return items
    if " #" in raw or ": " in raw or raw[-1] == ":":
        raise _Unsure
    return _plain(raw)


def _quoted(raw: str) -> str:
    m = (_DQ if raw[0] == '"' else _SQ).fullmatch(raw)
    if m is None:
        raise _Unsure
    return m.group(1) if raw[0] == '"' else m.group(1).replace("''", "'")


def _plain(text: str) -> Any:
    """A one-line plain scalar resolved as PyYAML's YAML 1.1 resolver does (dates as ISO)."""
    first = text[0]
    if first in _INDICATOR:
        raise _Unsure
    if first in "0123456789+.":
        if _INT.fullmatch(text):
            return int(text)
        m = _DATE.fullmatch(text)
        if m:
            try:
                return dt.date(int(m[1]), int(m[2]), int(m[3])).isoformat()
            except ValueError:
                raise _Unsure from None
        if _NUMBERISH.fullmatch(text):
            raise _Unsure
        return text
    if first in "yYnNtTfFoO" and _BOOL.fullmatch(text):
        return text in _TRUE
    if text in _NULL:
        return None
    if text in ("<<", "="):
        raise _Unsure
    return text


# a YAML 1.1 timestamp (last-ref's ISO time): it loads as a datetime, never as the text
_TIMESTAMP = re.compile(r"\d{4}-\d\d?-\d\d?(?:[Tt]|[ \t]+)\d\d?:\d\d:\d\d(?:\.\d*)?"
                        r"(?:[ \t]*(?:Z|[-+]\d\d?(?::\d\d)?))?")


def reads_as_itself(text: str, in_list: bool = False) -> bool:
    """Whether `text` written unquoted after `key: ` (or as an item of a flow list) loads
    back as exactly `text`: the fast path's reading when it is sure, else YAML's."""
    if text != text.strip(" ") or _DATE.fullmatch(text) or _TIMESTAMP.fullmatch(text):
        # YAML strips the spaces; a date or a timestamp would load as a date(time) object
        # (said without asking YAML: a first fold writes tens of thousands of last-refs)
        return False
    try:
        return bool((_plain(text) if in_list else _value(text)) == text)
    except _Unsure:
        pass
    import yaml

    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


# --- the YAML library ------------------------------------------------------------------------


def load_yaml_mapping(fm_text: str, path: str, first_line: int) -> dict[str, Any]:
    """Safely load YAML frontmatter that must be a mapping (or empty), normalised: the
    general path, through python-frontmatter's YAML handler with our loader."""
    import yaml

    deep = too_deep(fm_text)
    if deep is not None:
        raise AtomParseError(path, f"the YAML nests more than {MAX_YAML_DEPTH} levels deep: "
                             "write the values out plainly", first_line + deep)
    handler = _handler()
    try:
        try:
            data = handler.load(fm_text, Loader=safe_loader())
        except ValueError:
            # PyYAML builds dates eagerly, so `date: 2026-13-45` raises ValueError (not a
            # YAMLError): keep such impossible dates as text for validation to report.
            data = handler.load(fm_text, Loader=_lenient_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise AtomParseError(path, f"invalid YAML in frontmatter: {problem}", line) from None
    except (ValueError, OverflowError, RecursionError) as e:
        raise AtomParseError(path, f"invalid value in frontmatter: {e}", first_line) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AtomParseError(
            path, f"frontmatter must be `key: value` lines, not a {type(data).__name__}",
            first_line,
        )
    problem = unbounded(data)
    if problem:
        raise AtomParseError(path, f"{problem}: write the values out plainly", first_line)
    return {str(k): normalize(v) for k, v in data.items()}


_HANDLER: list[Any] = []


def _handler() -> Any:
    """python-frontmatter's YAML handler (imported on the first general-path load only)."""
    if not _HANDLER:
        from frontmatter.default_handlers import YAMLHandler

        _HANDLER.append(YAMLHandler())
    return _HANDLER[0]


MAX_YAML_VALUES = 100_000  # far beyond any hand-written frontmatter or TASKS.yaml
MAX_YAML_DEPTH = 64


def unbounded(data: Any) -> str | None:
    """Why loaded YAML is not plain data, or None when it is.

    YAML aliases are references: `a: &x [*x]` loads as a list that contains itself, and
    nine nested aliases of nine items each (a "billion laughs") load in microseconds
    but expand to 9⁹ values. `normalize` and every consumer would recurse forever or
    run out of memory; this walk, without recursion, stops at MAX_YAML_VALUES.
    """
    stack: list[tuple[Any, int]] = [(data, 0)]
    left = MAX_YAML_VALUES
    while stack:
        value, depth = stack.pop()
        left -= 1
        if left < 0:
            return (f"the YAML expands to more than {MAX_YAML_VALUES:,} values "
                    "(an alias loop or an alias bomb?)")
        if depth > MAX_YAML_DEPTH:
            return (f"the YAML nests more than {MAX_YAML_DEPTH} levels deep "
                    "(an alias that contains itself?)")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend((v, depth + 1) for v in value)
    return None


def too_deep(text: str, python: bool = False) -> int | None:
    """The 0-based line where YAML `text` nests deeper than MAX_YAML_DEPTH, else None.

    To be called before any YAML loader sees the text: the C composer recurses once per
    level, so 30,000 nested `[` crash the process (exit 139) and the Python one raises
    RecursionError. Every level opens with `[`, `{`, `-`, `?` or a new line, so a text with
    fewer of those cannot be too deep (the common case costs a few str.count); otherwise
    the parser's event stream, which does not recurse, is walked until it is.
    `python`: the text is then loaded with Python's loader (TASKS.yaml), which accepts some
    of what libyaml refuses: where libyaml refuses it, Python's parser walks it too (~7x
    slower; an atom's load is libyaml's, which refuses the same text, so it needs no walk).
    """
    bound = sum(map(text.count, ("[", "{", "-", "?", "\n")))
    if bound < MAX_YAML_DEPTH:
        return None
    import yaml

    opening = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    closing = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    # libyaml's parser first (fast); where it refuses the text and Python's loader is to
    # load it, Python's, which accepts some of what libyaml refuses (a "\ud800" escape) and
    # so may go on to load it with its recursive composer: the walk must get as far as the
    # loader will
    fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for loader in dict.fromkeys((fast, yaml.SafeLoader) if python else (fast,)):
        depth = 0
        try:
            for event in yaml.parse(text, Loader=loader):
                if isinstance(event, opening):
                    depth += 1
                    if depth > MAX_YAML_DEPTH:
                        return event.start_mark.line if event.start_mark is not None else 0
                elif isinstance(event, closing):
                    depth -= 1
            return None
        except yaml.YAMLError as e:
            # libyaml 0.2.6 (PyYAML 6.0.4's wheels) stops at 1,000 levels, and in a flow
            # collection its scanner does so before the parser yields the levels counted here
            if "maximum nesting depth" in str(getattr(e, "problem", "")):
                mark = getattr(e, "problem_mark", None)
                return mark.line if mark is not None else 0
    return None  # every parser refused the text: the load says what is wrong, with its line


@functools.cache
def safe_loader(base: Any = None) -> Any:
    """A safe YAML loader (`base`: CSafeLoader where PyYAML has it) for which a key that a
    mapping repeats is an error with its line, not a silent overwrite (the last `status:`
    would win)."""
    import yaml

    base = base or getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Checked(base):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *base`: what it merges may be overridden
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node)
                    except TypeError:  # an unhashable key: the load itself refuses it
                        continue
                    if first is not key_node:
                        above = key_node.start_mark.line - first.start_mark.line
                        where = (f"{above} line{'s' if above > 1 else ''} above" if above
                                 else "earlier on this line")
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {str(key)[:60]!r} (also {where}): "
                            "keep one", key_node.start_mark)
            return super().construct_mapping(node, deep)

    return Checked


def _lenient_loader() -> Any:
    """A SafeLoader that leaves timestamps it cannot build (month 13, day 45) as strings."""
    import yaml

    class Lenient(safe_loader(yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def timestamp(loader: yaml.SafeLoader, node: Any) -> Any:
        try:
            return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
        except ValueError:
            return loader.construct_scalar(node)

    Lenient.add_constructor("tag:yaml.org,2002:timestamp", timestamp)
    return Lenient


def key_lines(text: str) -> dict[str, int]:
    """1-based line of each top-level frontmatter key in `text` ({} without frontmatter)."""
    try:
        span = locate(text)
    except AtomParseError:
        return {}
    lines: dict[str, int] = {}
    # the opening fence is line 1; only the frontmatter is split, never the body
    for number, line in enumerate(text[span.fm_start:span.fm_end].split("\n"), start=2):
        m = _TOP_KEY.match(line.rstrip("\r"))
        if m:
            lines.setdefault(m.group(1), number)
    return lines


def normalize(value: Any) -> Any:
    """Make a YAML value JSON-safe: dates become ISO strings, odd types become strings."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None and value.utcoffset() == dt.timedelta(0):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, set, frozenset, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# --- writing ---------------------------------------------------------------------------------


def set_keys(text: str, updates: dict[str, Any], path: str = "<string>") -> str:
    """Return `text` with the top-level frontmatter keys in `updates` set to their values.

    Every other byte (other keys, their order, comments, the body, BOM, line endings)
    is kept. A key whose value is None is removed. New keys go at the end of the block.
    """
    span = locate(text, path)
    eol = "\r\n" if text.endswith("\r\n", 0, span.fm_start) else "\n"
    block = split_lines(text[span.fm_start:span.fm_end])
    before = load_mapping(text[span.fm_start:span.fm_end], path, 2)
    pending = dict(updates)
    out: list[str] = []
    i = 0
    while i < len(block):
        m = _TOP_KEY.match(block[i])
        end = _value_end(block, i) if m else i + 1
        if m and m.group(1) in pending:
            key = m.group(1)
            value = pending.pop(key)
            if value is not None:
                out.append(f"{key}: {yaml_scalar(value)}{_line_end(block[end - 1], eol)}")
        else:
            out.extend(block[i:end])
        i = end
    for key, value in pending.items():
        if value is None:
            continue
        if out and not out[-1].endswith("\n"):
            out[-1] += eol
        out.append(f"{key}: {yaml_scalar(value)}{eol}")
    new_text = text[:span.fm_start] + "".join(out) + text[span.fm_end:]
    expected = {k: v for k, v in {**before, **normalize(updates)}.items() if v is not None}
    if parse(new_text, path).meta != expected:
        # the key's value spanned lines in a shape we do not rewrite safely
        raise AtomParseError(path, f"cannot safely rewrite {', '.join(updates)}: "
                             "put each of these keys on a single line")
    return new_text


def _value_end(block: list[str], i: int) -> int:
    """Index after the last line of the value that starts at block[i]."""
    end = i + 1
    j = i + 1
    while j < len(block):
        line = block[j]
        stripped = line.strip()
        if line[:1] in (" ", "\t") or (line.startswith("-") and not _FENCE.match(line)):
            end = j + 1
        elif stripped and not stripped.startswith("#"):
            break
        j += 1
    return end


def _line_end(line: str, default: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith("\n"):
        return "\n"
    return default
