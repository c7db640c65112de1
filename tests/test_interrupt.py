"""cortexfs.interrupt: inside a writing command a signal waits for a file boundary, and a
commit under way is finished; outside one the process stops at once with exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from cortexfs import interrupt
from cortexfs.interrupt import EXIT_CODE, Interrupted


def test_a_signal_inside_deferred_waits_for_the_next_check() -> None:
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN in a shell's background job)
    with interrupt.deferred():
        interrupt.check()  # nothing received: goes on
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.received() == signal.SIGINT
        with pytest.raises(Interrupted) as stopped:
            interrupt.check()
    assert stopped.value.signum == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is before  # put back after


def test_a_commit_under_way_is_finished_first() -> None:
    with interrupt.deferred():
        with interrupt.shielded():
            os.kill(os.getpid(), signal.SIGTERM)
            interrupt.check()  # shielded: the commit goes on
        with pytest.raises(Interrupted):
            interrupt.check()


def test_a_new_command_starts_with_no_signal() -> None:
    with interrupt.deferred():
        os.kill(os.getpid(), signal.SIGINT)
    with interrupt.deferred():
        assert interrupt.received() == 0
        interrupt.check()


def test_other_threads_are_left_alone() -> None:
    seen: list[object] = []

    def work() -> None:
        with interrupt.deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGINT)]  # not the cortex handler


def test_the_message_says_what_was_done_and_what_to_run() -> None:
    assert Interrupted(2).message() == "interrupted: nothing was written; nothing is left to do"
    assert Interrupted(2, "3 of 5 indexes written", "cortex index regen").message() == (
        "interrupted: 3 of 5 indexes written, run `cortex index regen` again")


def test_outside_a_writing_command_the_process_stops_at_once() -> None:
    code = ("import os, signal, time\n"
            "from cortexfs import interrupt\n"
            "interrupt.install()\n"
            "interrupt.set_command('cortex sync')\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(5)\n"
            "print('not reached')\n")
    proc = _python(code)
    assert proc.returncode == EXIT_CODE == 130
    assert proc.stderr == "interrupted, run `cortex sync` again\n" and proc.stdout == ""


def test_a_signal_during_the_imports_imports_nothing_and_quotes_like_shlex() -> None:
    """A SIGINT can land while `re` is half-imported (typing imports it at start-up); a
    handler that imported shlex then died in a traceback (seen at load 6). The handler
    imports nothing, and still quotes the command to run again as shlex.quote does."""
    code = ("import os, signal, sys, time\n"
            "from cortexfs import interrupt\n"
            "interrupt.install()\n"
            "sys.argv[1:] = ['new', '-s', \"it's ünï\", '']\n"
            "loaded = set(sys.modules)\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(5)\n"
            "finally:\n"
            "    print(sorted(set(sys.modules) - loaded))\n")
    proc = _python(code)
    import shlex

    assert proc.returncode == EXIT_CODE
    assert proc.stdout == "[]\n"
    again = shlex.join(["cortex", "new", "-s", "it's ünï", ""])
    assert proc.stderr == f"interrupted, run `{again}` again\n"


def test_a_signal_in_a_set_name_during_the_imports_exits_130_without_a_traceback() -> None:
    """Python 3.11 wraps an exception raised in a class's __set_name__ in a RuntimeError:
    the handler's exit, when a SIGINT lands there while the CLI is imported (seen once at
    load 6: a traceback and exit 1). Here the CLI module's import makes such a class."""
    code = ("import importlib.abc, importlib.util, os, signal, sys, time\n"
            "class Signalling:\n"
            "    def __set_name__(self, owner, name):\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        time.sleep(5)\n"
            "class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'cortexfs.cli.main':\n"
            "            return importlib.util.spec_from_loader(name, self)\n"
            "    def create_module(self, spec):\n"
            "        return None\n"
            "    def exec_module(self, module):\n"
            "        type('Made', (), {'attr': Signalling()})\n"
            "sys.meta_path.insert(0, Finder())\n"
            "sys.argv = ['cortex', 'status']\n"
            "from cortexfs.__main__ import main\n"
            "main()\n")
    proc = _python(code)
    assert proc.returncode == EXIT_CODE, proc.stderr
    assert proc.stderr == "interrupted, run `cortex status` again\n"

def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
