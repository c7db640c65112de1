"""cortexfs.layout: the store's names, spelled once; and the package's import graph."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cortexfs import layout
from cortexfs.atoms import ATOM_ID, KINDS, kind_of_filename, kind_of_id

PACKAGE = Path(__file__).resolve().parent.parent / "cortexfs"

NAMES = ["EXP-001.md", "EXP-042b.md", "K-7.md", "PAT-0100.md", "EXP-1B.md", "K-1a.md",
         "PAT-.md", "exp-001.md", "EXP-001.md.swp", "index.md", "EXP-001", "EXP--1.md",
         "EXP-1bb.md", "EXP-b.md", "K-\u0661\u0662.md", "K-\u00b2.md", "EXP-1\u00e9.md",
         "K-1 .md", "PAT-1.MD", "EXP-1-2.md", ".md", "K-1.md.md", "EXP-0001a.md", "PAT-+1.md",
         "K- 1.md", "K-1_0.md", "PAT-1\n.md"]


def test_resolve_home_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "env"))
    assert layout.resolve_home("/x/opt") == "/x/opt"
    assert layout.resolve_home(tmp_path / "p") == str(tmp_path / "p")
    assert layout.resolve_home() == str(tmp_path / "env")
    monkeypatch.delenv("CORTEX_HOME")
    assert layout.resolve_home() == str(Path.home() / ".cortex")
    monkeypatch.chdir(tmp_path)
    assert layout.resolve_home("rel") == str(tmp_path / "rel")


def test_kinds_take_their_folders_and_prefixes_from_the_layout() -> None:
    assert {k.prefix: k.folder for k in KINDS} == layout.KIND_FOLDERS
    assert {k.folder for k in KINDS} == layout.ATOM_FOLDERS
    assert {k.folder for k in KINDS} < set(layout.PROJECT_FOLDERS)


def test_atom_folder_agrees_with_the_atoms_module() -> None:
    """The hook's regex-free reading of a file name is the loader's."""
    for name in NAMES:
        kind = kind_of_filename(name)
        assert layout.atom_folder(name) == (kind.folder if kind else None), name
        assert bool(kind and kind.file_re.match(name)) == (kind is not None), name


def test_split_id_agrees_with_the_id_patterns() -> None:
    for name in NAMES:
        text = name.removesuffix(".md")
        kind = kind_of_id(text)
        parts = layout.split_id(text)
        whole = ATOM_ID.fullmatch(text) is not None
        assert (parts is not None) == (kind is not None) == whole, text
        if parts is not None and kind is not None:
            m = kind.id_re.match(text)
            assert m is not None
            suffix = (*m.groups(), None)[1] or ""
            assert parts == (kind.prefix, int(m.group(1)), suffix), text


def test_lock_names_are_one_spelling_for_both_users(tmp_path: Path) -> None:
    """`cortex new` and sync's renumbering must take the same ids lock."""
    from cortexfs import authoring, scaffold
    from cortexfs.atoms import EXPERIMENT
    from cortexfs.store import Store

    store = Store(tmp_path)
    scaffold.init_store(store)
    project, _ = scaffold.new_project(store, "p")
    assert authoring.id_lock(project, EXPERIMENT) == \
        store.locks_dir / layout.ids_lock("p", EXPERIMENT.prefix)


def test_the_hook_imports_only_the_standard_library() -> None:
    """The hook runs after every tool call: its import path (layout included) stays stdlib
    and light (no re, no pathlib, nothing from site-packages)."""
    code = ("import sys; before = set(sys.modules); import cortexfs.hook; "
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    loaded = set(out.stdout.split())
    ours = {m for m in loaded if m.split(".")[0] == "cortexfs"}
    assert ours == {"cortexfs", "cortexfs.hook", "cortexfs.accesslog", "cortexfs.layout"}
    others = {m.split(".")[0] for m in loaded - ours}
    assert others <= set(sys.stdlib_module_names) | {"__future__"}, others
    assert not others & {"re", "pathlib", "json", "typing", "dataclasses"}, others


# --- the names are spelled only in layout.py ----------------------------------------------------

# Literals that name a part of the store: outside layout.py, a module uses layout's name.
# (Words that are also JSON keys or user vocabulary, such as "projects" or "knowledge", are
# left out: the test would flag `{"projects": [...]}` in a command's output.)
SPELLED_ONCE = {layout.ACCESS_LOG, layout.META, layout.CACHE, layout.LOCKS, layout.INDEX,
                layout.CORTEX_MD, layout.OVERVIEW_MD, layout.HIPPOCAMPUS_MD,
                layout.HIPPOCAMPUS_DIR, layout.STATUS_MD, layout.ISSUES_MD, layout.TASKS_FILE,
                layout.TASKS_ARCHIVE, layout.DEFAULT_HOME, layout.GENERATED_START,
                layout.GENERATED_END, layout.CONTEXT_PREFIX, layout.PROJECTS_PATH,
                layout.HOOK_LOG, layout.WATCH_PID, "EXP-", "K-", "PAT-"}
GIT_LOCKS = {".lock", "index.lock", "HEAD.lock",  # git's own, in .git/
             "gc.pid.lock", "packed-refs.lock", "logs/HEAD.lock",  # (what a killed gc leaves)
             "objects/info/commit-graph.lock"}


def test_store_names_are_spelled_only_in_layout() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "layout.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings:
                text = node.value
                if text in SPELLED_ONCE or (text.endswith(".lock") and text not in GIT_LOCKS):
                    found.append(f"{rel}:{node.lineno}: {text!r}")
    assert found == [], "\n".join(found)


# --- no import cycle among cortexfs modules -----------------------------------------------------


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The cortexfs modules `name` imports, at module level or inside functions (not under
    TYPE_CHECKING: those never run). `from pkg import sub` imports the submodule `sub`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def import_cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


# Mutual imports left, each named with why (a new cycle fails the test):
KNOWN_CYCLES = [
    # a commit first finishes what a killed `cortex sync` left (nothing is lost: the next
    # command alone recovers), and a sync commits: a recursion in behaviour, not in layout
    ["cortexfs.commit", "cortexfs.sync"],
    # escape.yaml_scalar reads plain scalars back with frontmatter's parser, frontmatter
    # writes through escape: issue 13-E (one escaper module) ends it
    ["cortexfs.escape", "cortexfs.frontmatter"],
]


def test_no_import_cycle() -> None:
    assert [c for c in import_cycles() if c not in KNOWN_CYCLES] == []
