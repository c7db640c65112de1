"""`cortex view`: build the store's static site; open it or serve it on loopback."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Annotated

import typer

from cortexfs.cli import common
from cortexfs.errors import InvalidInputError
from cortexfs.wording import plural


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.0f} KB"


def view(
    projects: Annotated[list[str] | None, typer.Argument(
        help="Projects to show (default: every project).", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR", help="Write the site here (default: "
        "$CORTEX_HOME/.cache/site, never committed).")] = None,
    open_: Annotated[bool, typer.Option("--open", help="Open it in the default browser.")]
    = False,
    serve: Annotated[bool, typer.Option(
        "--serve", help="Serve it read-only on http://127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[int | None, typer.Option(
        "--port", help="The port for --serve (default 8765; 0: any free port).",
        show_default=False)] = None,
) -> None:
    """See the store: an offline HTML site with its graph and search.

    Pages for the store, each project (status, tasks, atom tables, timeline, heat), each
    atom (body, frontmatter, backlinks, evidence chain, reads) and each project's graph.
    Rebuilds only the pages whose inputs changed since the last run.
    """
    import gc
    import webbrowser

    from cortexfs.view.build import build

    fmt = common.output_format()
    if port is not None and not serve:
        raise InvalidInputError("--port goes with --serve: add --serve, or leave --port out")
    if port is not None and not 0 <= port <= 65535:
        raise InvalidInputError(f"--port {port} is not a port: use 1 to 65535 (or 0 for any)")
    store = common.open_store()
    # without --serve this process ends after the build: no collection over the build's
    # objects, neither the first one after build() enables the collector again nor the one
    # at exit (~0.4 s after 10,000 atoms)
    freeze = not serve and gc.isenabled()
    if freeze:
        gc.disable()
    result = build(store, projects or None, out)
    if freeze:
        gc.freeze()
        gc.enable()
    if fmt == "json":
        common.print_json(result.to_json())
    else:
        for warning in result.warnings:
            common.warn(warning)
        common.ok(f"site: {result.index}")
        typer.echo(f"{plural(result.atoms, 'atom')} in {plural(result.projects, 'project')}: "
                   f"{plural(result.files, 'file')} "
                   f"({_size(result.bytes)}), {result.written} written, {result.removed} "
                   f"removed, in {result.seconds:.2f} s")
    if not serve:
        if open_:
            webbrowser.open(result.index.as_uri())
        return
    from cortexfs.view import server

    httpd = server.server(result.root, server.DEFAULT_PORT if port is None else port)
    address = server.url(httpd)
    # Ctrl-C (or SIGTERM) is how a server is stopped: not an interruption to run again
    # (cortexfs.interrupt's handler), but the end of the command
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in stops}
    try:
        with httpd, contextlib.suppress(KeyboardInterrupt):  # (leaving it: server_close)
            typer.echo(f"serving {address} (read-only, 127.0.0.1 only); Ctrl-C to stop",
                       err=True)
            if open_:
                webbrowser.open(address)
            httpd.serve_forever()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo(f"stopped serving {address}", err=True)

COMMANDS = {"view": view}
