"""Hypothesis strategies for hostile input: hook payloads, frontmatter, TASKS.yaml.

Shared by tests/test_fuzz.py (in-process, a fixed seed, under a minute) and
benchmarks/fuzz.py (real hook processes, as many payloads as asked). `paths` are the
paths a payload may name: atoms of the store, links out of it, files outside it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from hypothesis import strategies as st

ODD_TEXT = st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=30)
NASTY = st.sampled_from(["", "\0", "\ud800", "\udcff", "..", "../..", "~", "~root", "$HOME",
                         "*", "?", "[", "[!a]", "/*/*/*/*/*/zz*", "**", "-", "--", "'", '"',
                         "\\", "\n", "\r\n", "#", "`", "$(", "<<EOF", "&", "|", ";", " ",
                         "\t", "\u2028", "é", "🧠", "EXP-1.md", "K-001.md", "PAT-1.md",
                         "experiments", "_meta", "index.md", "x" * 5000])


@functools.cache  # the big ones are built once, not once per example
def deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


@functools.cache
def indented(depth: int) -> str:
    """A block list each of whose items is one space deeper (4.5 MB at 3,000)."""
    return "\n" + "".join(" " * i + "- \n" for i in range(1, depth))


@functools.cache
def dashes(depth: int) -> str:
    return "\n  " + "- " * depth + "x"


@functools.cache
def long_list(count: int) -> tuple[str, ...]:
    return tuple(f"/x/d{i % 50}/EXP-{i}.md" for i in range(count))


@functools.cache
def many_keys(count: int) -> list[str]:
    return [f"k{i}: v" for i in range(count)]


@st.composite
def path(draw: Any, paths: list[str]) -> str:
    """A path a tool call may name: a real one, a mangled one, or junk."""
    how = draw(st.integers(0, 6))
    if how <= 2 and paths:
        return str(draw(st.sampled_from(paths)))
    if how == 3 and paths:
        base = draw(st.sampled_from(paths))
        return base + draw(NASTY) if draw(st.booleans()) else draw(NASTY) + base
    if how == 4:
        return "/".join(draw(st.lists(NASTY, max_size=6)))
    if how == 5:
        return draw(ODD_TEXT)
    return draw(st.sampled_from(["/", ".", "", "/tmp", "/*/*/*/*/zz*", "/proc/self/fd/0",
                                 "/dev/zero", "/dev/stdin", "~/.cortex/context/**/EXP-*"]))


@st.composite
def command(draw: Any, paths: list[str]) -> str:
    """A shell line: reading programs, operands, separators, quotes, heredocs, junk."""
    programs = st.sampled_from(["cat", "head -n 5", "tail -c1", "less", "grep -rn x",
                                "rg -l y", "sed -n 1p", "sed -i s/a/b/", "awk '{print}'",
                                "cd", "sudo -u me", "timeout 5 cat", "nl -ba", "bat",
                                "env A=1 cat", "x=1", "echo", "(", ")", "{", "}", "!"])
    pieces = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            pieces.append(draw(programs))
        elif kind in (1, 2):
            pieces.append(draw(path(paths)))
        elif kind == 3:
            pieces.append(draw(st.sampled_from(["|", "||", "&&", ";", "&", "\n", "`", "2>&1",
                                                "<", ">", ">>", "<<EOF\nx\nEOF\n", "# c",
                                                "\\\n", "'", '"', "$(cat x)", "<<<", "<<-X"])))
        elif kind == 4:
            pieces.append(draw(NASTY))
        else:
            pieces.append(draw(ODD_TEXT))
    line = " ".join(pieces)
    if draw(st.integers(0, 40)) == 0:  # now and then a long one
        line = draw(st.sampled_from(["cat ", "cat '", "a" * 10, "cat a; " * 3])) + "a" * 200_000
    return line


@st.composite
def tool_call(draw: Any, paths: list[str]) -> dict[str, Any]:
    tool = draw(st.sampled_from(["Read", "Grep", "Bash", "Read", "Grep", "Bash", "Write",
                                 "read", "", "Edit"]))
    names = st.lists(path(paths), max_size=20)
    if tool == "Read":
        tool_input: Any = {"file_path": draw(path(paths))}
    elif tool == "Grep":
        tool_input = {"pattern": draw(ODD_TEXT), "path": draw(path(paths)),
                      "output_mode": draw(st.sampled_from(["content", "files_with_matches",
                                                           "count", None]))}
    else:
        tool_input = {"command": draw(command(paths))}
    response: Any = draw(st.one_of(
        st.none(), st.integers(), ODD_TEXT, names,
        st.fixed_dictionaries({}, optional={
            "filenames": names, "numFiles": st.integers(-1, 10**9),
            "content": st.lists(st.one_of(path(paths), ODD_TEXT), max_size=30).map("\n".join),
            "stdout": st.lists(path(paths), max_size=20).map("\n".join),
            "output": ODD_TEXT, "mode": ODD_TEXT,
            "file": st.fixed_dictionaries({"filePath": path(paths)})})))
    if draw(st.integers(0, 30)) == 0:  # a long file list (the 600k-name Grep, scaled down)
        response = {"filenames": list(long_list(50_000))}
    call: dict[str, Any] = {"session_id": draw(st.one_of(ODD_TEXT, st.integers(), st.none())),
                            "cwd": draw(st.one_of(path(paths), st.none(), st.integers())),
                            "hook_event_name": "PostToolUse", "tool_name": tool,
                            "tool_input": tool_input, "tool_response": response}
    if draw(st.integers(0, 10)) == 0:  # a wrong shape here or there
        key = draw(st.sampled_from(sorted(call)))
        call[key] = draw(st.one_of(st.none(), st.integers(), ODD_TEXT, st.lists(st.integers())))
    return call


@st.composite
def payload(draw: Any, paths: list[str]) -> bytes:
    """The bytes a hook may get on stdin."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:  # JSON nested deeper than any parser recurses
        return deep(draw(st.sampled_from([10, 1000, 100_000]))).encode()
    text = json.dumps(draw(tool_call(paths)))
    if kind == 2:  # truncated
        return text[:draw(st.integers(0, len(text)))].encode()
    if kind == 3:  # the same, as another encoding
        return text.encode(draw(st.sampled_from(["utf-16", "latin-1", "utf-8-sig"])),
                           errors="replace")
    if kind == 4:  # nested inside
        return ('{"tool_name": "Read", "tool_input": ' + deep(100_000, "{\"a\":", "}")
                + "}").encode()
    return text.encode("utf-8", "surrogatepass")


# --- frontmatter and TASKS.yaml ---------------------------------------------------------------

YAML_VALUES = st.one_of(
    ODD_TEXT, st.integers(), st.sampled_from([
        "", "~", "null", "yes", "no", "2026-13-45", "2026-03-09", "1:30", "0x1F", ".inf", "[]",
        "{}", "[a, b]", "[[a], {b: c}]", "&a [*a]", "*undefined", "!!python/object:os.system",
        "!!binary aGk=", "|\n  block\n  text", ">-\n  folded", "'quoted ''x'''",
        '"esc \\u0041 \\ud800"', "- a\n- b", "a: b: c", "\t tab", "x # comment", "@at",
        "`tick`", "%percent", "<<: *a", "? complex\n: key", "--- x", "... y"]),
    st.sampled_from([10, 64, 65, 100, 30_000]).map(deep),
    st.sampled_from([65, 30_000]).map(lambda d: deep(d, "{a: ", "}")),
    st.sampled_from([70, 3_000]).map(indented),
    st.sampled_from([65, 30_000]).map(dashes),
)
KEYS = st.sampled_from(["id", "date", "project", "summary", "tags", "status", "refs",
                        "last-ref", "links", "evidence", "executor", "priority", "src",
                        "source-experiments", "x", "k" * 200, "ö", "1", "true", "<<", "? a"])


@st.composite
def frontmatter(draw: Any, atom_id: str = "EXP-002") -> str:
    """An atom file's text: mostly plausible frontmatter with hostile values in it."""
    # the text is joined once: a value can be megabytes, and each partial string copied it
    lines = [f"id: {atom_id}", "date: 2026-03-09", "project: flywheel", "summary: s",
             "tags: [a]"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 6))):
        value = draw(YAML_VALUES)
        lines.append("".join((draw(KEYS), ": ", str(value))))
    if draw(st.integers(0, 15)) == 0:
        lines += many_keys(60_000)  # one atom, 60,000 keys
    head = draw(st.sampled_from(["---\n", "---\r\n", "\ufeff---\n", "", "--- \n", "---\r"]))
    tail = draw(st.sampled_from(["\n---\nbody\n", "\n...\n", "\n", "\n---\n---\n"]))
    text = "".join((head, "\n".join(lines), tail))
    if draw(st.integers(0, 12)) == 0:
        text = text.replace("\n", "\r")  # old Mac line endings
    return text


@st.composite
def tasks_file(draw: Any) -> str:
    """A TASKS.yaml: plausible tasks with hostile values, or any YAML at all."""
    if draw(st.integers(0, 4)) == 0:
        return f"tasks: {draw(YAML_VALUES)}\n"
    parts = ["tasks:\n"]  # joined once: a value can be megabytes (see frontmatter)
    for n in range(draw(st.integers(0, 5))):
        task_id = draw(st.sampled_from([f"T-{n + 1}", "T-1", "", '"T-1\\n"', "a b"]))
        parts += ["\n" if n else "", "  - id: ", task_id, "\n    text: ", str(draw(YAML_VALUES)),
                  "\n    status: ", draw(st.sampled_from(['todo', 'done', 'doing', 'x', '']))]
        for _ in range(draw(st.integers(0, 3))):
            key = draw(st.sampled_from(["priority", "depends-on", "why", "completed-at",
                                        "status", "x"]))
            parts += ["\n    ", key, ": ", str(draw(YAML_VALUES))]
    parts.append("\n")
    return "".join(parts)
