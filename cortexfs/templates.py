"""Jinja templates: the packaged ones, each overridable by a file in $CORTEX_HOME/templates/."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

    from cortexfs.store import Store


def package_dir(name: str) -> Path:
    """A data folder shipped with the package: inside it when installed, at the repo root
    in a source checkout or editable install."""
    here = Path(__file__).resolve().parent
    for candidate in (here / f"_{name}", here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cortexfs is installed without its {name}/ folder: reinstall it")


@lru_cache(maxsize=8)
def _environment(override: str | None) -> jinja2.Environment:
    import jinja2

    search = [override] if override else []
    search.append(str(package_dir("templates")))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        autoescape=False,  # markdown, not HTML: escaping is done per table cell
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def environment(store: Store | None) -> jinja2.Environment:
    override = store.templates_dir if store is not None else None
    return _environment(str(override) if override and override.is_dir() else None)


def stamps(store: Store, now_ns: int) -> list[Any] | None:
    """Stat data of every template file there is — the store's overrides (any of which a
    template may include) and the packaged ones — to key what was rendered from them; None
    when one changed within cache.RACY_NS, too recently to vouch for its content."""
    import os

    from cortexfs.cache import stamp

    out: list[Any] = []
    for root in (store.templates_dir, package_dir("templates")):
        for folder, _, names in sorted(os.walk(root)):
            for name in sorted(names):
                found = stamp(os.path.join(folder, name), now_ns)
                if found is None:
                    return None
                out.append((folder, name, found))
    return out


def render(store: Store | None, name: str, **context: Any) -> str:
    """Render template `name` (store override first, then the packaged one)."""
    return environment(store).get_template(name).render(**context)
