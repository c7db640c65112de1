"""The access log: one JSON line per read of an atom, in each project's _meta/.

Standard library only: the PostToolUse hook imports this on every tool call.
A line is `{"file": "EXP-001.md", "tool": "Read", "ts": "<ISO-8601 UTC>", "session": "…"}`.
"""

from __future__ import annotations

import os
import time

from cortexfs import layout

# Only what the hook needs is imported at the top: json (which pulls in re and enum) and
# collections.abc would double the hook's start-up time on a loaded machine.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from cortexfs.store import Project


def _quote(text: str) -> str:
    """`text` as a JSON string, exactly as json.dumps(ensure_ascii=False) writes it."""
    try:  # the C encoder json.dumps uses, without importing json
        from _json import encode_basestring
    except ImportError:  # another Python implementation
        import json

        return json.dumps(text, ensure_ascii=False)
    return encode_basestring(text)

DIRECTORY_SEARCH = "_directory_search"


def utc_now() -> str:
    """The current time as the log writes it: ISO-8601 UTC with milliseconds and Z."""
    return timestamp(time.time())


def timestamp(wall: float) -> str:
    """A `time.time()` value as the log writes it."""
    # time, not datetime: this runs in the hook, where every import is agent latency
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{int(wall % 1 * 1000):03d}Z"


def format_line(file: str, tool: str, session: str, ts: str | None = None) -> bytes:
    """One log line, newline included, truncating an absurdly long session id."""
    # exactly json.dumps(entry, ensure_ascii=False, separators=(", ", ": ")); a lone
    # surrogate (from a "\ud800" escape in the payload) becomes that escape again
    line = (f'{{"file": {_quote(file)}, "tool": {_quote(tool)}, '
            f'"ts": {_quote(ts or utc_now())}, "session": {_quote(session[:200])}}}\n')
    return line.encode("utf-8", "backslashreplace")


def store_root(log_path: str | os.PathLike[str]) -> str | None:
    """The knowledge root (`context/`) of a project's log, which sits four folders below it
    (context/projects/<project>/_meta/access-log.jsonl); None for any other file."""
    path = os.path.abspath(log_path)
    meta = os.path.dirname(path)
    if os.path.basename(path) != layout.ACCESS_LOG or os.path.basename(meta) != layout.META:
        return None
    projects = os.path.dirname(os.path.dirname(meta))
    return os.path.dirname(projects) if os.path.basename(projects) == layout.PROJECTS else None


def open_log(log_path: str | os.PathLike[str], flags: int) -> int:
    """Open a log, never through a link: a store's log must be part of it (cortexfs.wall),
    so an access log or `_meta` that is a link raises OutsideStoreError, which is a
    FileNotFoundError: for a reader, such a log is none."""
    root = store_root(log_path)
    if root is None:
        return os.open(log_path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    from cortexfs import wall

    if flags & os.O_CREAT:
        wall.makedirs(root, os.path.dirname(os.path.abspath(log_path)))
    return wall.open_inside(root, os.path.abspath(log_path), flags)


def append(log_path: str | os.PathLike[str], lines: Iterable[bytes]) -> int:
    """Append whole lines to the log in one O_APPEND write; returns bytes written.

    A log whose last byte is not a newline (a writer killed mid-line, or cut short by a
    full disk) gets one first, in the same write: the torn line stays one bad line instead
    of swallowing the first line appended after it. While cortex replaces the store's logs
    the lines are set aside instead, and moved into the log afterwards (see `Replacing`).
    """
    data = b"".join(lines)
    if not data:
        return 0
    owner = _owner(log_path)
    if owner is None:
        os.makedirs(os.path.dirname(os.fspath(log_path)), exist_ok=True)
    guard = -1
    if owner is not None and not _replacing:
        try:
            guard = _open_guard(owner[0])
        except OSError:  # (a read-only or linked .locks: appends go ahead as they did)
            owner = None
        else:
            if not _wait(guard, shared=True):
                os.close(guard)
                return _set_aside(log_path, owner, data)
    try:
        return _append_locked(log_path, data, owner)
    finally:
        if guard >= 0:
            os.close(guard)


def _append_locked(log_path: str | os.PathLike[str], data: bytes,
                   owner: tuple[str, str] | None) -> int:
    # read-write: the last byte is looked at below
    fd = open_log(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    # a store's append that cannot write here locked sets its lines aside (see `Replacing`)
    aside = owner is not None and not _replacing
    try:
        for _ in range(5):
            # a log replaced by another way than cortex's (a `git checkout` of the user's)
            # may have been replaced while this append waited: the file opened must still
            # be the log once locked, else the new one is appended to
            # (inside Replacing, this process's own flocks of the old files may be the ones
            # held: no wait, the store's lock already keeps every other appender out)
            if not (lock(fd, 0) if _replacing else _wait(fd)) and aside:
                break  # held past the bound
            if _is_current(fd, log_path):
                aside = False
                break
            os.close(fd)
            fd = -1
            fd = _reopen(log_path)
        if aside and owner is not None:  # (held past the bound, or five replacements)
            os.close(fd)
            fd = -1
            return _set_aside(log_path, owner, data)
        # Why the look at the last byte is safe with concurrent appenders: every appender
        # goes through here and holds the log's flock from its look to the end of its write,
        # so the look never sees another append half-done (a reader can see the first page
        # of a write before its last). A log can then end without a newline only after a
        # writer died mid-line or was cut short by a full disk, and nobody will finish that
        # line. (A log outside a store is written unlocked past the bound: the worst a race
        # can then cause is an empty line, which the fold skips.)
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            data = b"\n" + data
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        return written
    finally:
        if fd >= 0:
            os.close(fd)  # releases the flock


# seconds an append waits for the log's flock (an append holds it for microseconds; cortex
# replacing the log, for milliseconds)
LOCK_WAIT = 0.2


def _reopen(log_path: str | os.PathLike[str]) -> int:
    """Open the log that replaced the one opened before. git removes a file before it
    writes the new copy, and fails if the file is back meanwhile: a missing log is waited
    for briefly before it is created."""
    for _ in range(20):
        try:
            return open_log(log_path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            time.sleep(0.001)
    return open_log(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT)


def _is_current(fd: int, log_path: str | os.PathLike[str]) -> bool:
    """Whether the open file `fd` is still the one at `log_path`."""
    try:
        st = os.stat(log_path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (mine.st_ino, mine.st_dev)


def _wait(fd: int, shared: bool = False) -> bool:
    """lock() for an append: once an append of this process has waited out its bound (a
    replacement under way), the next ones of the following second do not wait (a hook
    that logs reads in many projects stays within its bound as a whole)."""
    global _gave_up
    if lock(fd, 0 if time.monotonic() < _gave_up else LOCK_WAIT, shared):
        return True
    _gave_up = time.monotonic() + 1.0
    return False


def lock(fd: int, wait: float = LOCK_WAIT, shared: bool = False) -> bool:
    """Take the flock of an open file (exclusive, or `shared`), waiting up to `wait`
    seconds; False if not taken."""
    import fcntl  # a built-in module: no cost to the hook's start-up

    how = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, how)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)


# --- appends while logs are replaced ------------------------------------------------------------
#
# cortex replaces a store's log files (sync's `git merge` and `git merge --abort`,
# renumbering, removing a deleted atom's lines) while it holds the store's access-log lock
# (.locks/access-logs.lock) exclusively; every append holds it shared. git writes its new
# copy of a file by removing the old one, creating the new one and writing it from offset
# 0, so a line appended to that new file before git's write would be covered by it, and
# locking the old file cannot stop an append that opens the new one. So no line is ever
# written to a log while a replacement is under way: an append that cannot take the lock
# within its bound (the hook's work is bounded) writes its lines to a file of their own,
# logs/pending-reads/<project>/<ns>-<pid>.jsonl (written whole, then renamed into place),
# and `drain` moves them into the log: the replacement does when it is done, and so do
# the next regeneration and sync.

_replacing = 0  # > 0 while this process is inside `Replacing` (its appends go ahead)
_replacing_held = False  # whether the outermost `Replacing` took the lock
_gave_up = 0.0  # until when appends of this process do not wait (time.monotonic)
DRAIN_WAIT = 0.5  # seconds a drain waits for the lock (its lines are safe where they are)
_SUPERSEDES = b"#supersedes "  # first line of a pending file made from others (see drain)


def store_home(log_path: str | os.PathLike[str]) -> str | None:
    """The folder of the store a project's log belongs to; None for any other file."""
    owner = _owner(log_path)
    return owner[0] if owner is not None else None


def _owner(log_path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(the store's folder, the project) of a store's log; None for any other file."""
    root = store_root(log_path)
    if root is None:
        return None
    project = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(log_path))))
    return os.path.dirname(root), project


def _open_guard(home: str) -> int:
    from cortexfs import wall

    folder = os.path.join(home, layout.LOCKS)
    wall.makedirs(home, folder)
    return wall.open_inside(home, os.path.join(folder, layout.ACCESS_LOGS_LOCK),
                            os.O_RDWR | os.O_CREAT)


def _pending_folder(owner: tuple[str, str]) -> str:
    return os.path.join(owner[0], layout.LOGS, layout.PENDING_READS, owner[1])


def _set_aside(log_path: str | os.PathLike[str], owner: tuple[str, str], data: bytes) -> int:
    """Write lines meant for a log that is being replaced to a pending file of their own
    (or, where none can be written — a linked logs/ —, to the log, as appends did before)."""
    try:
        _write_pending(owner, data)
    except OSError:
        return _append_locked(log_path, data, None)
    return len(data)


def _write_pending(owner: tuple[str, str], data: bytes) -> str:
    from cortexfs import wall

    home = owner[0]
    folder = _pending_folder(owner)
    wall.makedirs(home, folder)
    name = os.path.join(folder, f"{time.time_ns()}-{os.getpid()}")
    fd = wall.open_inside(home, name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)
    os.rename(name + ".tmp", name + ".jsonl")  # (a pending file is always whole)
    return name + ".jsonl"


class Replacing:
    """`with Replacing(home):` holds the store's access-log lock exclusively while cortex
    replaces log files; appends wait for it up to their bound, then set their lines aside.
    Re-entrant within a process, whose own appends go ahead. `held` says whether the lock
    was taken (appends hold it for microseconds; should one keep it past `wait`, a
    replacement goes ahead all the same — the old files' own flocks still stand — but a
    drain does not)."""

    def __init__(self, home: str | os.PathLike[str], wait: float = 5.0) -> None:
        self.home = os.fspath(home)
        self.wait = wait
        self.fd = -1
        self.held = False

    def __enter__(self) -> Replacing:
        global _replacing, _replacing_held
        if _replacing == 0:
            try:
                self.fd = _open_guard(self.home)
            except OSError:
                self.fd = -1  # (appends cannot open it either: they go ahead as they did)
            else:
                _replacing_held = lock(self.fd, self.wait)
        self.held = _replacing_held
        _replacing += 1
        return self

    def __exit__(self, *exc: object) -> None:
        global _replacing, _replacing_held
        _replacing -= 1
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            _replacing_held = False


def being_replaced(home: str | os.PathLike[str]) -> bool:
    """Whether cortex is replacing the store's logs right now (see `Replacing`)."""
    try:
        fd = _open_guard(os.fspath(home))
    except OSError:
        return False
    try:
        return not lock(fd, 0, shared=True)
    finally:
        os.close(fd)


def drain(log_path: str | os.PathLike[str],
          transform: Callable[[bytes], bytes] | None = None) -> int:
    """Move the lines appends set aside while the log was being replaced into it, through
    `transform` (the replacement's own, for lines meant for the old log); the bytes
    appended. Only lines the log does not hold yet are appended, so a drain cut short by a
    kill is done again without duplicating; a drain that cannot take the lock, or whose
    project is gone, leaves them where they are."""
    owner = _owner(log_path)
    if owner is None:
        return 0
    from cortexfs import wall

    home, folder = owner[0], _pending_folder(owner)
    if wall.reason(home, folder) or not os.path.isdir(folder) or not os.path.isdir(
            os.path.dirname(os.path.dirname(os.path.abspath(log_path)))):
        return 0
    with Replacing(home, DRAIN_WAIT) as held:
        if not held.held:
            return 0  # a replacement is under way: it, or the next drain, moves them
        pending = _pending_files(folder)
        if not pending:
            return 0
        data = b"".join(data for _, data in pending)
        if transform is not None:
            # durable before anything is appended: a kill from here on leaves the lines
            # as the replacement renamed them (the new file names the ones it replaces)
            names = b" ".join(os.path.basename(path).encode() for path, _ in pending)
            data = transform(data)
            made = _write_pending(owner, _SUPERSEDES + names + b"\n" + data)
            for path, _ in pending:
                _unlink(path)
            pending = [(made, data)]
        extra = missing_lines(read(log_path), data)
        written = append(log_path, [extra]) if extra else 0
        for path, _ in pending:
            _unlink(path)
    return written


def _pending_files(folder: str) -> list[tuple[str, bytes]]:
    """(path, lines) of the whole pending files of a folder, oldest first; a file another
    names as superseded is removed, and what is not a regular file is left alone."""
    import stat

    found: dict[str, bytes] = {}
    now = time.time()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue  # (a link or a folder: never read, never removed)
            if name.endswith(".tmp"):
                if now - st.st_mtime > 600:  # an append killed before its rename
                    os.unlink(path)
                continue
            if name.endswith(".jsonl"):
                with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
                    found[name] = f.read()
        except FileNotFoundError:
            continue
    for name, data in list(found.items()):
        if data.startswith(_SUPERSEDES):
            head, _, rest = data.partition(b"\n")
            for old in head[len(_SUPERSEDES):].decode("utf-8", "replace").split():
                if found.pop(old, None) is not None:
                    _unlink(os.path.join(folder, old))
            found[name] = rest
    return [(os.path.join(folder, name), data) for name, data in found.items()]


def _unlink(path: str) -> None:
    import contextlib  # (not on the hook's path: drains run in cortex commands)

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def access_logs(home: str) -> list[str]:
    """Every project's access log that exists."""
    projects = os.path.join(home, layout.CONTEXT, layout.PROJECTS)
    try:
        names = sorted(os.listdir(projects))
    except OSError:
        return []
    from cortexfs import wall

    paths = (os.path.join(projects, name, layout.META, layout.ACCESS_LOG) for name in names)
    # (a linked log or project is not part of the store)
    return [p for p in paths if os.path.isfile(p) and not wall.reason(os.path.dirname(projects), p)]


def drain_all(home: str | os.PathLike[str]) -> int:
    """`drain` every project's log that has lines set aside; the bytes appended."""
    from cortexfs import wall

    folder = os.path.join(home, layout.LOGS, layout.PENDING_READS)
    if wall.reason(home, folder):
        return 0
    try:
        projects = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return sum(drain(os.path.join(home, layout.CONTEXT, layout.PROJECTS, name, layout.META,
                                  layout.ACCESS_LOG)) for name in projects)


class AccessStats:
    """Per-file lifetime read count and newest timestamp, folded from a log.

    `bad_lines` counts the lines that are not log entries (a line torn by a full disk or a
    killed writer); `first_bad` is the 1-based line number of the first (0: none).
    A plain class rather than a dataclass: importing dataclasses (and with it inspect)
    would add a third to the hook's start-up time.
    """

    def __init__(self, counts: dict[str, int] | None = None,
                 newest: dict[str, str] | None = None, offset: int = 0,
                 bad_lines: int = 0, lines: int = 0, first_bad: int = 0) -> None:
        self.counts: dict[str, int] = {} if counts is None else counts
        self.newest: dict[str, str] = {} if newest is None else newest
        self.offset = offset  # bytes of the log folded so far (the log is append-only)
        self.bad_lines = bad_lines
        self.lines = lines  # lines folded so far, blank ones included
        self.first_bad = first_bad

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AccessStats):
            return NotImplemented
        return vars(self) == vars(other)

    def __repr__(self) -> str:  # (the fields in the order __init__ sets them)
        return f"AccessStats({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def fold(log_path: str | os.PathLike[str], stats: AccessStats | None = None) -> AccessStats:
    """Fold the log's lines from `stats.offset` on into `stats` (a fresh one by default).

    A partial last line (a writer mid-append) is left for the next fold. Blank lines are
    skipped; lines that are not valid log entries are counted in `bad_lines` (the first one's
    number in `first_bad`) and otherwise ignored.
    """
    stats = stats if stats is not None else AccessStats()
    entries, bad, end = _read_entries(log_path, stats.offset)
    counts, newest = stats.counts, stats.newest
    for file, ts in entries:
        counts[file] = counts.get(file, 0) + 1
        if ts > newest.get(file, ""):
            newest[file] = ts
    if bad:
        stats.bad_lines += len(bad)
        stats.first_bad = stats.first_bad or stats.lines + bad[0] + 1
    stats.lines += end[1]
    stats.offset = end[0]
    return stats


def read_entries(log_path: str | os.PathLike[str], offset: int = 0) \
        -> tuple[list[tuple[str, str]], int]:
    """(file, ts) of each valid line after byte `offset`, up to the last complete line, and
    the offset after that line: the reads `fold` counts, one by one, for a reader that needs
    more than counts (the read history of `cortex view`). A missing log has none."""
    entries, _, end = _read_entries(log_path, offset)
    return entries, end[0]


def _read_entries(log_path: str | os.PathLike[str], offset: int) \
        -> tuple[list[tuple[str, str]], list[int], tuple[int, int]]:
    """The one parse of the log: (file, ts) of each entry after byte `offset` up to the last
    complete line, the 0-based numbers (from `offset`) of the lines that are not entries,
    and (the offset after the last complete line, the lines up to it)."""
    try:
        with open(open_log(log_path, os.O_RDONLY), "rb") as f:  # (never through a link)
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:  # (a linked log too: validate reports it)
        return [], [], (offset, 0)
    end = data.rfind(b"\n") + 1
    data = data[:end]
    lines = data.count(b"\n")
    entries = _canonical_entries(data, lines)
    if entries is not None:
        return entries, [], (offset + end, lines)
    import json
    import re

    canonical = re.compile(_CANONICAL.encode())
    entries, bad = [], []
    for number, raw in enumerate(data.split(b"\n")[:-1]):
        if not raw.strip():
            continue
        try:
            m = canonical.match(raw)
            if m:
                entries.append((m.group(1).decode(), m.group(2).decode()))
                continue
            entry = json.loads(raw)
            file, ts = entry["file"], entry.get("ts", "")
            if not isinstance(file, str) or not isinstance(ts, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            bad.append(number)
            continue
        entries.append((file, ts))
    return entries, bad, (offset + end, lines)


# A line exactly as format_line writes it with no escapes: file and ts captured.
_CANONICAL = (r'^\{"file": "([^"\\\n]*)", "tool": "[^"\\\n]*", "ts": "([^"\\\n]*)", '
              r'"session": "[^"\\\n]*"\}$')


def _canonical_entries(data: bytes, lines: int) -> list[tuple[str, str]] | None:
    """(file, ts) of every line if every line is exactly as format_line writes it (no
    escapes): one regex pass instead of a JSON parse per line, which is what makes a cold
    fold of a long log fast. None when some line is not, for the line-by-line path."""
    import re

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    hits: list[tuple[str, str]] = re.findall(_CANONICAL, text, re.MULTILINE)
    return hits if len(hits) == lines else None


def resume(log_path: str | os.PathLike[str], saved: object) -> tuple[AccessStats, list]:
    """Fold an append-only log from where `saved` (a state this function returned) left off.

    Returns the stats and the new state: `[*mark, counts, newest, bad_lines, lines,
    first_bad]`, plain data any cache can keep, where `mark` is the log's `mark` at the
    offset folded so far. A log that no longer continues its mark (see `continued`) is
    folded again from byte 0. A missing log gives empty stats and the state `[]`.
    """
    try:
        fd = open_log(log_path, os.O_RDONLY)
    except OSError:  # missing, or a link (not part of the store)
        return AccessStats(), []
    try:
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    stats = AccessStats()
    if (isinstance(saved, list) and len(saved) == 8 and continued(log_path, saved[:3])
            and isinstance(saved[3], dict) and isinstance(saved[4], dict)
            and all(isinstance(n, int) for n in saved[5:])):
        stats = AccessStats(dict(saved[3]), dict(saved[4]), saved[2], *saved[5:])
    if stats.offset < size:
        stats = fold(log_path, stats)
    return stats, [*mark(log_path, stats.offset), stats.counts, stats.newest,
                   stats.bad_lines, stats.lines, stats.first_bad]


def current(project: Project, known: object = None) -> tuple[AccessStats, list]:
    """The project's log folded up to its end, and its state (`resume`): the one folded
    state every reader shares, kept in `.cache/access/<project>.bin` — only what was
    appended since anyone last folded it is read. `known`: a state the caller already
    holds (a long-lived process), used instead of reading the cache file."""
    from cortexfs import cache

    path = project.store.cache_dir / "access" / f"{project.name}.bin"
    saved = known if known is not None else cache.load(path, "access-log")
    stats, state = resume(project.access_log, saved)
    if state != saved:
        cache.save(path, "access-log", state)
    return stats, state


def mark(log_path: str | os.PathLike[str], offset: int) -> list[int]:
    """What tells later that the log still begins with its first `offset` bytes:
    [inode, CRC of up to 256 bytes before offset, offset]."""
    try:
        st = os.stat(log_path)
    except OSError:
        return [0, -1, 0]
    return [st.st_ino, _tail_crc(log_path, offset), offset]


def continued(log_path: str | os.PathLike[str], saved: object) -> bool:
    """Whether the log still begins with what `saved` (a `mark`) saw: not replaced (new
    inode), not shrunk, not rewritten in place (a merge) — so folding may go on from its
    offset."""
    if not (isinstance(saved, list) and len(saved) == 3
            and all(isinstance(n, int) for n in saved) and saved[2] > 0):
        return False
    try:
        st = os.stat(log_path)
    except OSError:
        return False
    return (saved[0] == st.st_ino and saved[2] <= st.st_size
            and saved[1] == _tail_crc(log_path, saved[2]))


def _tail_crc(log_path: str | os.PathLike[str], offset: int) -> int:
    if offset <= 0:
        return 0
    import zlib

    try:
        with open(open_log(log_path, os.O_RDONLY), "rb") as f:
            f.seek(max(0, offset - 256))
            return zlib.crc32(f.read(min(offset, 256)))
    except OSError:
        return -1


def read(log_path: str | os.PathLike[str]) -> bytes:
    """The whole log; b"" when there is none or it is a link (not part of the store)."""
    try:
        with open(open_log(log_path, os.O_RDONLY), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def missing_lines(new: bytes, *sources: bytes) -> bytes:
    """Lines of the `sources` (in order) that `new` lacks, counting repeated lines."""
    from collections import Counter

    have = Counter(new.splitlines(keepends=True))
    out = []
    for source in sources:
        for line in source.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                continue  # a writer mid-append: it will finish on its own
            if have[line] > 0:
                have[line] -= 1
            else:
                out.append(line)
    return b"".join(out)


def entry_file(line: bytes) -> str | None:
    """The `file` a log line names; None for a line that is not an entry."""
    import json

    try:
        entry = json.loads(line)
    except ValueError:
        return None
    file = entry.get("file") if isinstance(entry, dict) else None
    return file if isinstance(file, str) else None


def renamed(line: bytes, names: dict[str, str]) -> bytes | None:
    """`line` with its `file` renamed as `names` says (other fields and the line end kept,
    written as `format_line` writes); None when it is not an entry about one of `names`."""
    import json

    if entry_file(line) not in names:
        return None
    entry = json.loads(line)
    entry["file"] = names[entry["file"]]
    end = b"\n" if line.endswith(b"\n") else b""
    line_text = json.dumps(entry, ensure_ascii=False, separators=(", ", ": "))
    return line_text.encode("utf-8", "backslashreplace") + end  # (a lone surrogate: as it came)
