"""All frontmatter handling: splitting, safe YAML loading, normalising, key-only edits.

Quirks handled here and nowhere else: a UTF-8 BOM, CRLF line endings, PyYAML turning
dates into `date` objects, empty frontmatter, `---` lines inside the body, and keys
named `content` (which python-frontmatter's `loads()` would collide with).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexfs.errors import AtomParseError

BOM = "\ufeff"
MAX_ATOM_BYTES = 1_000_000  # bigger files are not atoms someone wrote by hand: skip them

_FENCE = re.compile(r"^---[ \t]*\r?$")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$")
_TOP_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]|$)")


@dataclass
class Document:
    """A parsed markdown file: normalised frontmatter, body text, and where the body starts."""

    meta: dict[str, Any]
    body: str
    body_line: int  # 1-based line number of the first body line


@dataclass
class _Split:
    bom: str
    lines: list[str]  # every line of the text, line endings kept
    open_idx: int  # index of the opening fence line (always 0)
    close_idx: int  # index of the closing fence line


def _split(text: str, path: str) -> _Split:
    bom = BOM if text.startswith(BOM) else ""
    lines = text[len(bom):].splitlines(keepends=True)
    if not lines or not _FENCE.match(lines[0].rstrip("\n")):
        raise AtomParseError(path, "no frontmatter: the file must start with a line '---'", 1)
    for i in range(1, len(lines)):
        if _CLOSE.match(lines[i].rstrip("\n")):
            return _Split(bom, lines, 0, i)
    raise AtomParseError(path, "frontmatter is not closed: add a line '---' after it", 1)


def parse(text: str, path: str = "<string>") -> Document:
    """Parse a markdown file's text; AtomParseError (with line) when the frontmatter is bad."""
    parts = _split(text, path)
    fm_text = "".join(parts.lines[1:parts.close_idx])
    meta = load_yaml_mapping(fm_text, path, first_line=2)
    body = "".join(parts.lines[parts.close_idx + 1:])
    return Document(meta, body, parts.close_idx + 2)


def read(path: Path) -> Document:
    """Read and parse one file; oversized, binary or undecodable files are AtomParseErrors."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise AtomParseError(str(path), f"cannot read: {e.strerror}") from None
    return parse(decode(raw, str(path)), str(path))


def decode(raw: bytes, path: str) -> str:
    """Bytes of a markdown file as text, refusing what cannot be a hand-written atom."""
    if len(raw) > MAX_ATOM_BYTES:
        raise AtomParseError(path, f"file is {len(raw):,} bytes, over the {MAX_ATOM_BYTES:,} "
                             "byte limit for an atom: split it or move it out of the atom folder")
    if b"\x00" in raw:
        raise AtomParseError(path, "binary file in an atom folder: move it elsewhere")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AtomParseError(path, f"not UTF-8 (byte {e.start}): re-save the file as UTF-8") \
            from None


def load_yaml_mapping(fm_text: str, path: str, first_line: int) -> dict[str, Any]:
    """Safely load YAML frontmatter that must be a mapping (or empty), normalised."""
    import yaml
    from frontmatter.default_handlers import YAMLHandler

    try:
        try:
            data = YAMLHandler().load(fm_text)
        except ValueError:
            # PyYAML builds dates eagerly, so `date: 2026-13-45` raises ValueError (not a
            # YAMLError): keep such impossible dates as text for validation to report.
            data = yaml.load(fm_text, Loader=_lenient_loader())
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
    return {str(k): normalize(v) for k, v in data.items()}


def _lenient_loader() -> Any:
    """A SafeLoader that leaves timestamps it cannot build (month 13, day 45) as strings."""
    import yaml

    class Lenient(yaml.SafeLoader):
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
        parts = _split(text, "<string>")
    except AtomParseError:
        return {}
    lines: dict[str, int] = {}
    for i in range(1, parts.close_idx):
        m = _TOP_KEY.match(parts.lines[i].rstrip("\r\n"))
        if m:
            lines.setdefault(m.group(1), i + 1)
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
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# --- writing ---------------------------------------------------------------------------------


def dump_scalar(value: Any) -> str:
    """A value as inline YAML that loads back to exactly `value`."""
    import yaml

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_dump_flow_item(v) for v in value) + "]"
    text = str(value)
    if _PLAIN_SAFE.match(text):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text, ensure_ascii=False)


_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ ./:+-]*$")
_FLOW_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+-]*$")


def _dump_flow_item(value: Any) -> str:
    if isinstance(value, str) and _FLOW_SAFE.match(value):
        import yaml

        if yaml.safe_load(value) == value:
            return value
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return dump_scalar(value)


def set_keys(text: str, updates: dict[str, Any], path: str = "<string>") -> str:
    """Return `text` with the top-level frontmatter keys in `updates` set to their values.

    Every other byte (other keys, their order, comments, the body, BOM, line endings)
    is kept. A key whose value is None is removed. New keys go at the end of the block.
    """
    parts = _split(text, path)
    lines = parts.lines
    eol = "\r\n" if lines[0].endswith("\r\n") else "\n"
    block = lines[1:parts.close_idx]
    before = load_yaml_mapping("".join(block), path, 2)
    pending = dict(updates)
    out: list[str] = []
    i = 0
    while i < len(block):
        m = _TOP_KEY.match(block[i])
        end = i + 1
        if m:
            end = _value_end(block, i)
        if m and m.group(1) in pending:
            key = m.group(1)
            value = pending.pop(key)
            if value is not None:
                out.append(f"{key}: {dump_scalar(value)}{_line_end(block[end - 1], eol)}")
        else:
            out.extend(block[i:end])
        i = end
    for key, value in pending.items():
        if value is None:
            continue
        if out and not out[-1].endswith("\n"):
            out[-1] += eol
        out.append(f"{key}: {dump_scalar(value)}{eol}")
    new_text = parts.bom + lines[0] + "".join(out) + "".join(lines[parts.close_idx:])
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
