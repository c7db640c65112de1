"""`cortex memory lint|stats|prune` (MEMORY.md, neocortex.md v1.0) and `cortex brief`."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common
from cortexfs.errors import InvalidInputError, NotAStoreError
from cortexfs.layout import USER
from cortexfs.wording import plural

if TYPE_CHECKING:
    from cortexfs.commit import Transaction
    from cortexfs.memory_md import PrunePlan
    from cortexfs.store import Store

memory_app = typer.Typer(
    help="MEMORY.md in the neocortex.md v1.0 format: lint, stats, prune.",
    no_args_is_help=True,
)

PathArg = Annotated[Path | None, typer.Argument(
    help="The MEMORY.md to use (default: context/user/MEMORY.md of the store).",
    show_default=False)]
NoCommit = Annotated[bool, typer.Option(
    "--no-commit", help="Write the files but do not commit them (inside a store).")]


def _resolve(path: Path | None) -> tuple[Path, Store | None]:
    """The MEMORY.md to work on and the store it lies in (None when outside any store)."""
    from cortexfs import wall

    if path is None:
        store = common.open_store()
        path = store.context / USER / "MEMORY.md"
        wall.check(store.context, path)  # a linked MEMORY.md or user/ is not the store's
        return path, store
    try:
        store = common.open_store()
    except NotAStoreError:
        return path, None
    inside = path.resolve().is_relative_to(store.home.resolve())
    if path.absolute().is_relative_to(store.context):
        wall.check(store.context, path.absolute())
    return path, store if inside else None


@contextlib.contextmanager
def _writing(store: Store | None, no_commit: bool, keep: Path) -> Iterator[Transaction | None]:
    """A writing command's transaction when the file lies in the store (None outside it)."""
    if store is None:
        yield None
        return
    with common.writing(store, no_commit) as txn:
        txn.keep(keep)
        yield txn
    common.report(txn)


@memory_app.command("lint")
def lint(path: PathArg = None,
         fix: Annotated[bool, typer.Option(
             "--fix", help="Rewrite the header's entries:/tokens: counts (nothing else).")]
         = False, no_commit: NoCommit = False) -> None:
    """Check a MEMORY.md against neocortex.md v1.0; exit 1 on any error.

    Checks the header, the seven sections in order, entry limits and sizes, nx metadata
    and the total tokens."""
    from cortexfs import memory_md

    fmt = common.output_format()
    from cortexfs.commit import Change

    target, store = _resolve(path)
    with _writing(store if fix else None, no_commit, target) as txn:
        report, changed = memory_md.lint_file(target, fix=fix)
        if changed and txn is not None:
            txn.add(Change([target], "memory: refresh MEMORY.md header counts"))
    if fmt == "json":
        common.print_json({**report.to_json(), "fixed": changed})
    else:
        typer.echo(f"{target}: {report.entries:,} entries, ~{report.tokens:,} tokens, "
                   f"{len(report.sections)} sections")
        if changed:
            common.ok("fixed: header entries/tokens counts rewritten")
        elif fix and "header-missing" in {p.code for p in report.problems}:
            common.warn("--fix changed nothing: the file has no neocortex.md header")
        shown, more = report.listed()
        for problem in shown:
            color = "red" if problem.severity == "error" else "yellow"
            typer.secho(str(problem), fg=color)
        for code, count in sorted(more.items()):
            typer.echo(f"… and {count:,} more [{code}]")
        summary = f"{plural(len(report.errors), 'error')}, " \
                  f"{plural(len(report.warnings), 'warning')}"
        if report.ok:
            common.ok(f"ok: {summary}")
        else:
            typer.secho(summary, fg="red")
    if not report.ok:
        raise typer.Exit(1)


@memory_app.command("stats")
def stats(path: PathArg = None) -> None:
    """Entries and tokens per section against neocortex.md's budgets."""
    from cortexfs import memory_md

    fmt = common.output_format()
    target, _store = _resolve(path)
    result = memory_md.stats(memory_md.read(target))
    if fmt == "json":
        common.print_json(result.to_json())
        return
    typer.echo(f"{target}")
    typer.echo(f"{'section':<16} {'entries':>7} {'target':>7} {'max':>5} {'tokens':>8} "
               f"{'budget':>8}  state")
    for s in result.sections:
        target_txt = f"{s.target[0]}–{s.target[1]}" if s.target else "—"
        typer.echo(f"{s.name[:16]:<16} {s.entries:>7} {target_txt:>7} "
                   f"{s.max_entries if s.max_entries is not None else '—':>5} "
                   f"{s.tokens:>8,} {f'~{s.budget:,}' if s.budget else '—':>8}  {s.state}")
    typer.echo(f"{'total':<16} {result.entries:>7} {'~160':>7} {memory_md.MAX_TOTAL_ENTRIES:>5} "
               f"{result.tokens:>8,} {memory_md.MAX_TOTAL_TOKENS:>8,}  "
               f"{'over max' if result.tokens > memory_md.MAX_TOTAL_TOKENS else 'ok'}")
    typer.echo(f"{result.with_metadata} of {result.entries} entries carry nx metadata "
               f"(tokens: characters / 4)")


@memory_app.command("prune")
def prune(path: PathArg = None,
          dry_run: Annotated[bool, typer.Option(
              "--dry-run", help="Report what would happen; write nothing.")] = False,
          as_of: Annotated[str | None, typer.Option(
              "--as-of", metavar="YYYY-MM-DD", help="Judge ages as of this date (default: "
              "today).")] = None, no_commit: NoCommit = False) -> None:
    """Archive MEMORY.md entries unused for 90+ days, by neocortex.md's retention rules.

    Archived entries go to memory/archive/YYYY.md; compression candidates (30+ days) and
    entries to review are listed. Identity, Lessons, user-marked (s=user or keep) and
    often-used (a > 10) entries are never touched."""
    from cortexfs import memory_md

    fmt = common.output_format()
    today = _parse_date(as_of) if as_of else dt.date.today()
    target, store = _resolve(path)
    if dry_run:
        plan = memory_md.plan_prune(memory_md.read(target), today)
        written: list[Path] = []
    else:
        from cortexfs.commit import Change

        with _writing(store, no_commit, target) as txn:
            result = memory_md.apply_prune(target, today)
            plan, written = result.plan, result.written
            if written and txn is not None:
                txn.add(Change(written, f"memory: archive {len(plan.archive)} MEMORY.md "
                               "entries"))
    if fmt == "json":
        common.print_json({**plan.to_json(), "dry_run": dry_run,
                           "written": [str(p) for p in written]})
        return
    _print_plan(plan, dry_run, written)


def _print_plan(plan: PrunePlan, dry_run: bool, written: list[Path]) -> None:
    root = plan.doc.path.parent
    verb = "would archive" if dry_run else "archived"
    groups = (
        (f"{verb}", plan.archive, "unused for more than 90 days"),
        ("compress", plan.compress, "older than 30 days, used < 3 times: rewrite to the gist"),
        ("review", plan.review, "used < 3 times, younger than 30 days"),
    )
    for title, items, why in groups:
        typer.echo(f"{title} ({len(items)}): {why}")
        for j in items:
            dest = ""
            if j.action == "archive":
                dest = f" → {plan.archive_path(j.entry).relative_to(root)}"
            typer.echo(f"  line {j.entry.line} [{j.entry.section}] {j.entry.first_line(60)} "
                       f"(age {j.age_days} d, a={j.accesses}){dest}")
    if plan.undated:
        typer.echo(f"undated ({len(plan.undated)}): no u= date, so not judged — add "
                   "`<!-- nx: u=YYYY-MM-DD -->` to let prune age them")
    protected = ", ".join(f"{reason} {n}" for reason, n in plan.protected.items())
    typer.echo(f"kept: {plan.kept} in use" + (f"; never pruned: {protected}" if protected
                                               else ""))
    if dry_run:
        typer.echo("dry run: nothing written")
    elif written:
        common.ok("wrote " + ", ".join(str(p) for p in written)
                  + " — run `cortex memory lint --fix` to refresh the header counts")
    else:
        typer.echo("nothing to archive")


def _parse_date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"--as-of {value!r} is not a date: use YYYY-MM-DD") from None


def brief(
    project: Annotated[str | None, typer.Argument(
        help="Project to brief (default: the only project, else a store-level brief).",
        show_default=False)] = None,
    budget: Annotated[int, typer.Option(
        "--budget", metavar="TOKENS", help="Most tokens to print (characters / 4).")] = 4000,
    max_chars: Annotated[int | None, typer.Option(
        "--max-chars", metavar="CHARS", help="Also at most this many characters, banner "
        "included (as Claude Code counts hook output: UTF-16 units).", show_default=False)]
        = None,
) -> None:
    """Print what a new session should start with, cut to --budget tokens.

    STATUS.md, open tasks, issues, the strongest knowledge and patterns, recent
    experiments — ending with a banner that lists what was cut. Usable as a Claude Code
    SessionStart hook."""
    from cortexfs.brief import build, build_within

    fmt = common.output_format()
    store = common.open_store()
    result = build(store, project, budget) if max_chars is None else \
        build_within(store, project, budget, max_chars)
    common.say(fmt, result.to_json(), result.text, nl=False)


COMMANDS = {"memory": memory_app, "brief": brief}
