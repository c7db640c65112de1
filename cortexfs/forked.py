"""Work done in a forked process, its result sent back through a pipe (marshalled).

For batch jobs that can use a second core (a first `cortex view` build renders thousands
of pages): the child shares the parent's memory copy-on-write, so it needs no arguments
sent over, and it leaves with os._exit, running no cleanup of the parent's.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Child:
    """A forked process working; `join` waits for its result."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.reaped = False  # waited for: its pid may belong to another process now

    def stop(self) -> bool:
        """Ask the process to stop (SIGTERM: at its next file boundary, see
        cortexfs.interrupt) and wait for it; True when it was still running."""
        import signal

        if self.reaped:
            return False
        self.reaped = True
        running = True
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            running = False
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        return running

    def join(self) -> Any:
        """What the work returned; None when it failed (raised, or the process died)."""
        data = bytearray()  # (one buffer: not the chunks and their join, ~2x a result's size)
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 1 << 20):
                data += chunk
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        if status != 0:
            return None
        try:
            return marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            return None


def can_fork() -> bool:
    """Whether forking a worker process is possible and safe here."""
    # forking a process that runs other threads can deadlock the child on a lock one of them
    # held; cortex's commands are single-threaded, the MCP server and the watcher may not be
    return (hasattr(os, "fork") and (os.cpu_count() or 1) > 1
            and threading.active_count() == 1)


def start(work: Callable[[], Any]) -> Child | None:
    """Run `work` (returning values marshal can write) in a forked process; None when no
    process can be forked (the caller then does the work itself)."""
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    gc.freeze()  # the pages shared with the child stay shared while nobody writes them
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: work, report, leave without any cleanup
        status = 1
        try:
            os.close(read_fd)
            view = memoryview(marshal.dumps(work()))
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    gc.unfreeze()
    os.close(write_fd)
    return Child(pid, read_fd)


class Shared:
    """Numbered jobs shared with a forked process through a queue (a pipe holding their
    numbers, two bytes each; a read that small from a pipe is whole): each side takes the
    next job when it is free, so a child that gets no CPU (a busy machine) leaves the
    jobs to the parent rather than holding half of them. `mine` yields the parent's jobs,
    `join` gives the child's results; a job the child did not report is the parent's to
    do (see `missing`)."""

    LIMIT = 1 << 14  # jobs a queue holds (a pipe holds 64 KiB)

    def __init__(self, queue: int, child: Child, jobs: list[int]) -> None:
        self.queue, self.child, self.jobs = queue, child, jobs
        self.done: set[int] = set()

    def mine(self) -> Iterator[int]:
        """The next jobs, taken from the queue until it is empty."""
        while len(taken := os.read(self.queue, 2)) == 2:
            job = int.from_bytes(taken, "big")
            self.done.add(job)
            yield job

    def join(self) -> dict[int, Any]:
        """The child's results by job (what it failed to send is missing)."""
        with contextlib.suppress(OSError):
            os.close(self.queue)
        out: dict[int, Any] = {}
        results = self.child.join()
        with contextlib.suppress(TypeError, ValueError):
            for job, result in results or ():
                if job in self.jobs and job not in self.done:
                    out[job] = result
        self.done.update(out)
        return out

    def missing(self) -> list[int]:
        """The jobs nobody reported (the child failed): the parent does them after `join`."""
        return [job for job in self.jobs if job not in self.done]

    def stop(self) -> None:
        """On an error in the parent: stop the child."""
        with contextlib.suppress(OSError):
            os.close(self.queue)
        self.child.stop()


def share(order: list[int], work: Callable[[int], Any]) -> Shared | None:
    """Start a forked process that runs `work(job)` (returning values marshal can write)
    for jobs it takes from a queue holding `order` (job numbers, the costliest first);
    None when none can be forked (the caller then does every job itself)."""
    if not order or len(order) > Shared.LIMIT or not can_fork():
        return None
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    queue = b"".join(job.to_bytes(2, "big") for job in order)
    try:
        # without blocking: a pipe may hold less than LIMIT jobs (Linux gives one page to a
        # user past fs.pipe-user-pages-soft), and nobody reads it yet
        os.set_blocking(write_fd, False)
        whole = os.write(write_fd, queue) == len(queue)
    except OSError:
        whole = False
    finally:
        os.close(write_fd)
    if not whole:
        os.close(read_fd)
        return None

    def taken() -> list[tuple[int, Any]]:
        out = []
        while len(job := os.read(read_fd, 2)) == 2:
            number = int.from_bytes(job, "big")
            out.append((number, work(number)))
        return out

    child = start(taken)
    if child is None:
        os.close(read_fd)
        return None
    return Shared(read_fd, child, order)
