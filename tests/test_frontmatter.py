"""Frontmatter: every quirk, the key-only writer, and the fast path proven equal to YAML."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cortexfs import frontmatter as fm
from cortexfs.errors import AtomParseError

# --- parsing quirks ----------------------------------------------------------------------------


def test_plain_atom() -> None:
    doc = fm.parse("---\nid: EXP-001\ntags: [a, b]\n---\n\nBody.\n")
    assert doc.meta == {"id": "EXP-001", "tags": ["a", "b"]}
    assert doc.body == "\nBody.\n"
    assert doc.body_line == 5


def test_bom_is_skipped() -> None:
    doc = fm.parse("\ufeff---\nid: EXP-001\n---\nBody\n")
    assert doc.meta == {"id": "EXP-001"}
    assert doc.body == "Body\n"


def test_crlf() -> None:
    doc = fm.parse("---\r\nid: EXP-001\r\ntags: [a, b]\r\nsummary: \"x\"\r\n---\r\nBody\r\n")
    assert doc.meta == {"id": "EXP-001", "tags": ["a", "b"], "summary": "x"}
    assert doc.body == "Body\r\n"
    assert doc.body_line == 6


@pytest.mark.parametrize("value, expected", [
    ("2026-03-09", "2026-03-09"),
    ('"2026-03-09"', "2026-03-09"),
    ("2026-04-16T03:12:21.074Z", "2026-04-16T03:12:21.074000Z"),
    ("2026-04-16 03:12:21", "2026-04-16T03:12:21"),
])
def test_dates_become_iso_strings(value: str, expected: str) -> None:
    assert fm.parse(f"---\ndate: {value}\n---\n").meta["date"] == expected


def test_impossible_date_stays_text() -> None:
    assert fm.parse("---\ndate: 2026-13-45\n---\n").meta["date"] == "2026-13-45"


@pytest.mark.parametrize("block", ["", "\n", "# only a comment\n", "   \n"])
def test_empty_frontmatter(block: str) -> None:
    assert fm.parse(f"---\n{block}---\nBody\n").meta == {}


def test_dashes_inside_the_body_are_not_a_fence() -> None:
    text = "---\nid: K-001\n---\nIntro\n\n---\n\nid: not-frontmatter\n---\n"
    doc = fm.parse(text)
    assert doc.meta == {"id": "K-001"}
    assert doc.body == "Intro\n\n---\n\nid: not-frontmatter\n---\n"


def test_closing_fence_may_be_dots_or_have_trailing_space() -> None:
    assert fm.parse("---\nid: K-1\n... \nB").body == "B"
    assert fm.parse("---  \nid: K-1\n---\t\nB").meta == {"id": "K-1"}


def test_a_longer_dash_line_is_not_a_fence() -> None:
    with pytest.raises(AtomParseError, match="not closed"):
        fm.parse("---\nid: K-1\n----\nBody\n")


def test_key_named_content() -> None:
    doc = fm.parse("---\ncontent: mine\nid: K-001\n---\nthe body\n")
    assert doc.meta == {"content": "mine", "id": "K-001"}
    assert doc.body == "the body\n"


@pytest.mark.parametrize("text, message, line", [
    ("no fence\n", "no frontmatter", 1),
    ("", "no frontmatter", 1),
    ("---\nid: EXP-001\nbody without a closing fence\n", "not closed", 1),
    ("---\n- a\n- b\n---\n", "not a list", 2),
    ("---\njust a string\n---\n", "not a str", 2),
    ("---\nid: EXP-001\ntags: [a, b\n---\n", "invalid YAML", 4),
    ("---\nid: EXP-001\nsummary: a: b\n---\n", "invalid YAML", 3),
    ("---\nid: x\n  bad: indent\n---\n", "invalid YAML", 3),
])
def test_bad_frontmatter_reports_file_and_line(text: str, message: str, line: int) -> None:
    with pytest.raises(AtomParseError) as info:
        fm.parse(text, "EXP-001.md")
    assert message in info.value.reason
    assert info.value.line == line
    assert str(info.value).startswith(f"EXP-001.md:{line}: ")


def test_unsafe_yaml_is_refused() -> None:
    with pytest.raises(AtomParseError, match="invalid YAML"):
        fm.parse("---\nx: !!python/object/apply:os.system ['true']\n---\n")


def test_binary_oversized_and_non_utf8_files(tmp_path: Path) -> None:
    binary = tmp_path / "EXP-001.md"
    binary.write_bytes(b"---\nid: EXP-001\n---\n\x00\x01")
    with pytest.raises(AtomParseError, match="binary"):
        fm.read(binary)
    big = tmp_path / "EXP-002.md"
    big.write_bytes(b"---\nid: EXP-002\n---\n" + b"x" * fm.MAX_ATOM_BYTES)
    with pytest.raises(AtomParseError, match="byte limit"):
        fm.read(big)
    latin = tmp_path / "EXP-003.md"
    latin.write_bytes("---\nsummary: café\n---\n".encode("latin-1"))
    with pytest.raises(AtomParseError, match="not UTF-8"):
        fm.read(latin)
    with pytest.raises(AtomParseError, match="cannot read"):
        fm.read(tmp_path / "missing.md")


BILLION_LAUGHS = "".join(
    [f"id: EXP-001\nl0: &l0 [{', '.join(['lol'] * 9)}]\n"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)])


@pytest.mark.parametrize(("fm_text", "message"), [
    ("x: &a [*a]\n", "alias that contains itself"),  # a list that holds itself
    ("x: &a {k: *a}\n", "alias that contains itself"),
    (BILLION_LAUGHS, "expands to more than"),  # 9**9 values from a 400-byte block
    ("x: " + "[" * 100 + "]" * 100 + "\n", "nests more than"),
])
def test_alias_loops_bombs_and_deep_nesting_are_refused(fm_text: str, message: str) -> None:
    with pytest.raises(AtomParseError, match=message) as e:
        fm.parse(f"---\n{fm_text}---\nbody\n", "EXP-001.md")
    assert e.value.line == 2 and "write the values out" in str(e.value)


def test_depth_is_measured_as_far_as_any_loader_reads() -> None:
    """libyaml refuses a "\\ud800" escape that Python's loader accepts: the depth check walked
    with libyaml only, gave up there, and TASKS.yaml (loaded by the Python composer, which
    recurses) crashed `cortex tasks list` and `cortex validate` with a RecursionError."""
    from cortexfs import tasks

    text = ('tasks:\n  - id: T-1\n    text: "\\ud800"\n    status: todo\n    why:\n  '
            + "- " * 30000 + "x\n")
    with pytest.raises(yaml.YAMLError):
        yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert fm.too_deep(text, python=True) == 5
    assert fm.too_deep(text) is None  # (an atom's load is libyaml's: it refuses the escape)
    with pytest.raises(AtomParseError, match="invalid YAML"):
        fm.parse(f"---\n{text}---\n", "EXP-001.md")
    parsed = tasks.parse(text, Path("TASKS.yaml"))
    assert [p.message for p in parsed.problems] == \
        ["the YAML nests more than 64 levels deep: write the tasks out plainly"]


def test_plain_aliases_still_load() -> None:
    doc = fm.parse("---\ntags: &t [a, b]\nkeywords: *t\n---\n")
    assert doc.meta == {"tags": ["a", "b"], "keywords": ["a", "b"]}


def test_a_directory_or_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "EXP-001.md"
    folder.mkdir()
    with pytest.raises(AtomParseError, match="a directory, not an atom file"):
        fm.read(folder)
    fifo = tmp_path / "EXP-002.md"
    os.mkfifo(fifo)  # opening it for reading without O_NONBLOCK waits for a writer forever
    with pytest.raises(AtomParseError, match="special file"):
        fm.read(fifo)


def test_locate_spans() -> None:
    text = "\ufeff---\r\nid: A\r\n---\r\nbody"
    span = fm.locate(text)
    assert text[span.fm_start:span.fm_end] == "id: A\r\n"
    assert text[span.body_start:] == "body"
    assert span.body_line == 4
    assert fm.locate("---\n---").body_start == len("---\n---")


def test_key_lines() -> None:
    assert fm.key_lines("---\nid: A\n# c\ntags:\n  - a\nsummary: s\n---\n") == {
        "id": 2, "tags": 4, "summary": 6}
    assert fm.key_lines("no frontmatter") == {}


# --- the key-only writer -----------------------------------------------------------------------


ATOM = (
    "---\n"
    "# a comment the tool must keep\n"
    "id: EXP-042\n"
    "date: 2026-03-09\n"
    "summary: \"Initial extraction\"   # trailing comment\n"
    "tags: [registry, data-analysis]\n"
    "refs: 2\n"
    "last-ref: \"2026-04-16T03:12:21.074Z\"\n"
    "links:\n"
    "  - PAT-002\n"
    "---\n"
    "\n"
    "# EXP-042\n"
    "---\n"
    "refs: 99\n"
)


def test_set_keys_changes_only_those_keys() -> None:
    new = fm.set_keys(ATOM, {"refs": 3, "last-ref": "2026-05-01T00:00:00.000Z"})
    assert new == ATOM.replace("refs: 2\n", "refs: 3\n").replace(
        '"2026-04-16T03:12:21.074Z"', '"2026-05-01T00:00:00.000Z"')
    assert fm.parse(new).meta["refs"] == 3


def test_set_keys_appends_missing_keys_and_removes_none() -> None:
    text = "---\nid: EXP-001\n---\nBody\n"
    added = fm.set_keys(text, {"refs": 1, "last-ref": "2026-05-01T00:00:00.000Z"})
    assert added == ('---\nid: EXP-001\nrefs: 1\nlast-ref: "2026-05-01T00:00:00.000Z"\n'
                     "---\nBody\n")
    assert fm.set_keys(added, {"refs": None, "last-ref": None}) == text


def test_set_keys_keeps_crlf_and_bom() -> None:
    text = "\ufeff---\r\nid: EXP-001\r\nrefs: 1\r\n---\r\nBody\r\n"
    assert fm.set_keys(text, {"refs": 2}) == text.replace("refs: 1", "refs: 2")
    assert fm.set_keys(text, {"last-ref": "x"}) == text.replace(
        "refs: 1\r\n", "refs: 1\r\nlast-ref: x\r\n")


def test_set_keys_on_a_multi_line_value() -> None:
    text = "---\nid: EXP-001\nrefs:\n  7\nlinks:\n  - K-001\n  - K-002\ntags: [a]\n---\nB\n"
    assert fm.set_keys(text, {"refs": 8}) == (
        "---\nid: EXP-001\nrefs: 8\nlinks:\n  - K-001\n  - K-002\ntags: [a]\n---\nB\n")
    assert fm.set_keys(text, {"links": ["K-003"]}) == (
        "---\nid: EXP-001\nrefs:\n  7\nlinks: [K-003]\ntags: [a]\n---\nB\n")


def test_set_keys_refuses_a_shape_it_cannot_rewrite() -> None:
    text = "---\nid: EXP-001\nrefs: >\n  7\n\n  8\n---\nB\n"
    with pytest.raises(AtomParseError, match="cannot safely rewrite"):
        fm.set_keys(text, {"refs": 1, "x": {"nested": 1}})


def test_set_keys_without_frontmatter_fails() -> None:
    with pytest.raises(AtomParseError, match="no frontmatter"):
        fm.set_keys("Body only\n", {"refs": 1})


# --- the fast path equals YAML ------------------------------------------------------------------


def _typed(value: Any) -> Any:
    """A value with its types spelled out, so that 1 != True != 1.0 when comparing."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, value)


def _yaml_says(text: str) -> Any:
    """What the YAML library + normalize make of `text`; the exception class if it fails."""
    try:
        data = yaml.load(text, Loader=yaml.CSafeLoader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, OverflowError) as e:
        return type(e)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return "not a mapping"
    return _typed({str(k): fm.normalize(v) for k, v in data.items()})


TRICKY = [
    "yes", "Yes", "YES", "yEs", "no", "NO", "on", "Off", "y", "n", "true", "False", "null",
    "Null", "NULL", "nUll", "~", "<<", "=", "0", "00", "007", "08", "0x1F", "0o17", "0b101",
    "1_000", "1:30", "190:20:30", "1:30.5", ".5", "5.", "1e3", "1.0e+3", ".inf", "-.Inf",
    ".nan", "+1", "-1", "-0", "12345678901234567890", "2026-03-09", "2026-3-9", "2026-02-30",
    "2026-13-45", "2026-03-09T10:00:00Z", "2026-03-09 10:00:00", "2026-03-09t10:00:00.5+01:00",
    "EXP-001", "K-12", "PAT-003", "a b", "a  b", "x:y", "http://x.y/z", "a#b", "a #b", "a: b",
    "a:", "-", "--", "- a", "-a", "?", "?a", ":a", "!a", "&a", "*a", "|", ">", "%a", "@a", "`a",
    "'a", '"a', "a'b", 'a"b', "[a]", "{a}", "a,b", "a]", "a}", "...", "...a", "---", "é", "日本",
    "\u2028", "\x85", "\ufeff", "\t", "a\tb", "\\", "a\\nb", "", " ", "#",
]
_ALPHABET = st.sampled_from(list("aZ09 :#-'\",[]{}!&*|>%@`~?.+_\\\té\u2028"))
text_piece = st.one_of(st.sampled_from(TRICKY), st.text(_ALPHABET, max_size=8))
scalar = st.one_of(
    text_piece,
    text_piece.map(lambda s: f'"{s}"'),
    text_piece.map(lambda s: f"'{s}'"),
    st.builds(lambda a, b: a + b, text_piece, text_piece),
)
flow_list = st.lists(scalar, max_size=4).flatmap(
    lambda items: st.sampled_from([", ", ",", " , ", ",  "]).map(
        lambda sep: "[" + sep.join(items) + "]"))
key = st.one_of(
    st.sampled_from(["id", "date", "tags", "content", "summary", "yes", "on", "null", "No",
                     "True", "a.b", "_x", "last-ref", "key-", "y", "n", "x1"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,6}", fullmatch=True),
)
sep = st.sampled_from([": ", ":  ", ":", ":\t", " : ", ": \t"])
tail = st.sampled_from(["", "", "", " ", "  ", " # c", "#c", "\t"])


@st.composite
def block_list(draw: st.DrawFn) -> str:
    indent = draw(st.sampled_from(["", "  ", "    ", " "]))
    items = draw(st.lists(scalar, min_size=1, max_size=3))
    dash = draw(st.sampled_from(["- ", "-  ", "-"]))
    lines = [f"{indent}{dash}{item}" for item in items]
    if draw(st.booleans()) and len(lines) > 1:
        lines[-1] = " " + lines[-1]  # a ragged indent
    return "\n" + "\n".join(lines)


@st.composite
def line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["kv"] * 6 + ["list", "block", "comment", "blank", "odd"]))
    if kind == "comment":
        return draw(st.sampled_from(["# c", "#", "  # indented", "#: x"]))
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "  "]))
    if kind == "odd":
        return draw(st.sampled_from(["- item", "  more", "? k", "key", "%YAML 1.1", "&a k: v",
                                     "k: &a v", "k: *a", "k: !!str 1", "k: |", "k: >-",
                                     "'q': v", '"q": v', "[a]: b", "k: {a: 1}"]))
    value = draw(flow_list if kind == "list" else scalar)
    if kind == "block":
        return f"{draw(key)}:{draw(st.sampled_from(['', ' ']))}{draw(block_list())}"
    return f"{draw(key)}{draw(sep)}{value}{draw(tail)}"


@st.composite
def frontmatter_text(draw: st.DrawFn) -> str:
    lines = draw(st.lists(line(), max_size=6))
    text = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    if draw(st.integers(0, 4)) == 0:
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 9)) == 0:
        text = text.replace("\n", "\r", 1)
    return text


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter_text())
@example("id: EXP-001\ndate: 2026-03-09\ntags: [a, b]\nsummary: \"s\"\n")
@example("k: 2026-02-30\n")
@example("k:\n- a\n- b\nj: 1\n")
@example("k: [a b, 'c d', \"e\"]\n")
@example("yes: 1\n")
@example('k: "\n')
@example("k: [\n")
@example("k: []]\n")
@example("k: [a,,b]\n")
def test_fast_path_reads_exactly_what_yaml_reads(text: str) -> None:
    fast = fm.fast_mapping(text)
    if fast is not None:
        assert _typed(fast) == _yaml_says(text), text


def test_fast_path_accepts_the_everyday_shapes() -> None:
    text = ("# comment\nid: EXP-042\ndate: 2026-03-09\nproject: flywheel\n"
            "summary: \"Initial object registry extraction from 573 artifacts\"\n"
            "tags: [registry, data-analysis, milestone-2.2]\nstatus: superseded:EXP-050\n"
            "executor: Cortex-lab2\nlinks: [PAT-002]\nrefs: 2\n"
            "last-ref: \"2026-04-16T03:12:21.074Z\"\nevidence:\n  - EXP-001\n  - EXP-002\n"
            "priority: amygdala\nempty:\n")
    fast = fm.fast_mapping(text)
    assert fast is not None
    assert _typed(fast) == _yaml_says(text)


@pytest.mark.parametrize("text", [
    "k: 0x1F\n", "k: 1:30\n", "k: .inf\n", "k: 2026-03-09T10:00:00Z\n", "k: a # c\n",
    "k: &a v\n", "k: |\n  x\n", "k: \"a\\nb\"\n", "k:\ta\n", "k: [a, [b]]\n", "k: {a: 1}\n",
    "k: 1\nk: 2\n", "k:\n  - a\n   - b\n", "yes: 1\n", "k: v\r", "k: 1_000\n", "k: 2026-02-30\n",
])
def test_fast_path_refuses_what_it_is_not_sure_of(text: str) -> None:
    assert fm.fast_mapping(text) is None


GENERAL_PATH_IMPORTS = """
import sys
from cortexfs import frontmatter
frontmatter.parse("---\\nid: EXP-001\\ntags: [a, b]\\n---\\nbody\\n")
fast = "frontmatter" in sys.modules or "yaml" in sys.modules
doc = frontmatter.parse("---\\nid: EXP-001\\nnote: |\\n  two\\n  lines\\n---\\n")
assert doc.meta == {"id": "EXP-001", "note": "two\\nlines\\n"}, doc.meta
print(fast, "frontmatter.default_handlers" in sys.modules)
"""


def test_the_general_path_is_python_frontmatter_and_the_fast_path_imports_nothing() -> None:
    # (in a fresh process: this one has imported everything already)
    out = subprocess.run([sys.executable, "-c", GENERAL_PATH_IMPORTS], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_fast_path_results_are_not_shared() -> None:
    first = fm.fast_mapping("tags: [a, b]\n")
    assert first is not None
    first["tags"].append("c")
    assert fm.fast_mapping("tags: [a, b]\n") == {"tags": ["a", "b"]}


def test_date_objects_normalised() -> None:
    assert fm.normalize(dt.date(2026, 3, 9)) == "2026-03-09"
    assert fm.normalize(dt.datetime(2026, 3, 9, 1, 2, 3, tzinfo=dt.UTC)) == "2026-03-09T01:02:03Z"
    assert fm.normalize(float("inf")) == "inf"
    assert fm.normalize({1: {dt.date(2026, 1, 1)}}) == {"1": ["2026-01-01"]}
