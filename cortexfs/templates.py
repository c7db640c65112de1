"""Jinja templates: the packaged ones, each overridable by a file in $CORTEX_HOME/templates/.

The overrides are data, not code: `cortex sync` brings them in from whoever can push to the
remote, so every template renders in Jinja's ImmutableSandboxedEnvironment (no attribute
starting with `_`, no method that changes a list or dict — `cycler.__init__.__globals__`
and the like are refused), `*` and `**` cannot build huge values, and a template file
that is a symbolic link (or sits in a linked folder) is not loaded. A template that
breaks these rules, or does not compile, is a one-line error naming the file.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs.errors import InvalidInputError

if TYPE_CHECKING:
    import jinja2

    from cortexfs.store import Store

MAX_VALUE = 1_000_000  # characters / items a `*` may build, and the largest `**` result


def package_dir(name: str) -> Path:
    """A data folder shipped with the package: inside it when installed, at the repo root
    in a source checkout or editable install."""
    here = Path(__file__).resolve().parent
    for candidate in (here / f"_{name}", here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cortexfs is installed without its {name}/ folder: reinstall it")


@lru_cache(maxsize=8)
def _environment(override: str | None, home: str | None,
                 overrides: tuple[str, ...] = ()) -> jinja2.Environment:
    """The sandbox for a store whose override folder holds `overrides` (its files), made
    once per set: Jinja reloads a template whose file changed, but keeps serving a packaged
    template that an override added since then shadows (a long-running process, such as
    the MCP server, would not see the new override)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class Loader(jinja2.FileSystemLoader):
        """The store's overrides first, then the packaged templates; an override that is a
        symbolic link, or is reached through one, is not part of the store: refused."""

        def get_source(self, environment: jinja2.Environment,
                       template: str) -> tuple[str, str, Any]:
            if override is not None:
                from cortexfs import wall

                path = os.path.join(override, *template.split("/"))
                if os.path.lexists(path):  # (from the store's root: templates/ may be a link)
                    reason = wall.reason(home or override, path)
                    if reason:
                        raise SecurityError(f"{path} is {reason}")
            return super().get_source(environment, template)

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**":
                if isinstance(right, int) and abs(right) > 64:
                    raise SecurityError(f"the power {right} is too large")
                result = left ** right
            else:
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, (str, list, tuple)) and isinstance(b, int) \
                            and len(a) * b > MAX_VALUE:
                        raise SecurityError("`*` would build a value over "
                                            f"{MAX_VALUE:,} items")
                result = left * right
            if isinstance(result, int) and result.bit_length() > 4096:
                raise SecurityError("the result of `*` or `**` is too large")
            return result

    search = [override] if override else []
    search.append(str(package_dir("templates")))
    return Sandbox(
        loader=Loader(search),
        autoescape=False,  # markdown, not HTML: values are escaped by cortexfs.escape
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def environment(store: Store | None) -> jinja2.Environment:
    if store is None or not store.templates_dir.is_dir():
        return _environment(None, None)
    override = str(store.templates_dir)
    files = tuple(sorted(os.path.relpath(os.path.join(folder, name), override)
                         for folder, _, names in os.walk(override) for name in names))
    return _environment(override, str(store.home), files)


def stamps(store: Store, now_ns: int) -> list[Any] | None:
    """Stat data of every template file there is — the store's overrides (any of which a
    template may include) and the packaged ones — to key what was rendered from them; None
    when one changed within cache.RACY_NS, too recently to vouch for its content."""
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
    """Render template `name` (store override first, then the packaged one), sandboxed; a
    template that fails is an InvalidInputError naming it."""
    import jinja2

    try:
        return environment(store).get_template(name).render(**context)
    except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError,
            AttributeError, RecursionError) as e:  # a template is data: its failure too
        where = store.templates_dir / name if store is not None and (
            store.templates_dir / name).exists() else name
        what = "does what a template may not" if type(e).__name__ == "SecurityError" \
            else "failed"
        problem = " ".join(str(e).split())[:300]
        raise InvalidInputError(
            f"template {where} {what} ({type(e).__name__}: {problem}): fix it, or remove the "
            "override to use the packaged template") from None
