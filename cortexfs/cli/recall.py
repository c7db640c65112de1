"""`cortex recall` (ranked pointers to atoms) and `cortex mcp` (the stdio MCP server)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common
from cortexfs.errors import InvalidInputError
from cortexfs.wording import plural

if TYPE_CHECKING:
    from cortexfs.recall import Hit, RecallResult


def _progress(what: str, done: int, total: int) -> None:
    end = "\n" if done >= total else "\r"
    sys.stderr.write(f"{what}: {done:,}/{total:,}{end}")
    sys.stderr.flush()


def _signals_text(hit: Hit) -> str:
    parts = []
    for name, match in hit.signals.items():
        text = f"{name} #{match.rank}"
        if name == "lexical" and hit.matched:
            words = [w + (f" ~{'/'.join(hit.variants[w])}" if w in hit.variants else "")
                     for w in hit.matched]
            text += f" ({', '.join(words)})"
        parts.append(text)
    return " · ".join(parts)


def _print_hits(result: RecallResult) -> None:
    """The hits as text; on a terminal the query's words in the snippets are highlighted
    (rich), piped they are plain (rich is imported only then: it costs ~40 ms)."""
    color = sys.stdout.isatty()
    console = None
    if color:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
    for n, hit in enumerate(result.hits, start=1):
        marks = "".join(f" [{m}]" for m in hit.marks)
        typer.echo(f"{n:>2}. {typer.style(hit.id, bold=True)}  {hit.project}  "
                   f"{hit.score:.4f}{marks}  {hit.summary}")
        typer.echo(f"    {hit.path}  ·  {_signals_text(hit)}")
        snip = hit.snippet
        if snip is None or not snip.text or (not snip.first and snip.text == hit.summary):
            continue
        where = f"{snip.first}" if snip.first == snip.last else f"{snip.first}-{snip.last}"
        prefix = f"    {where:>7} │ "
        if console is None:
            for line in snip.text.split("\n"):
                typer.echo(prefix + line)
                prefix = " " * (len(prefix) - 2) + "│ "
            continue
        from rich.text import Text

        styled = Text(snip.text)
        for a, b in snip.spans:
            styled.stylize("bold yellow", a, b)
        for part in styled.split("\n"):
            console.print(Text(prefix) + part)
            prefix = " " * (len(prefix) - 2) + "│ "


def recall(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words or atom ids.")],
    project: Annotated[str | None, typer.Option(
        "--project", "-p", help="Search this project only (default: every project).")] = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many atoms to list.")] = 10,
    status: Annotated[str | None, typer.Option(
        "--status", "-s", metavar="STATUS",
        help="Only atoms of this status: active, retired, superseded, invalidated or a "
             "status name (several: commas); `any` searches all with no status ranking. "
             "Default: all, retired ones ranked below active ones.")] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", metavar="exp|k|pat", help="Only atoms of this kind (several: commas).")]
        = None,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", "-t", help="Only atoms with this tag (repeat: all of them).")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DATE|AGE",
        help="Only atoms dated on or after DATE (YYYY-MM-DD) or within AGE (7d, 2w, 3m, "
             "1y).")] = None,
    open_rank: Annotated[int | None, typer.Option(
        "--open", metavar="N",
        help="Print the full text of hit N (1 = best) and count it as a read.")] = None,
    no_dense: Annotated[bool, typer.Option(
        "--no-dense", help="Rank without the dense vectors even if the embed extra is "
                           "installed (faster start).")] = False,
) -> None:
    """Rank the atoms that best match QUERY (BM25 with passages and phrases, dense vectors,
    heat, recency; fused by RRF). Each hit shows the passage it was ranked by.

    Listing hits is not a read; opening one with --open N is (a "recall" access-log line).
    """
    from cortexfs import recall as rc

    fmt = common.output_format()
    if open_rank is not None and open_rank < 1:
        raise InvalidInputError(f"--open takes a hit number from 1 to {k}, not {open_rank}")
    filters = rc.parse_filters(project, kind, status, tag, since)
    store = common.open_store()
    weights = rc.Weights(dense=0.0) if no_dense else rc.DEFAULT_WEIGHTS
    # --open N needs N hits; otherwise --k goes through as given, for recall to check
    want = k if open_rank is None else max(k, open_rank)
    result = rc.recall(store, query, k=want, weights=weights, progress=_progress,
                       filters=filters, snippets=open_rank is None)
    if not result.dense_available and not no_dense:
        note = rc.no_embed_note(store)
        if note:
            typer.secho(f"note: {note}", fg="yellow", err=True)
    if open_rank is not None:
        if open_rank > len(result.hits):
            raise InvalidInputError(f"there is no hit {open_rank}: the query matched "
                                    f"{plural(len(result.hits), 'atom')}")
        hit = result.hits[open_rank - 1]
        opened = rc.read_atom(store, hit.id, hit.project,
                              session=os.environ.get("CORTEX_SESSION", "cli"))
        if fmt == "json":
            common.print_json({"id": opened.id, "project": opened.project,
                               "path": str(opened.path), "text": opened.text})
        else:
            sys.stdout.write(opened.text if opened.text.endswith("\n") else opened.text + "\n")
        return
    common.nothing_left_to_write()
    result.hits = result.hits[:k]
    if fmt == "json":
        common.print_json(result.to_json())
        return
    if not result.hits:
        why = " (no atom is close to it in meaning or shares its rarer words)" \
            if result.abstained else ""
        typer.echo(f"no atom matches {query!r}{why}")
        return
    _print_hits(result)


def mcp() -> None:
    """Serve the store to an agent over stdio (Model Context Protocol).

    Tools to recall, read, add, update, supersede, invalidate, move and remove atoms, list
    projects, keep the task queue, commit, validate, regenerate, check readiness and brief,
    for an agent such as Claude Code (`cortex hooks install --mcp` registers it)."""
    from cortexfs.mcp_server import serve

    serve(common.open_store())


COMMANDS = {"recall": recall, "mcp": mcp}
