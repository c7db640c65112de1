"""Template overrides in $CORTEX_HOME/templates/ are data: they render sandboxed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cortexfs import templates
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project, Store

PACKAGED = templates.package_dir("templates")


def _override(store: Store, name: str, prefix: str) -> Path:
    path = store.templates_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + (PACKAGED / name).read_text())
    return path


@pytest.mark.parametrize("payload", [
    "{% set _ = cycler.__init__.__globals__.os.system('touch {pwned}') %}",
    "{{ joiner.__init__.__globals__.os.popen('touch {pwned}').read() }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os }}",
    "{% set x = [] %}{{ x.append(1) }}",  # no method that changes a value
])
def test_an_index_override_cannot_run_code(cli: Any, project: Project, write_atom: Any,
                                           tmp_path: Path, payload: str) -> None:
    write_atom("EXP-001")
    pwned = tmp_path / "pwned"
    _override(project.store, "index/experiments.md.j2",
              payload.replace("{pwned}", str(pwned)) + "\n")
    result = cli("index", "regen", "--all", "--no-commit")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: template ") and result.stderr.count("\n") == 1
    assert "experiments.md.j2" in result.stderr and "internal error" not in result.stderr
    assert not pwned.exists()


def test_an_atom_override_cannot_run_code_on_cortex_new(cli: Any, project: Project,
                                                         tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    _override(project.store, "atoms/experiment.md.j2",
              f"{{% set _ = cycler.__init__.__globals__.os.system('touch {pwned}') %}}")
    result = cli("new", "exp", "-p", "flywheel", "-s", "x", "-t", "a", "--no-commit")
    assert result.exit_code == 1 and "does what a template may not" in result.stderr
    assert not pwned.exists()
    assert not list((project.root / "experiments").glob("EXP-*.md"))


@pytest.mark.parametrize("expr", ["'x' * 10**9", "[0] * 10**8", "(10 ** 60) ** 60", "2 ** 100000"])
def test_an_override_cannot_build_huge_values(store: Store, expr: str) -> None:
    _override(store, "store/USER.md.j2", f"{{{{ {expr} }}}}")
    with pytest.raises(InvalidInputError, match="store/USER.md.j2"):
        templates.render(store, "store/USER.md.j2")


def test_a_broken_override_is_one_line_naming_the_file(store: Store) -> None:
    _override(store, "store/USER.md.j2", "{% if %}")
    with pytest.raises(InvalidInputError, match=r"templates/store/USER.md.j2 failed"):
        templates.render(store, "store/USER.md.j2")
    _override(store, "store/USER.md.j2", "{{ 1 / 0 }}")
    with pytest.raises(InvalidInputError, match="ZeroDivisionError"):
        templates.render(store, "store/USER.md.j2")


def test_a_linked_override_is_not_loaded(store: Store, tmp_path: Path) -> None:
    secret = tmp_path / "secret.j2"
    secret.write_text("SECRET {{ 1 }}")
    (store.templates_dir / "store").mkdir(parents=True)
    (store.templates_dir / "store" / "USER.md.j2").symlink_to(secret)
    with pytest.raises(InvalidInputError, match="symbolic link"):
        templates.render(store, "store/USER.md.j2")


def test_a_harmless_override_still_renders(cli: Any, project: Project, write_atom: Any) -> None:
    write_atom("EXP-001", summary="the first")
    _override(project.store, "index/experiments.md.j2", "{# a comment #}Custom: {{ total }}\n")
    result = cli("index", "regen", "--all", "--no-commit")
    assert result.exit_code == 0, result.output
    text = (project.root / "experiments" / "index.md").read_text()
    assert text.startswith("Custom: 1\n# Experiments Index") and "the first" in text


def test_a_linked_templates_folder_is_not_loaded(cli: Any, project: Project, write_atom: Any,
                                                 tmp_path: Path) -> None:
    # a synced `templates` link to ~/.ssh with an include would copy a key into index.md,
    # which the next sync pushes
    write_atom("EXP-001")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "index").mkdir(parents=True)
    (elsewhere / "index" / "key").write_text("PRIVATE KEY")
    (elsewhere / "index" / "experiments.md.j2").write_text('{% include "index/key" %}\n')
    project.store.templates_dir.symlink_to(elsewhere)
    result = cli("index", "regen", "--all", "--no-commit")
    assert result.exit_code == 1 and "inside templates, which is a symbolic link" in result.stderr
    assert not any("PRIVATE KEY" in p.read_text() for p in project.root.rglob("*.md"))


def test_a_running_process_sees_an_override_added_or_removed(store: Store) -> None:
    """The MCP server renders for as long as it runs: an override that shadows a packaged
    template it has already rendered is used from the next render on, and its removal too."""
    (store.templates_dir / "project").mkdir(parents=True)
    (store.templates_dir / "project" / "other.md.j2").write_text("unrelated\n")
    packaged = templates.render(store, "project/roadmap.md.j2", project="flywheel",
                                today="2026-05-06")
    assert "flywheel" in packaged
    override = store.templates_dir / "project" / "roadmap.md.j2"
    override.write_text("# Our roadmap of {{ project }}\n")
    assert templates.render(store, "project/roadmap.md.j2", project="flywheel",
                            today="2026-05-06") == "# Our roadmap of flywheel\n"
    override.unlink()
    assert templates.render(store, "project/roadmap.md.j2", project="flywheel",
                            today="2026-05-06") == packaged
