"""Access logs under real faults: a torn last line, a full disk, lines that are not entries.

An append never joins a torn line (the log gets its missing newline in the same write);
the fold skips and counts what does not parse; `cortex validate` reports it per log.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortexfs import accesslog, layout, scaffold
from cortexfs.claude_settings import hook_command
from cortexfs.store import Project, Store

TORN = b'{"file": "EXP-001.md", "tool": "Re'


def _line(n: int) -> bytes:
    return accesslog.format_line("EXP-001.md", "Read", f"s{n}", "2026-03-01T00:00:00.000Z")


def test_an_append_after_a_torn_line_starts_a_new_line(tmp_path: Path) -> None:
    log = tmp_path / "_meta" / layout.ACCESS_LOG
    accesslog.append(log, [_line(1)])
    with open(log, "ab") as f:
        f.write(TORN)  # a writer killed mid-line
    accesslog.append(log, [_line(2), _line(3)])
    assert log.read_bytes() == _line(1) + TORN + b"\n" + _line(2) + _line(3)
    stats = accesslog.fold(log)
    assert stats.counts == {"EXP-001.md": 3}
    assert (stats.bad_lines, stats.first_bad, stats.lines) == (1, 2, 4)
    accesslog.append(log, [_line(4)])  # an intact log gets no extra newline
    assert log.read_bytes().endswith(_line(3) + _line(4))


def test_the_fold_counts_bad_lines_across_resumes(tmp_path: Path) -> None:
    log = tmp_path / layout.ACCESS_LOG
    log.write_bytes(_line(1) + b"\n" + _line(2))
    stats, state = accesslog.resume(log, None)
    assert (stats.counts, stats.bad_lines, stats.lines) == ({"EXP-001.md": 2}, 0, 3)
    with open(log, "ab") as f:
        f.write(b"[1, 2]\n" + _line(3) + TORN + b"\n\xff\xfe not utf-8\n")
    stats, state = accesslog.resume(log, state)  # folds only what was appended
    assert stats.counts == {"EXP-001.md": 3}
    assert (stats.bad_lines, stats.first_bad, stats.lines) == (3, 4, 7)
    assert accesslog.resume(log, state)[0] == stats


def test_validate_reports_each_log_with_bad_lines_once(store: Store, project: Project,
                                                        cli: object) -> None:
    other, _ = scaffold.new_project(store, "other")
    project.access_log.parent.mkdir(parents=True, exist_ok=True)
    project.access_log.write_bytes(_line(1) + TORN + b"\n" + _line(2) + b"oops\n" + TORN + b"\n")
    accesslog.append(other.access_log, [_line(1)])
    result = cli("validate")  # type: ignore[operator]
    findings = [line for line in result.stdout.splitlines() if "[access-log]" in line]
    assert findings == [
        "warning  projects/flywheel/_meta/access-log.jsonl:2  [access-log] 3 lines are not "
        "log entries and are not counted as reads (the first is line 2): torn by a full disk "
        "or a killed writer — delete them, or rewrite them as JSON lines like the others"]
    data = json.loads(cli("validate", "--format", "json").stdout)  # type: ignore[operator]
    found = [f for f in data["findings"] if f["rule"] == "access-log"]
    assert [(f["path"], f["line"]) for f in found] == [
        ("projects/flywheel/_meta/access-log.jsonl", 2)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """A 1 MiB tmpfs: a disk that can really fill up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and CAP_SYS_ADMIN): "
                    f"{proc.stderr.strip() or proc.returncode}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """A file taking every free block of the disk `folder` is on."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_tears_a_line_and_the_next_append_does_not_join_it(
        small_disk: Path) -> None:
    store = Store(small_disk / "cortex")
    scaffold.init_store(store)
    project, _ = scaffold.new_project(store, "flywheel")
    atom = project.root / "experiments" / "EXP-001.md"
    atom.write_text("---\nid: EXP-001\n---\nbody\n")
    payload = json.dumps({"session_id": "session-" + "x" * 37, "cwd": str(project.root),
                          "hook_event_name": "PostToolUse", "tool_name": "Read",
                          "tool_input": {"file_path": str(atom)}}).encode()
    env = {**os.environ, "CORTEX_AUTOCOMMIT": "0"}

    def hook() -> None:  # the real hook process, as Claude Code runs it
        proc = subprocess.run(shlex.split(hook_command(store.home)), input=payload, env=env,
                              capture_output=True)
        assert proc.returncode == 0 and proc.stdout == b""

    hook()
    filler = _fill(small_disk)
    log = project.access_log
    size, calls = log.stat().st_size, 0
    while calls < 100:  # until the log's last page is full and a line was cut short
        hook()
        calls += 1
        if log.stat().st_size == size:
            break
        size = log.stat().st_size
    assert not log.read_bytes().endswith(b"\n"), "the full disk did not tear a line"
    before = accesslog.fold(log).counts["EXP-001.md"]
    filler.unlink()  # space again
    for _ in range(5):
        hook()
    stats = accesslog.fold(log)
    assert stats.counts["EXP-001.md"] == before + 5  # no line after the torn one was lost
    assert stats.bad_lines == 1
    assert all(line.count(b'{"file"') <= 1 for line in log.read_bytes().splitlines())


def _append_many(log: str, writer: int, n: int, stop: Any, written: Any) -> None:
    i = 0
    while i < n or not stop.is_set():
        accesslog.append(log, [accesslog.format_line("EXP-001.md", "Read", f"w{writer}-{i}")])
        i += 1
        written[writer] = i


def _race_appenders(log: Path, meanwhile: Callable[[], int], n: int = 1500,
                    at_least: int = 5) -> int:
    """Three forked processes append at least n lines each to `log` while `meanwhile` runs
    in a loop, and go on appending until it has acted `at_least` times (on a loaded machine
    the writers could otherwise be done before the race was run); every line must be in the
    log at the end. How many times `meanwhile` said it acted."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    stop, written = ctx.Event(), ctx.Array("i", 3)
    writers = [ctx.Process(target=_append_many, args=(str(log), w, n, stop, written))
               for w in range(3)]
    for w in writers:
        w.start()
    acted = 0
    deadline = time.monotonic() + 120
    while any(w.is_alive() for w in writers):
        acted += meanwhile()
        if acted >= at_least or time.monotonic() > deadline:
            stop.set()
    for w in writers:
        w.join()
        assert w.exitcode == 0
    # An append that gave up waiting sets its lines aside; on a loaded machine it can do so
    # after the last replacement's own drain. The next cortex command drains them: so here.
    accesslog.drain(log)
    sessions = [json.loads(line)["session"] for line in log.read_text().splitlines()]
    assert sorted(sessions) == sorted(f"w{w}-{i}" for w in range(3) for i in range(written[w]))
    return acted


def test_appends_racing_a_log_rewrite_are_never_lost(tmp_path: Path) -> None:
    """Hook processes appending while cortex rewrites the log by a rename (renumbering,
    sync's merge): an append whose file was replaced after it opened it used to land in the
    old file and be lost (11 of 9,000 lines lost in 58 rewrites)."""
    from cortexfs import renumber

    log = tmp_path / "context" / "projects" / "p" / "_meta" / layout.ACCESS_LOG
    log.parent.mkdir(parents=True)
    log.write_bytes(b"")
    swap = {b"EXP-001.md": b"EXP-002.md", b"EXP-002.md": b"EXP-001.md"}
    rewrites = 0

    def rewrite() -> int:
        nonlocal rewrites
        target = b"EXP-002.md" if rewrites % 2 == 0 else b"EXP-001.md"

        def rename(data: bytes) -> bytes:
            return data.replace(swap[target], target)

        done = renumber.replace_log(log, rename, rename)
        rewrites += done
        return done

    assert _race_appenders(log, rewrite) >= 5


def test_appends_racing_git_replacing_the_log_during_a_merge_are_never_lost(
        store: Store, project: Project) -> None:
    """Hook processes appending while the log is replaced inside sync's `keep_log_appends`
    (as git merge replaces it; here by a rename, which has no moment without a log): a
    line written to the old file after the read-back used to be lost."""
    from cortexfs import sync

    log = project.root / "_meta" / layout.ACCESS_LOG
    log.write_bytes(b"")

    def replace() -> int:
        with sync.keep_log_appends(store):
            data = log.read_bytes()
            new = log.with_name("new-copy")
            new.write_bytes(data[:data.rfind(b"\n") + 1])
            os.replace(new, log)
        return 1

    assert _race_appenders(log, replace) >= 5


def test_appends_waiting_out_a_slow_git_rewrite_of_the_log_are_never_lost(
        store: Store, project: Project) -> None:
    """git merge writes its new copy of a log the way git writes any file: it removes the
    old one, creates the new one and writes it from offset 0. When that takes longer than
    an append's bounded wait for the flock sync holds (a loaded machine), an append that
    then opened the new, still empty file landed at offset 0 and git's write covered it:
    the line was gone from both copies. Here git's pause is made longer than the bound."""
    from cortexfs import sync

    log = project.root / "_meta" / layout.ACCESS_LOG
    log.write_bytes(b"")

    def replace() -> int:
        with sync.keep_log_appends(store):
            data = log.read_bytes()
            data = data[:data.rfind(b"\n") + 1]
            log.unlink()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                time.sleep(accesslog.LOCK_WAIT * 1.5)
                os.write(fd, data)  # at git's own offset: 0
            finally:
                os.close(fd)
        time.sleep(0.05)  # appends go to the log again between replacements
        return 1

    assert _race_appenders(log, replace, n=100, at_least=1) >= 1


def _append_in_child(log: Path, line: bytes) -> None:
    import multiprocessing

    child = multiprocessing.get_context("spawn").Process(  # (a fresh process, as a hook)
        target=accesslog.append, args=(str(log), [line]))
    child.start()
    child.join()
    assert child.exitcode == 0


def test_a_line_set_aside_during_a_replacement_is_drained_into_the_log_once(
        store: Store, project: Project) -> None:
    log = project.access_log
    accesslog.append(log, [_line(1)])
    pending = store.home / layout.LOGS / layout.PENDING_READS / project.name
    with accesslog.Replacing(store.home):
        _append_in_child(log, _line(2))  # waits out its bound, then sets the line aside
        assert log.read_bytes() == _line(1)
        [kept] = list(pending.iterdir())
        assert kept.read_bytes() == _line(2) and kept.suffix == ".jsonl"
    copy = kept.read_bytes()
    assert accesslog.drain(log) == len(_line(2))
    assert log.read_bytes() == _line(1) + _line(2) and list(pending.iterdir()) == []
    kept.write_bytes(copy)  # as if a drain was killed between its append and its unlink
    assert accesslog.drain(log) == 0
    assert log.read_bytes() == _line(1) + _line(2) and list(pending.iterdir()) == []


def test_regeneration_counts_the_lines_set_aside(store: Store, project: Project,
                                                cli: object) -> None:
    atom = project.root / "experiments" / "EXP-001.md"
    atom.write_text("---\nid: EXP-001\ndate: 2026-03-01\nsummary: read twice\ntags: [a]\n"
                    "---\nbody\n")
    accesslog.append(project.access_log, [_line(1)])
    with accesslog.Replacing(store.home):
        _append_in_child(project.access_log, _line(2))
    cli("index", "regen", "--all")  # type: ignore[operator]
    assert accesslog.fold(project.access_log).counts == {"EXP-001.md": 2}
    assert "refs: 2" in atom.read_text()


def _hold_replacing(home: str, seconds: float, ready: Any, release: Any) -> None:
    with accesslog.Replacing(home):
        ready.set()
        release.wait(seconds)


@pytest.fixture
def replacing(store: Store) -> Iterator[Callable[[float], None]]:
    """Another process holding the store's access-log lock (as a sync merging) for a while."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    release = ctx.Event()
    children = []

    def hold(seconds: float) -> None:
        ready = ctx.Event()
        child = ctx.Process(target=_hold_replacing,
                            args=(str(store.home), seconds, ready, release))
        child.start()
        assert ready.wait(30)
        children.append(child)

    yield hold
    release.set()
    for child in children:
        child.join()


def test_a_drain_that_cannot_take_the_lock_leaves_the_lines_where_they_are(
        store: Store, project: Project, replacing: Callable[[float], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # draining without the lock would append into a log git may be rewriting (and lose the
    # lines with the pending file); they are safe where they are
    pending = store.home / layout.LOGS / layout.PENDING_READS / project.name
    pending.mkdir(parents=True)
    (pending / "1-1.jsonl").write_bytes(_line(1))
    replacing(accesslog.DRAIN_WAIT * 4)
    monkeypatch.setattr(accesslog, "DRAIN_WAIT", 0.1)  # (the lock stays held all along)
    assert accesslog.drain_all(store.home) == 0
    assert (pending / "1-1.jsonl").read_bytes() == _line(1)
    assert accesslog.read(project.access_log) == b""


def test_a_hook_logging_reads_in_many_projects_waits_out_a_replacement_once(
        store: Store, replacing: Callable[[float], None]) -> None:
    logs = [scaffold.new_project(store, f"p{n}")[0].access_log for n in range(6)]
    replacing(3.0)
    script = ("import sys, time\nfrom cortexfs import accesslog\nstart = time.monotonic()\n"
              "for log in sys.argv[1:]:\n"
              "    accesslog.append(log, [accesslog.format_line('EXP-001.md', 'Read', 's')])\n"
              "print(time.monotonic() - start)\n")
    proc = subprocess.run([sys.executable, "-c", script, *map(str, logs)], capture_output=True,
                          text=True, check=True)
    assert float(proc.stdout) < 2 * accesslog.LOCK_WAIT + 0.5  # (was 6 waits of 0.2 s)
    pending = store.home / layout.LOGS / layout.PENDING_READS
    assert sorted(p.name for p in pending.iterdir()) == [f"p{n}" for n in range(6)]


def test_a_drain_skips_what_is_not_a_pending_file_and_keeps_the_wall(
        store: Store, project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(_line(9))
    pending = store.home / layout.LOGS / layout.PENDING_READS / project.name
    pending.mkdir(parents=True)
    (pending / "2-1.jsonl").write_bytes(_line(1))
    (pending / "3-1.jsonl").symlink_to(outside)
    (pending / "4-1.jsonl").mkdir()
    assert accesslog.drain(project.access_log) == len(_line(1))
    assert accesslog.read(project.access_log) == _line(1)
    assert sorted(p.name for p in pending.iterdir()) == ["3-1.jsonl", "4-1.jsonl"]
    assert outside.read_bytes() == _line(9)


def test_a_renaming_drain_killed_after_its_rename_is_finished_as_renamed(
        store: Store, project: Project) -> None:
    # a drain through a renumbering's rename first writes the renamed lines, naming the
    # files they replace; killed before it removed those, the next drain takes the renamed
    # lines only (the old ones would count the read twice, once under the old id)
    pending = store.home / layout.LOGS / layout.PENDING_READS / project.name
    pending.mkdir(parents=True)
    old = _line(1)
    (pending / "1-1.jsonl").write_bytes(old)
    renamed = old.replace(b"EXP-001", b"EXP-007")
    (pending / "2-1.jsonl").write_bytes(b"#supersedes 1-1.jsonl\n" + renamed)
    assert accesslog.drain(project.access_log) == len(renamed)
    assert accesslog.read(project.access_log) == renamed
    assert list(pending.iterdir()) == []
