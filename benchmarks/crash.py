#!/usr/bin/env python3
"""kill -9 at random points of `cortex index regen`, `cortex new`, `cortex sync` and of a
`git gc`: does the next cortex command alone put everything right?

    python benchmarks/crash.py [--kills 100] [--scenario regen new sync gc] [--atoms 2000]
                               [--sync-atoms 200] [--edits 2] [--kill group|process]
                               [--seed 1] [--workdir DIR] [--verbose]

Stores come from scripts/gen_corpus.py (--atoms for regen and new; a bare remote and two
clones of a --sync-atoms store for sync). For each scenario, until --kills commands were
killed: prepare the next piece of work, start the command, wait a random delay (uniform
over the command's duration, measured on an uninterrupted run of the same work), then
SIGKILL cortex and every process it started, git included (git runs in a session of its
own, so the tree is read from /proc), as a crash or a power cut does (--kill process kills
cortex alone and lets its git finish).
A command that ended before its kill is not counted. Then the next command runs, alone:

    regen   `cortex index regen --all` again
    new     `cortex commit` (`cortex sync` in a checkout that has no `cortex commit`)
    sync    `cortex sync` again on the killed clone; then both clones sync until they agree
    gc      (the killed command is `git gc`) `cortex new`, `index regen --all` and `sync` in
            turn, the sync beside another gc; git fsck must be clean (see GcScenario)

The work, tracked to tell what must survive: regen — access-log lines (appended and then
committed, as the hook's auto-commit does) that change the refs of hundreds of atoms, plus
--edits hand edits of atom summaries; new — one atom per command, plus log lines; sync — on
each clone a new atom (both take the same id: a renumbering), log lines and, on the killed
clone, a hand edit, and log lines appended by a hook-like writer while the sync runs.

After the next command, "recovered by the next command alone" means all of:
- it exited 0 within --timeout seconds (a lock it waited out until then counts as blocking),
- `git status --porcelain -- context/` is empty and the user's index matches HEAD,
- no `.*.tmp` under context/, no merge in progress, no .git/index.lock or HEAD.lock left,
- nothing lost or duplicated in HEAD: every atom the killed command had written to disk is
  there once (and none it had not), every hand edit is there, every log line is there once;
  regen: `cortex index regen --all --check` passes; sync: after both clones settle, both
  have every atom and every log line of both exactly once, and the same tree.
Otherwise it "needed a person": the reasons are counted, and the benchmark repairs the store
the way a person would (removes stale locks, aborts a merge, commits what is pending, removes
temporaries) so that one failure does not cascade into the next kills.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs import accesslog, autocommit, layout  # noqa: E402

TAG = "crashbench"


# --- running cortex and git ------------------------------------------------------------------

def git(home: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=home, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {home}: {proc.stderr.strip()}")
    return proc.stdout


def cortex_cmd(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cortexfs", "--home", str(home), *args]


@dataclass
class Run:
    returncode: int | None  # None: killed
    seconds: float
    stderr: str = ""


def run(home: Path, args: list[str], timeout: float) -> Run:
    start = time.perf_counter()
    try:
        proc = subprocess.run(cortex_cmd(home, *args), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return Run(-1, time.perf_counter() - start, f"did not finish within {timeout:.0f}s")
    return Run(proc.returncode, time.perf_counter() - start, proc.stderr)


def run_killed(home: Path, args: list[str], delay: float, group: bool,
               argv: list[str] | None = None) -> Run:
    """Start the command (cortex `args`, or the command line `argv` in `home`); SIGKILL it
    (its process group with `group`) after `delay`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv or cortex_cmd(home, *args), cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=delay)
        return Run(proc.returncode, time.perf_counter() - start, err)
    except subprocess.TimeoutExpired:
        pass
    if group:
        tree = _tree(proc.pid)
        for pid in tree:  # stopped first, so that none of them moves on meanwhile
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        for pid in _tree(proc.pid) + tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    else:
        proc.kill()
    proc.communicate()
    if group:  # its git processes too, before anyone looks at the repository
        _wait_gone(tree)
    return Run(None, time.perf_counter() - start)


def _tree(root: int) -> list[int]:
    """`root` and every process descended from it (git runs in a session of its own, so a
    process group is not enough), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _wait_gone(pids: list[int]) -> None:
    for pid in pids:
        for _ in range(200):
            if not os.path.exists(f"/proc/{pid}") or _zombie(pid):
                break
            time.sleep(0.01)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def has_commit_command() -> bool:
    proc = subprocess.run(cortex_cmd(Path("/nonexistent"), "commit", "--help"),
                          capture_output=True, text=True)
    return proc.returncode == 0


# --- what must hold after the next command --------------------------------------------------

def head_blob(home: Path, rel: str) -> str:
    proc = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=home, capture_output=True,
                          text=True)
    return proc.stdout if proc.returncode == 0 else ""


def files_in_head_with(home: Path, line: str, under: str) -> int:
    """How many files under `under` in HEAD have the whole line `line`."""
    pattern = "^" + re.sub(r"([.^$*+?(){}|\[\]\\])", r"\\\1", line) + "$"
    proc = subprocess.run(["git", "grep", "-l", "-E", "-e", pattern, "HEAD", "--", under],
                          cwd=home, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"git grep failed: {proc.stderr.strip()}")
    return len(proc.stdout.splitlines())


def files_on_disk_with(folder: Path, line: str) -> int:
    """How many atom files in `folder` have the whole line `line`. A temporary does not count:
    `cortex new` writes its atom to one and links it to the atom's name, so a kill before the
    link leaves an atom never written, whose temporary the next command removes
    (`repo_problems` checks that none is left): undone, neither lost nor due in HEAD."""
    found = 0
    for entry in os.scandir(folder):
        if entry.name.endswith(".md"):
            try:
                with open(entry.path, encoding="utf-8", errors="replace") as f:
                    found += line in f.read().splitlines()
            except OSError:
                pass
    return found


def repo_problems(home: Path) -> list[str]:
    """What is wrong with the repository as the next command left it (empty: nothing)."""
    out = []
    if git(home, "status", "--porcelain", "--untracked-files=all", "--", "context/").strip():
        out.append("uncommitted changes under context/")
    if subprocess.run(["git", "diff", "--cached", "--quiet", "HEAD"], cwd=home).returncode:
        out.append("the user's index differs from HEAD")
    gitdir = home / ".git"
    if (gitdir / "MERGE_HEAD").exists():
        out.append("a merge in progress")
    for lock in ("index.lock", "HEAD.lock"):
        if (gitdir / lock).exists():
            out.append(f".git/{lock} left")
    if any(p.name.startswith(".") for p in (home / "context").rglob("*.tmp")):
        out.append(".*.tmp files left under context/")
    return out


def log_counts(text: str, sessions: list[str]) -> tuple[set[str], set[str]]:
    """The tracked log lines (by their session field) lost from `text`, and duplicated."""
    have = Counter(re.findall(r'"session": "([^"]*)"', text))
    return {s for s in sessions if have[s] == 0}, {s for s in sessions if have[s] > 1}


def repair(home: Path) -> None:
    """What a person would do: stale locks, a merge under way, pending files, temporaries."""
    gitdir = home / ".git"
    for lock in ("index.lock", "HEAD.lock"):
        (gitdir / lock).unlink(missing_ok=True)
    if (gitdir / "MERGE_HEAD").exists():
        git(home, "merge", "--abort", check=False)
    for tmp in (home / "context").rglob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    git(home, "add", "-A", "--", "context/")
    git(home, "commit", "-q", "--no-verify", "-m", "repair by a person", check=False)
    git(home, "reset", "-q", check=False)


# --- the tally -----------------------------------------------------------------------------

@dataclass
class Tally:
    name: str
    killed: int = 0
    recovered: int = 0
    finished_first: int = 0  # ended before the kill: not counted
    reasons: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    duplicated: Counter[str] = field(default_factory=Counter)
    seen: set[tuple[str, str, str]] = field(default_factory=set)  # each loss counted once
    delays: list[float] = field(default_factory=list)
    final: str = ""  # what is missing for good once everything settled (sync)
    after: str = ""  # what a last check found once all kills were done (gc)
    details: list[str] = field(default_factory=list)  # this kill's lost items, by name

    def note(self, counter: str, what: str, keys: set[str]) -> bool:
        """Count the lost (or duplicated) items `keys` not counted yet; True if there were
        such new ones (an item lost once is not this kill's doing the next time)."""
        new = {k for k in keys if (counter, what, k) not in self.seen}
        self.seen.update((counter, what, k) for k in new)
        if new:
            self.details.append(f"{counter} {what}: {', '.join(sorted(new))}")
        (self.lost if counter == "lost" else self.duplicated)[what] += len(new)
        return bool(new)

    def record(self, problems: list[str]) -> None:
        self.killed += 1
        if problems:
            self.reasons.update(set(problems))
        else:
            self.recovered += 1

    def report(self) -> str:
        person = self.killed - self.recovered
        lines = [f"{self.name}: {self.killed} killed, {self.recovered} recovered by the next "
                 f"command alone, {person} needed a person"]
        for reason, n in self.reasons.most_common():
            lines.append(f"    {n:4d} × {reason}")
        what = ("atoms", "edits", "log lines")
        lines.append("    lost after the next command: "
                     + ", ".join(f"{self.lost[w]} {w}" for w in what)
                     + "; duplicated: " + ", ".join(f"{self.duplicated[w]} {w}"
                                                    for w in ("atoms", "log lines")))
        if self.final:
            lines.append(f"    for good (at the end, after every repair and sync): {self.final}")
        if self.after:
            lines.append(f"    afterwards: {self.after}")
        if self.delays:
            lines.append(f"    kill delays {min(self.delays):.2f}–{max(self.delays):.2f} s "
                         f"(median {statistics.median(self.delays):.2f}); "
                         f"{self.finished_first} commands ended before their kill (not counted)")
        return "\n".join(lines)


# --- stores ----------------------------------------------------------------------------------

def make_corpus(out: Path, atoms: int, projects: int, seed: int) -> Path:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_corpus.py"), str(out),
                    "--atoms", str(atoms), "--projects", str(projects), "--seed", str(seed)],
                   check=True, stdout=subprocess.DEVNULL)
    # the first regeneration folds the generated logs into a thousand atoms: done once here
    subprocess.run(cortex_cmd(out, "index", "regen", "--all"), check=True,
                   stdout=subprocess.DEVNULL)
    return out


def copy_with_remote(corpus: Path, work: Path, name: str) -> Path:
    """A copy of the corpus at work/name, pushed to a bare remote of its own (so that the
    next command may be `cortex sync`)."""
    home = work / name
    shutil.copytree(corpus, home, symlinks=True)
    remote = work / f"{name}-remote.git"
    git(work, "init", "-q", "--bare", str(remote))
    git(home, "remote", "add", "origin", str(remote))
    git(home, "push", "-q", "-u", "origin", "HEAD")
    return home


def projects_of(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "context" / "projects").iterdir() if p.is_dir())


def atom_names(home: Path, project: str) -> list[str]:
    folder = home / "context" / "projects" / project / "experiments"
    return sorted(n for n in os.listdir(folder) if re.match(r"EXP-\d+\.md$", n))


def append_lines(home: Path, project: str, sessions: list[str], rng: random.Random,
                 names: list[str]) -> None:
    lines = [accesslog.format_line(rng.choice(names), "Read", s) for s in sessions]
    accesslog.append(home / "context" / "projects" / project / "_meta" / layout.ACCESS_LOG,
                     lines)


# --- scenarios -------------------------------------------------------------------------------

class Scenario:
    name = ""
    command: list[str] = []

    def __init__(self, args: argparse.Namespace, work: Path, rng: random.Random) -> None:
        self.args, self.work, self.rng = args, work, rng
        self.tally = Tally(self.name)
        self.i = 0

    def prepare(self) -> None:
        """The next piece of work, before the command runs."""

    def killed_now(self) -> None:
        """Look at what the killed command left (before anything else runs)."""

    def follow_up(self) -> Run:
        raise NotImplementedError

    def check(self) -> list[str]:
        raise NotImplementedError

    def home_of_kill(self) -> Path:
        raise NotImplementedError

    def argv(self) -> list[str] | None:
        """The killed command line when it is not cortex's `command`."""
        return None

    def during(self) -> Callable[[], None] | None:
        """Start whatever runs beside the command; a function that stops it (and returns
        once it has stopped: nothing of it may run on into the next command)."""
        return None

    def calibrate(self) -> float:
        """The duration of an uninterrupted run of the same work (the second of two: the
        first one warms the caches a store has in daily use)."""
        seconds = 0.0
        for _ in range(2):
            self.i += 1
            self.prepare()
            stop = self.during()
            result = run(self.home_of_kill(), self.command, self.args.timeout)
            if stop:
                stop()
            if result.returncode != 0:
                raise SystemExit(f"{self.name}: the uninterrupted run failed: {result.stderr}")
            self.settle_after_calibration()
            seconds = result.seconds
        return seconds

    def settle_after_calibration(self) -> None:
        pass

    def run(self) -> Tally:
        duration = self.calibrate()
        print(f"{self.name}: an uninterrupted run takes {duration:.2f} s", flush=True)
        attempts = 0
        while self.tally.killed < self.args.kills and attempts < self.args.kills * 3:
            attempts += 1
            self.i += 1
            self.prepare()
            delay = self.rng.uniform(0, duration)
            stop = self.during()
            result = run_killed(self.home_of_kill(), self.command, delay,
                                self.args.kill == "group", self.argv())
            if stop:
                stop()
            if result.returncode is not None:
                self.tally.finished_first += 1
                if result.returncode != 0:
                    print(f"  {self.name} #{self.i}: failed without a kill: "
                          f"{result.stderr.strip()[-300:]}", flush=True)
                self.follow_up()  # whatever it left half-done: not this benchmark's subject
                continue
            self.tally.delays.append(delay)
            self.killed_now()
            kept = self.keep_snapshot()
            self.tally.details.clear()
            follow = self.follow_up()
            problems = []
            if follow.returncode != 0:
                first = (follow.stderr.strip().splitlines() or ["(no message)"])[-1]
                problems.append(f"next command failed: {_generic(first)}")
            problems += self.check()
            self.tally.record(problems)
            if self.args.verbose or problems:
                print(f"  {self.name} #{self.i} killed at {delay:.2f} s: "
                      f"{'; '.join(problems) or 'recovered'}{_pending(self.homes())}",
                      flush=True)
            if kept is not None:
                if problems:
                    (kept / "next-command.txt").write_text(
                        f"exit {follow.returncode}\n{follow.stderr}\n"
                        + "\n".join(problems + self.tally.details) + "\n")
                else:
                    shutil.rmtree(kept, ignore_errors=True)
            if problems:
                for home in self.homes():
                    repair(home)
        self.finish()
        return self.tally

    def log_problems(self, home: Path, project: str, sessions: list[str]) -> list[str]:
        """Whether each tracked log line of `project` is in HEAD once (counted)."""
        log = head_blob(home, f"context/projects/{project}/_meta/{layout.ACCESS_LOG}")
        lost, dup = log_counts(log, sessions)
        if self.tally.note("lost", "log lines", lost) | \
                self.tally.note("duplicated", "log lines", dup):
            return ["log lines lost or duplicated in HEAD"]
        return []

    def finish(self) -> None:
        """Anything to count once all kills are done."""

    def keep_snapshot(self) -> Path | None:
        """With --keep-failures: a copy of the stores as the kill left them (removed again
        when the next command recovers), to look into a failure afterwards."""
        if not self.args.keep_failures:
            return None
        kept = self.work / f"failure-{self.name}-{self.i}"
        shutil.rmtree(kept, ignore_errors=True)
        for folder in self.snapshot_dirs():
            # (a `git gc --auto` the killed git detached may still be packing objects)
            with contextlib.suppress(shutil.Error):
                shutil.copytree(folder, kept / folder.name, symlinks=True)
        return kept

    def snapshot_dirs(self) -> list[Path]:
        return self.homes()

    def homes(self) -> list[Path]:
        return [self.home_of_kill()]


def _pending(homes: list[Path]) -> str:
    """A few of the uncommitted paths, to tell which part of cortex left them."""
    out = []
    for home in homes:
        status = git(home, "status", "--porcelain", "--untracked-files=all", "--",
                     "context/").splitlines()
        if status:
            shown = ", ".join(line[:2] + " " + line[3:].rsplit("/", 1)[-1]
                              for line in status[:4])
            out.append(f"{home.name}: {shown}{' …' if len(status) > 4 else ''}")
        temps = [os.path.relpath(t, home) for t in (home / "context").rglob(".*.tmp")]
        if temps:
            out.append(f"{home.name}: {len(temps)} temporaries, e.g. {temps[0]}")
    return f" [{'; '.join(out)}]" if out else ""


def _generic(message: str) -> str:
    """A message with its variable parts blanked, so that the same failure counts once."""
    message = re.sub(r"/\S+", "PATH", message)
    message = re.sub(r"\b[0-9a-f]{7,40}\b", "SHA", message)
    return re.sub(r"\b(EXP|K|PAT)-\d+\w?", r"\1-N", message)[:160]


class RegenScenario(Scenario):
    name = "regen"
    command = ["index", "regen", "--all"]

    def __init__(self, args: argparse.Namespace, work: Path, rng: random.Random,
                 corpus: Path) -> None:
        super().__init__(args, work, rng)
        self.home = work / "regen"
        shutil.copytree(corpus, self.home, symlinks=True)
        self.sessions: list[str] = []
        self.edits: dict[str, str] = {}  # atom path (relative) → the summary it must have

    def home_of_kill(self) -> Path:
        return self.home

    def prepare(self) -> None:
        for project in projects_of(self.home):
            names = atom_names(self.home, project)
            sessions = [f"{TAG}-regen-{self.i}-{project}-{k}" for k in range(75)]
            append_lines(self.home, project, sessions, self.rng, names)
            self.sessions += sessions
        # the hook's auto-commit commits the logs; the regen then folds them into the atoms
        autocommit.commit_logs(str(self.home))
        for _ in range(self.args.edits):
            project = self.rng.choice(projects_of(self.home))
            name = self.rng.choice(atom_names(self.home, project))
            path = self.home / "context" / "projects" / project / "experiments" / name
            summary = f"{TAG} edit {self.i} {name}"
            text = path.read_text(encoding="utf-8")
            path.write_text(re.sub(r"(?m)^summary: .*$", f"summary: {summary}", text, count=1),
                            encoding="utf-8")
            self.edits[os.path.relpath(path, self.home)] = summary

    def follow_up(self) -> Run:
        return run(self.home, self.command, self.args.timeout)

    def check(self) -> list[str]:
        problems = repo_problems(self.home)
        lost_lines: set[str] = set()
        dup_lines: set[str] = set()
        for project in projects_of(self.home):
            log = head_blob(self.home, f"context/projects/{project}/_meta/{layout.ACCESS_LOG}")
            lost, dup = log_counts(log, [s for s in self.sessions if f"-{project}-" in s])
            lost_lines |= lost
            dup_lines |= dup
        uncommitted = [rel for rel, summary in self.edits.items()
                       if f"summary: {summary}\n" not in head_blob(self.home, rel)]
        lost_edits = {rel for rel in uncommitted if f"summary: {self.edits[rel]}\n" not in
                      (self.home / rel).read_text(encoding="utf-8", errors="replace")}
        if self.tally.note("lost", "log lines", lost_lines) | \
                self.tally.note("duplicated", "log lines", dup_lines):
            problems.append("log lines lost or duplicated in HEAD")
        if self.tally.note("lost", "edits", lost_edits):
            problems.append("hand edits lost")
        elif uncommitted:
            problems.append("hand edits left uncommitted")
        check = run(self.home, [*self.command, "--check"], self.args.timeout)
        if check.returncode != 0:
            problems.append("`index regen --check` finds stale files (refs or indexes)")
        if not problems:
            self.edits.clear()  # committed: later edits of the same atoms supersede them
        return problems


class NewScenario(Scenario):
    name = "new"

    def __init__(self, args: argparse.Namespace, work: Path, rng: random.Random,
                 corpus: Path) -> None:
        super().__init__(args, work, rng)
        self.home = copy_with_remote(corpus, work, "new")
        self.project = projects_of(self.home)[0]
        self.folder = self.home / "context" / "projects" / self.project / "experiments"
        self.next = ["commit"] if has_commit_command() else ["sync"]
        self.sessions: list[str] = []
        self.on_disk = 0

    @property
    def command(self) -> list[str]:  # type: ignore[override]
        return ["new", "exp", "-p", self.project, "-s", self.token, "-t", TAG]

    @property
    def token(self) -> str:
        return f"{TAG} new {self.i}"

    def home_of_kill(self) -> Path:
        return self.home

    def prepare(self) -> None:
        sessions = [f"{TAG}-new-{self.i}-{k}" for k in range(3)]
        append_lines(self.home, self.project, sessions, self.rng, atom_names(self.home,
                                                                             self.project))
        self.sessions += sessions

    def settle_after_calibration(self) -> None:
        self.follow_up()

    def killed_now(self) -> None:
        self.on_disk = files_on_disk_with(self.folder, f"summary: {self.token}")

    def follow_up(self) -> Run:
        return run(self.home, self.next, self.args.timeout)

    def check(self) -> list[str]:
        problems = repo_problems(self.home)
        under = f"context/projects/{self.project}/experiments"
        in_head = files_in_head_with(self.home, f"summary: {self.token}", under)
        if self.tally.note("duplicated", "atoms", {self.token} if in_head > 1 else set()):
            problems.append("the atom is in HEAD twice")
        if self.tally.note("lost", "atoms", {self.token} if self.on_disk and not in_head
                           else set()):
            problems.append("an atom written before the kill is not in HEAD")
        if in_head and not self.on_disk:
            problems.append("an atom nobody saw written is in HEAD")
        return problems + self.log_problems(self.home, self.project, self.sessions)


class SyncScenario(Scenario):
    name = "sync"
    command = ["sync"]

    def __init__(self, args: argparse.Namespace, work: Path, rng: random.Random,
                 corpus: Path) -> None:
        super().__init__(args, work, rng)
        remote = work / "sync-remote.git"
        git(work, "clone", "-q", "--bare", str(corpus), str(remote))
        self.a, self.b = work / "sync-a", work / "sync-b"
        for home in (self.a, self.b):
            git(work, "clone", "-q", str(remote), str(home))
        self.project = projects_of(self.a)[0]
        self.summaries: list[str] = []
        self.sessions: list[str] = []
        self.edits: list[tuple[str, str]] = []  # (atom rel path, line added by hand)

    def home_of_kill(self) -> Path:
        return self.b

    def homes(self) -> list[Path]:
        return [self.a, self.b]

    def snapshot_dirs(self) -> list[Path]:
        return [self.a, self.b, self.work / "sync-remote.git"]

    def _new(self, home: Path, who: str) -> None:
        summary = f"{TAG} sync {self.i} {who}"
        result = run(home, ["new", "exp", "-p", self.project, "-s", summary, "-t", TAG],
                     self.args.timeout)
        if result.returncode != 0:
            raise SystemExit(f"cortex new on {who} failed: {result.stderr}")
        self.summaries.append(summary)

    def _lines(self, home: Path, who: str, n: int) -> None:
        sessions = [f"{TAG}-sync-{self.i}-{who}-{k}-{time.monotonic_ns()}" for k in range(n)]
        append_lines(home, self.project, sessions, self.rng, atom_names(home, self.project))
        self.sessions += sessions

    def prepare(self) -> None:
        self._new(self.a, "a")
        self._lines(self.a, "a", 5)
        result = run(self.a, ["sync"], self.args.timeout)
        if result.returncode != 0:
            raise SystemExit(f"sync on a failed: {result.stderr}")
        # (an atom older than this round's: the new one is renumbered by the sync)
        name = self.rng.choice(atom_names(self.b, self.project))
        self._new(self.b, "b")  # the same id as a's: the sync renumbers it
        self._lines(self.b, "b", 5)
        rel = f"context/projects/{self.project}/experiments/{name}"
        line = f"{TAG} hand edit {self.i} on b\n"
        with open(self.b / rel, "a", encoding="utf-8") as f:
            f.write(line)
        self.edits.append((rel, line))

    def during(self) -> Callable[[], None]:
        """A hook appending a line every --hook-interval seconds to the killed clone while
        its sync runs."""
        stop = threading.Event()

        def hook() -> None:
            while not stop.is_set():
                self._lines(self.b, "hook", 1)
                stop.wait(self.args.hook_interval)

        thread = threading.Thread(target=hook, daemon=True)
        thread.start()

        def stopped() -> None:
            stop.set()
            thread.join()

        return stopped

    def settle_after_calibration(self) -> None:
        self._settle()

    def follow_up(self) -> Run:
        return run(self.b, ["sync"], self.args.timeout)

    def _settle(self) -> list[str]:
        failed = []
        for home in (self.a, self.b, self.a):
            result = run(home, ["sync"], self.args.timeout)
            if result.returncode != 0:
                failed.append(f"settling sync failed: "
                              f"{_generic(result.stderr.strip().splitlines()[-1])}")
        return failed

    def finish(self) -> None:
        """Repair both clones if they need it, sync them, and count what is gone for good
        (a loss after a failed next command may only be waiting for its sync)."""
        for home in (self.a, self.b):
            repair(home)
        self._settle()
        gone: Counter[str] = Counter()
        under = f"context/projects/{self.project}/experiments"
        log_rel = f"context/projects/{self.project}/_meta/{layout.ACCESS_LOG}"
        for home in (self.a, self.b):
            gone["atoms"] += sum(1 for s in self.summaries
                                 if files_in_head_with(home, f"summary: {s}", under) != 1)
            lost, dup = log_counts(head_blob(home, log_rel), self.sessions)
            gone["log lines"] += len(lost) + len(dup)
            gone["edits"] += sum(1 for rel, line in self.edits
                                 if line not in head_blob(home, rel))
        self.tally.final = (f"{gone['atoms']} atoms, {gone['edits']} edits, "
                            f"{gone['log lines']} log lines missing or duplicated "
                            "(both clones counted)")

    def check(self) -> list[str]:
        problems = repo_problems(self.b)
        problems += self._settle()
        under = f"context/projects/{self.project}/experiments"
        log_rel = f"context/projects/{self.project}/_meta/{layout.ACCESS_LOG}"
        trees = set()
        for home in (self.a, self.b):
            trees.add(git(home, "rev-parse", "HEAD^{tree}").strip())
            counts = {s: files_in_head_with(home, f"summary: {s}", under)
                      for s in self.summaries}
            if self.tally.note("lost", "atoms", {s for s, n in counts.items() if n == 0}):
                problems.append("an atom is missing after the clones settled")
            if self.tally.note("duplicated", "atoms", {s for s, n in counts.items() if n > 1}):
                problems.append("an atom is duplicated after the clones settled")
            lost, dup = log_counts(head_blob(home, log_rel), self.sessions)
            if self.tally.note("lost", "log lines", lost) | \
                    self.tally.note("duplicated", "log lines", dup):
                problems.append("log lines lost or duplicated after the clones settled")
            if self.tally.note("lost", "edits", {line for rel, line in self.edits
                                                  if line not in head_blob(home, rel)}):
                problems.append("a hand edit is missing after the clones settled")
        if len(trees) != 1:
            problems.append("the clones did not converge")
        return sorted(set(problems))


class GcScenario(Scenario):
    """kill -9 of a `git gc` (as cortex starts one when packing is due, or a person runs
    one) at a random point, with every process it started: the next cortex command — `new`,
    `index regen --all` and `sync` in turn, the sync beside another gc that runs on — must
    finish alone, with `git fsck` clean and every atom and log line in HEAD once. At the
    end, a store set to `gc.auto 30` must pack itself again after one `cortex new`."""

    name = "gc"
    command = ["(git gc)"]
    NEXT = ("new", "regen", "sync")

    def __init__(self, args: argparse.Namespace, work: Path, rng: random.Random,
                 corpus: Path) -> None:
        super().__init__(args, work, rng)
        self.home = copy_with_remote(corpus, work, "gc")
        git(self.home, "config", "gc.auto", "0")  # (cortex's own gc: only in `finish`)
        self.project = projects_of(self.home)[0]
        self.summaries: list[str] = []
        self.sessions: list[str] = []
        self.left: Counter[str] = Counter()  # what the killed gcs left, by file name

    def home_of_kill(self) -> Path:
        return self.home

    def killed_now(self) -> None:
        from cortexfs import git as cortex_git

        gitdir = self.home / ".git"
        self.left.update(str(p.relative_to(gitdir)) for p in cortex_git.gc_leftovers(self.home))
        self.left.update(f"objects/pack/{re.sub(r'_[^_]*$', '_*', p.name)}"
                         for p in (gitdir / "objects" / "pack").glob("tmp_*"))

    def argv(self) -> list[str]:
        return ["git", "gc", "--quiet"]

    def calibrate(self) -> float:
        seconds = 0.0
        for _ in range(2):
            self.i += 1
            self.prepare()
            start = time.perf_counter()
            git(self.home, "gc", "--quiet")
            seconds = time.perf_counter() - start
            self.follow_up()
        return seconds

    def _new(self, summary: str) -> Run:
        result = run(self.home, ["new", "exp", "-p", self.project, "-s", summary, "-t", TAG],
                     self.args.timeout)
        if result.returncode == 0:
            self.summaries.append(summary)
        return result

    def prepare(self) -> None:
        """Loose objects for the gc to pack, reflog entries for it to expire."""
        result = self._new(f"{TAG} gc {self.i}")
        if result.returncode != 0:
            raise SystemExit(f"cortex new before a gc failed: {result.stderr}")
        sessions = [f"{TAG}-gc-{self.i}-{k}" for k in range(3)]
        append_lines(self.home, self.project, sessions, self.rng,
                     atom_names(self.home, self.project))
        self.sessions += sessions

    def follow_up(self) -> Run:
        step = self.NEXT[self.i % len(self.NEXT)]
        if step == "new":
            return self._new(f"{TAG} gc {self.i} next")
        if step == "regen":
            return run(self.home, ["index", "regen", "--all"], self.args.timeout)
        beside = subprocess.Popen(["git", "gc", "--quiet"], cwd=self.home,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return run(self.home, ["sync"], self.args.timeout)
        finally:
            beside.wait()

    def check(self) -> list[str]:
        problems = repo_problems(self.home)
        fsck = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"],
                              cwd=self.home, capture_output=True, text=True)
        if fsck.returncode != 0 or fsck.stdout.strip():
            problems.append("git fsck finds errors")
        under = f"context/projects/{self.project}/experiments"
        counts = {s: files_in_head_with(self.home, f"summary: {s}", under)
                  for s in self.summaries}
        if self.tally.note("lost", "atoms", {s for s, n in counts.items() if n == 0}):
            problems.append("an atom is missing from HEAD")
        if self.tally.note("duplicated", "atoms", {s for s, n in counts.items() if n > 1}):
            problems.append("an atom is in HEAD twice")
        return problems + self.log_problems(self.home, self.project, self.sessions)

    def finish(self) -> None:
        """After every kill: does cortex's own gc still pack the store? 600 hand-written
        files committed by `cortex commit` make it due at gc.auto 30."""
        from cortexfs import git as cortex_git

        git(self.home, "config", "gc.auto", "30")
        folder = self.home / "context" / "crash-gc-notes"
        folder.mkdir(exist_ok=True)
        sample = cortex_git.loose_sample(self.home)
        for attempt in range(5):  # (git's estimate must move for cortex to ask again)
            for k in range(600):
                (folder / f"n{k}.md").write_text(f"note {k} {attempt}\n", encoding="utf-8")
            result = run(self.home, ["commit"], self.args.timeout)
            if cortex_git.loose_sample(self.home) != sample:
                break
        loose = int(git(self.home, "count-objects").split()[0])
        deadline = time.monotonic() + 600
        time.sleep(0.5)  # (the gc it started is a git process by then)
        while time.monotonic() < deadline and cortex_git.git_processes(self.home):
            time.sleep(0.1)
        after = int(git(self.home, "count-objects").split()[0])
        left = [str(p.relative_to(self.home)) for p in [
            *cortex_git.gc_leftovers(self.home),
            *(self.home / ".git" / "objects" / "pack").glob("tmp_*")]]
        self.tally.after = (f"gc.auto 30 and `cortex commit` of 600 files (exit "
                            f"{result.returncode}): {loose} loose objects when it ended, "
                            f"{after} once its gc finished; gc's files left: "
                            f"{', '.join(left) or 'none'}. The kills left: "
                            + (", ".join(f"{n} × {name}" for name, n in self.left.most_common())
                               or "nothing"))


# --- main ------------------------------------------------------------------------------------

def isolate(work: Path) -> None:
    """Own HOME, git config and identity: nothing of the user's is read or written."""
    home = work / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1",
                      GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), CORTEX_AUTOCOMMIT="0",
                      CORTEX_HOME=str(work / "unused"))
    for role in ("AUTHOR", "COMMITTER"):
        os.environ[f"GIT_{role}_NAME"] = "Crash Bench"
        os.environ[f"GIT_{role}_EMAIL"] = "crash@cortexfs.invalid"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="kills per scenario")
    parser.add_argument("--scenario", nargs="+", choices=("regen", "new", "sync", "gc"),
                        default=["regen", "new", "sync", "gc"])
    parser.add_argument("--atoms", type=int, default=2000, help="store size for regen and new")
    parser.add_argument("--sync-atoms", type=int, default=200, help="store size for sync")
    parser.add_argument("--edits", type=int, default=2, help="hand edits before each regen")
    parser.add_argument("--hook-interval", type=float, default=0.2,
                        help="seconds between the hook's appends while a sync runs")
    parser.add_argument("--kill", choices=("group", "process"), default="group",
                        help="kill cortex with every process it started, git included "
                        "(group), or cortex alone")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds the next command may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep the stores here (default: a "
                        "temporary folder, removed at the end)")
    parser.add_argument("--verbose", action="store_true", help="one line per kill")
    parser.add_argument("--keep-failures", action="store_true", help="keep a copy of the "
                        "stores as each failed kill left them, in --workdir")
    args = parser.parse_args()
    if args.keep_failures and args.workdir is None:
        parser.error("--keep-failures needs --workdir")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="cortex-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    isolate(work)
    rng = random.Random(args.seed)
    tallies = []
    try:
        started = time.perf_counter()
        if {"regen", "new", "gc"} & set(args.scenario):
            corpus = make_corpus(work / "corpus", args.atoms, 4, args.seed)
        if "sync" in args.scenario:
            sync_corpus = make_corpus(work / "sync-corpus", args.sync_atoms, 2, args.seed)
        for name in args.scenario:
            if name == "regen":
                scenario: Scenario = RegenScenario(args, work, rng, corpus)
            elif name == "new":
                scenario = NewScenario(args, work, rng, corpus)
            elif name == "gc":
                scenario = GcScenario(args, work, rng, corpus)
            else:
                scenario = SyncScenario(args, work, rng, sync_corpus)
            tallies.append(scenario.run())
            print(tallies[-1].report(), flush=True)
        victim = ("cortex process and every process it started (git included)"
                  if args.kill == "group" else "cortex process")
        print(f"\n--- {args.kills} kills per scenario, kill -9 of the {victim}, "
              f"{time.perf_counter() - started:.0f} s in all")
        for tally in tallies:
            print(tally.report())
        print(json.dumps({t.name: {"killed": t.killed, "recovered": t.recovered,
                                   "needed_a_person": t.killed - t.recovered,
                                   "lost": dict(t.lost), "duplicated": dict(t.duplicated),
                                   "reasons": dict(t.reasons)} for t in tallies}))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
