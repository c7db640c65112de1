"""cortexfs.forked: work done in a forked process, its result marshalled back; a child that
fails or dies leaves its work to the parent."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cortexfs import forked

pytestmark = pytest.mark.skipif(not forked.can_fork(), reason="needs fork and two cores")


def test_the_child_s_result_comes_back() -> None:
    child = forked.start(lambda: {"pid": os.getpid(), "rows": [1, 2.5, "x", b"y", None]})
    assert child is not None
    result = child.join()
    assert result["rows"] == [1, 2.5, "x", b"y", None] and result["pid"] != os.getpid()


def test_a_child_that_fails_gives_none() -> None:
    def fail() -> None:
        raise RuntimeError("boom")

    failing = forked.start(fail)
    assert failing is not None and failing.join() is None
    unmarshallable = forked.start(lambda: object())
    assert unmarshallable is not None and unmarshallable.join() is None


def test_stop_ends_a_running_child_once() -> None:
    child = forked.start(lambda: time.sleep(30))
    assert child is not None
    started = time.monotonic()
    assert child.stop() is True
    assert time.monotonic() - started < 10
    assert child.stop() is False  # reaped already: its pid may be another process's now


def test_no_fork_while_other_threads_run() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert forked.can_fork() is False
        assert forked.share([0, 1], lambda job: job) is None
    finally:
        release.set()
        thread.join()


def test_shared_jobs_are_each_done_once_by_one_side() -> None:
    jobs = list(range(40))
    shared = forked.share(jobs, lambda job: job * job)
    assert shared is not None
    mine = {}
    for job in shared.mine():
        mine[job] = job * job
        time.sleep(0.001)
    theirs = shared.join()
    assert not set(mine) & set(theirs) and shared.missing() == []
    assert {**mine, **theirs} == {job: job * job for job in jobs}


def test_jobs_a_failed_child_took_are_missing_for_the_parent() -> None:
    def work(job: int) -> int:
        if job == 3:
            os._exit(9)  # the child dies with the jobs it has taken
        return job

    shared = forked.share(list(range(6)), work)
    assert shared is not None
    time.sleep(0.2)  # let the child take some jobs before it dies
    mine = list(shared.mine())
    theirs = shared.join()
    assert theirs == {}
    assert sorted(mine + shared.missing()) == list(range(6))


def test_nothing_to_share_or_too_much_forks_nothing() -> None:
    assert forked.share([], lambda job: job) is None
    assert forked.share(list(range(forked.Shared.LIMIT + 1)), lambda job: job) is None


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_SETPIPE_SZ"), reason="Linux pipes")
def test_a_queue_longer_than_the_pipe_holds_forks_nothing_and_never_hangs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe of one page (what Linux gives a user past fs.pipe-user-pages-soft) holds 2,048
    jobs: a longer queue written before anyone reads would block for ever."""
    import fcntl
    import signal

    real_pipe = os.pipe

    def small_pipe() -> tuple[int, int]:
        read_fd, write_fd = real_pipe()
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
        return read_fd, write_fd

    monkeypatch.setattr(os, "pipe", small_pipe)
    before = set(os.listdir("/proc/self/fd"))

    def hung(*_: object) -> None:
        raise AssertionError("share blocked writing its queue")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        assert forked.share(list(range(4096)), lambda job: job) is None
        shared = forked.share(list(range(100)), lambda job: job)  # (it fits)
        assert shared is not None
        mine = list(shared.mine())
        assert sorted(mine + list(shared.join())) == list(range(100))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    assert set(os.listdir("/proc/self/fd")) <= before  # both ends closed
