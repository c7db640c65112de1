"""Ctrl-C and SIGTERM during a writing command: stop at a file boundary, never half-way.

While a writing command runs (`deferred()`, entered by cortexfs.commit.transaction), SIGINT
and SIGTERM only set a flag. The command's loops call `check()` between files — every file
is written whole (a temporary file, then a rename), so stopping there leaves each file
either old or new — and `check()` raises `Interrupted`. Inside `shielded()` (a commit
being made) `check()` waits: a commit is finished rather than cut. The CLI prints
"interrupted: <what was done>, run `<command>` again" and exits 130; the next command
commits or finishes whatever was left (cortexfs.commit).

The `cortex` command installs the handler for its whole life (`install()`, before its
imports): outside a writing command a signal ends it at once with exit 130 and no
traceback. A library user (the MCP server, tests) gets it only inside `deferred()`, in the
main thread; elsewhere (the MCP server's workers) `deferred()` changes nothing.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_CODE = 130  # what a shell reports for a command stopped by Ctrl-C
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_state: dict[str, int] = {"signal": 0, "depth": 0, "shield": 0, "installed": 0}
_command: list[str] = []  # the command being run, as the user would type it again

class Interrupted(Exception):  # noqa: N818 - it is the event, like KeyboardInterrupt
    """A writing command stopped at a file boundary because of SIGINT or SIGTERM.

    `done` says what was done before it stopped; `rerun`, when set, is the command that
    finishes the work.
    """

    def __init__(self, signum: int, done: str = "", rerun: str | None = None) -> None:
        super().__init__(done)
        self.signum = signum
        self.done = done
        self.rerun = rerun

    def message(self) -> str:
        """The one line the CLI prints."""
        done = self.done or "nothing was written"
        if self.rerun:
            return f"interrupted: {done}, run `{self.rerun}` again"
        return f"interrupted: {done}; nothing is left to do"


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["depth"]:
        _state["signal"] = signum  # acted on at the next file boundary
        return
    # not inside a writing command (or a sync, whose next run finishes what it left): stop
    # now — SystemExit rather than KeyboardInterrupt: no traceback, even during the imports
    command = _command[0] if _command else " ".join(map(_quoted, ["cortex", *sys.argv[1:]]))
    sys.stderr.write(f"interrupted, run `{command}` again\n")
    raise SystemExit(EXIT_CODE)


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _quoted(arg: str) -> str:
    """`shlex.quote(arg)`, without importing shlex: a signal can arrive while `re` (which
    shlex imports) is half-imported, and importing shlex then fails with a traceback."""
    if arg and all(c in _SAFE for c in arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def set_command(command: str) -> None:
    """What to tell the user to run again when a signal stops the process."""
    _command[:] = [command]


def install() -> None:
    """Handle SIGINT / SIGTERM the cortex way for the whole process (the `cortex` command
    calls this before its imports): outside a writing command, exit 130 at once."""
    for signum in _SIGNALS:
        signal.signal(signum, _handler)
    _state["installed"] = 1


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into a flag that `check()` acts on, for the body of the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    temporary = not _state["installed"] and _state["depth"] == 0
    previous = {signum: signal.signal(signum, _handler) for signum in _SIGNALS} \
        if temporary else {}
    if _state["depth"] == 0:
        _state["signal"] = 0
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def received() -> int:
    """The signal received inside `deferred()` so far (0 for none)."""
    return _state["signal"]


def check() -> None:
    """Raise Interrupted if a signal arrived (a file boundary; not inside `shielded()`)."""
    if _state["signal"] and not _state["shield"]:
        raise Interrupted(_state["signal"])


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """A stretch that must finish once begun (a commit): `check()` waits until its end."""
    _state["shield"] += 1
    try:
        yield
    finally:
        _state["shield"] -= 1

