"""The store's invariant under random use, with real `cortex` processes and real git.

A hypothesis state machine runs random sequences of `cortex new`, hand edits (a summary, a
body, a new atom file, a deleted atom), `index regen`, reads through the real hook script
(which starts the detached access-log committer), `tasks add/done`, `decision new`,
`cortex commit`, and commands interrupted by SIGINT or killed with SIGKILL at a random
moment. After every command that completed it checks:

- `git status --porcelain -- context/` is empty (unless the command ran with --no-commit,
  or a hand edit or an interrupted command came after the last completed one);
- in HEAD, every atom an index.md lists exists, with the summary the row shows;
- no file under context/ is torn (every atom parses, TASKS.yaml is YAML, each access-log
  line is JSON ending in a newline), and no temporary file a killed cortex left is there
  (the next holder of the store's git lock removes them);
- the user's git index matches HEAD (`git diff --cached --quiet`) once a command completed
  after the last kill.

In the suite it runs with a fixed seed and a small budget (well under a minute);
`benchmarks/invariant.py` runs the same machine longer, with fresh seeds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

REPO = Path(__file__).resolve().parent.parent
HOOK = REPO / "hooks" / "memory-ref-tracker"
def _before_handler(err: str) -> bool:
    """Whether `err` is Python's KeyboardInterrupt traceback of a signal that came before
    `interrupt.install()` ran: cortex's only frames are the first imports, at module level,
    of the package, of cortexfs.interrupt, and of __main__ (whose imports all come first)."""
    frames = re.findall(r'File "[^"]*/cortexfs/([^"]+)", line \d+, in (\S+)\n\s*(.*)', err)
    return err.rstrip().endswith("\nKeyboardInterrupt") and all(
        fn == "<module>" and (name in ("__init__.py", "interrupt.py")
                              or name == "__main__.py" and code.startswith(("import ", "from ")))
        for name, fn, code in frames)


PROJECTS = ("alpha", "beta")
WORDS = ("cache", "latency", "shard", "replica", "queue", "retry", "budget", "token", "merge",
         "drift", "signal", "sample", "metric", "warmup", "rollback", "canary", "window")
ATOM_FILE = re.compile(r"^(EXP|K|PAT)-\d+\.md$")
ROW = re.compile(r"^\|\s*\[([A-Z]+-\d+[a-z]?)\]\(([^)]+)\)\s*\|")
TEMP = re.compile(r"^\..+\.tmp$")

summaries = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(" ".join)
# Which existing atom (task) a step acts on: an index into what exists then. Drawing from the
# files themselves would make the draws depend on timing (an interrupted `new` may or may
# not have written its atom), which hypothesis refuses as flaky data generation.
picks = st.integers(min_value=0, max_value=10_000)


def cortex_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "CORTEX_"))}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env.update({"HOME": str(home), "CORTEX_HOME": str(tmp / "cortex"),
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                "CORTEX_AUTOCOMMIT_DEBOUNCE": "0.05", "PYTHONPATH": str(REPO)})
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = "Cortex Test"
        env[f"GIT_{role}_EMAIL"] = "test@cortexfs.invalid"
    return env


def index_rows(text: str) -> list[tuple[str, str, str]]:
    """(id, link target, summary cell) of every atom row of an index.md."""
    rows = []
    summary_col = None
    for line in text.splitlines():
        if line.startswith("| ID |"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            summary_col = cells.index("Summary") if "Summary" in cells else None
            continue
        m = ROW.match(line)
        if m and summary_col is not None:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((m[1], m[2], cells[summary_col]))
    return rows


class CortexMachine(RuleBasedStateMachine):
    """A store used at random by a person, an agent and its hook; killed now and then."""

    stats: dict[str, int] = {}  # what the runs did, for benchmarks/invariant.py
    root: Path | None = None  # where each run's folder goes (None: the system's temp)

    @classmethod
    def count(cls, what: str) -> None:
        cls.stats[what] = cls.stats.get(what, 0) + 1

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="cortex-invariant-", dir=self.root))
        self.env = cortex_env(self.tmp)
        self.home = self.tmp / "cortex"
        self.clean_expected = False  # the last thing done was a completed, committing command
        self.temps_cleared = False  # a command completed since the last kill
        self.tasks_added: dict[str, list[str]] = {p: [] for p in PROJECTS}

    # --- running things ------------------------------------------------------------------

    def cortex(self, *args: str, expect: tuple[int, ...] = (0,),
               ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "cortexfs", *args], env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode in expect, (
            f"cortex {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=self.home, env=self.env, capture_output=True,
                              text=True)

    def completed(self, proc: subprocess.CompletedProcess[str] | None = None,
                  no_commit: bool = False) -> None:
        self.clean_expected = not no_commit
        self.temps_cleared = True
        self.count("commands completed" + (" (--no-commit)" if no_commit else ""))

    def atoms(self, project: str | None = None) -> list[Path]:
        out = []
        for name in [project] if project else PROJECTS:
            root = self.home / "context" / "projects" / name
            for folder in ("experiments", "knowledge", "patterns"):
                d = root / folder
                if d.is_dir():
                    out += sorted(p for p in d.iterdir() if ATOM_FILE.match(p.name))
        return out

    def wait_for_committer(self) -> None:
        lock = self.home / ".locks" / "autocommit.lock"
        deadline = time.monotonic() + 30
        from cortexfs.autocommit import is_locked

        while is_locked(lock):
            assert time.monotonic() < deadline, "the access-log committer never finished"
            time.sleep(0.05)

    # --- set-up --------------------------------------------------------------------------

    @initialize()
    def setup(self) -> None:
        self.cortex("init")
        for name in PROJECTS:
            self.cortex("project", "new", name)
        self.cortex("new", "exp", "-p", PROJECTS[0], "-s", "first experiment", "-t", "seed")
        self.completed()

    def teardown(self) -> None:
        self.wait_for_committer()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- commands --------------------------------------------------------------------------

    @rule(project=st.sampled_from(PROJECTS), kind=st.sampled_from(["exp", "k", "pat"]),
          summary=summaries, no_commit=st.sampled_from([False, False, False, True]))
    def new(self, project: str, kind: str, summary: str, no_commit: bool) -> None:
        args = ["new", kind, "-p", project, "-s", summary, "-t", "gen"]
        if kind != "exp":
            exps = [p.stem for p in self.atoms(project) if p.name.startswith("EXP-")]
            if not exps:
                kind, args[1] = "exp", "exp"
            else:
                args += ["--evidence", exps[0]]
        if no_commit:
            args.append("--no-commit")
        self.completed(self.cortex(*args), no_commit=no_commit)

    @rule(target_all=st.booleans(), project=st.sampled_from(PROJECTS))
    def regen(self, target_all: bool, project: str) -> None:
        self.completed(self.cortex("index", "regen", *(["--all"] if target_all else [project])))

    @rule(project=st.sampled_from(PROJECTS), text=summaries)
    def tasks_add(self, project: str, text: str) -> None:
        proc = self.cortex("tasks", "add", text, "-p", project)
        self.tasks_added[project].append(proc.stdout.strip())
        self.completed(proc)

    @rule(pick=picks)
    def tasks_done(self, pick: int) -> None:
        added = [(p, t) for p in PROJECTS for t in self.tasks_added[p]]
        if not added:
            return
        project, task = added[pick % len(added)]
        self.completed(self.cortex("tasks", "done", task, "-p", project))

    @rule(title=summaries, project=st.sampled_from([None, *PROJECTS]))
    def decision_new(self, title: str, project: str | None) -> None:
        self.completed(self.cortex("decision", "new", title,
                                   *(["-p", project] if project else [])))

    @rule(how=st.sampled_from(["commit", "commit -m", "sync"]))
    def commit(self, how: str) -> None:
        # `cortex sync` with no remote commits locally
        args = {"commit": ["commit"], "commit -m": ["commit", "-m", "hand edits"],
                "sync": ["sync"]}[how]
        self.completed(self.cortex(*args))

    def pick_atom(self, pick: int) -> Path | None:
        atoms = self.atoms()
        return atoms[pick % len(atoms)] if atoms else None

    @rule(pick=picks)
    def hook_read(self, pick: int) -> None:
        atom = self.pick_atom(pick)
        if atom is None:
            return
        payload = json.dumps({"session_id": "machine", "cwd": str(self.home),
                              "tool_name": "Read", "tool_input": {"file_path": str(atom)}})
        proc = subprocess.run([sys.executable, str(HOOK), "--home", str(self.home)],
                              input=payload, env=self.env, capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
        self.count("hook reads")
        self.wait_for_committer()
        # the committer commits the logs only: hand edits made before stay pending

    # --- hand edits (not commands: nothing is checked until the next command) -------------

    @rule(pick=picks, summary=summaries)
    def hand_edit_summary(self, pick: int, summary: str) -> None:
        path = self.pick_atom(pick)
        if path is None:
            return
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"(?m)^summary: .*$", f"summary: \"{summary} edited\"", text,
                               count=1), encoding="utf-8")
        self.clean_expected = False

    @rule(pick=picks, line=summaries)
    def hand_edit_body(self, pick: int, line: str) -> None:
        path = self.pick_atom(pick)
        if path is None:
            return
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"\n{line}\n")
        self.clean_expected = False

    @rule(project=st.sampled_from(PROJECTS), summary=summaries)
    def hand_new_atom(self, project: str, summary: str) -> None:
        folder = self.home / "context" / "projects" / project / "experiments"
        numbers = [int(p.stem[4:]) for p in self.atoms(project) if p.name.startswith("EXP-")]
        atom_id = f"EXP-{max(numbers, default=0) + 1:03d}"
        (folder / f"{atom_id}.md").write_text(
            f"---\nid: {atom_id}\ndate: 2026-03-09\nproject: {project}\n"
            f"summary: \"{summary} by hand\"\ntags: [hand]\n---\n\nWritten by hand.\n",
            encoding="utf-8")
        self.clean_expected = False

    @rule(pick=picks)
    def hand_delete_atom(self, pick: int) -> None:
        if len(self.atoms()) > 1:
            path = self.pick_atom(pick)
            assert path is not None
            path.unlink()
            self.clean_expected = False

    # --- interruptions -------------------------------------------------------------------

    signals = st.sampled_from([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
    delays = st.floats(min_value=0.05, max_value=0.45)

    @rule(how=signals, delay=delays)
    def interrupted_regen(self, how: signal.Signals, delay: float) -> None:
        self.interrupted("regen", how, delay)

    @rule(how=signals, delay=delays)
    def interrupted_new(self, how: signal.Signals, delay: float) -> None:
        self.interrupted("new", how, delay)

    @rule(how=signals, delay=delays)
    def interrupted_commit(self, how: signal.Signals, delay: float) -> None:
        self.interrupted("commit", how, delay)

    def interrupted(self, which: str, how: signal.Signals, delay: float) -> None:
        args = {"regen": ["index", "regen", "--all"],
                "new": ["new", "exp", "-p", PROJECTS[1], "-s", "interrupted atom", "-t", "x"],
                "commit": ["commit"]}[which]
        proc = subprocess.Popen([sys.executable, "-m", "cortexfs", *args], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(how)
        out, err = proc.communicate(timeout=120)
        self.count(f"{which} sent {how.name}: exit {proc.returncode}")
        # a SIGINT before cortex's handler is installed (under load, at 0.05 s: while
        # `python -m` imports runpy, finds cortexfs, or imports cortexfs.interrupt itself):
        # Python's own KeyboardInterrupt traceback, before any cortex code has run
        before_python = _before_handler(err)
        assert "Traceback" not in err or before_python, err
        # 0: it finished first; -SIGNAL: the signal came before Python's start-up was done
        if proc.returncode not in (0, -how) and not before_python:
            assert proc.returncode == 130, (proc.returncode, out, err)
            # "interrupted: <what was done>, run `…` again" inside a writing command,
            # "interrupted, run `…` again" before it began writing
            line = err.strip().splitlines()[-1]
            assert line.startswith("interrupted"), err
            assert line.endswith(" again") or "nothing is left to do" in line, err
        # whatever it left, the next command finishes: nothing is checked until then
        self.clean_expected = self.temps_cleared = False

    # --- the invariant -------------------------------------------------------------------

    @invariant()
    def store_holds_together(self) -> None:
        self.count("invariant checks")
        if self.clean_expected:
            status = self.git("status", "--porcelain", "--untracked-files=all", "--",
                              "context/").stdout
            assert status == "", f"uncommitted after a completed command:\n{status}"
        self.check_head()
        self.check_files()
        # (after a kill -9 of a commit your index may be ahead of HEAD, by design: see
        # git.commit_exactly; the next command that completes brings HEAD to it)
        if self.temps_cleared:
            cached = self.git("diff", "--cached", "--quiet")
            assert cached.returncode == 0, self.git("diff", "--cached", "--stat").stdout

    def check_head(self) -> None:
        from cortexfs.escape import cell
        from cortexfs.frontmatter import parse

        # one commit for the whole check: a cortex killed during `git update-ref` leaves
        # that git running, and it moves HEAD a moment later (the commit is whole: a check
        # reading the file list from one HEAD and an index.md from the next saw a row
        # "not in HEAD")
        head = self.git("rev-parse", "--verify", "HEAD").stdout.strip()
        listing = self.git("ls-tree", "-r", "--name-only", head, "--", "context/")
        files = set(listing.stdout.splitlines())
        for rel in sorted(f for f in files if f.endswith("/index.md")):
            text = self.git("show", f"{head}:{rel}").stdout
            folder = rel.rsplit("/", 1)[0]
            for atom_id, target, summary in index_rows(text):
                atom_rel = f"{folder}/{target}"
                assert atom_rel in files, f"HEAD's {rel} lists {atom_id}, not in HEAD"
                meta = parse(self.git("show", f"{head}:{atom_rel}").stdout, atom_rel).meta
                assert cell(meta.get("summary")) == summary, (
                    f"HEAD's {rel} shows {summary!r} for {atom_id}, whose summary in HEAD is "
                    f"{meta.get('summary')!r}")

    def check_files(self) -> None:
        from cortexfs.frontmatter import parse

        for root, _dirs, names in os.walk(self.home / "context"):
            for name in names:
                path = Path(root, name)
                assert not (TEMP.match(name) and self.temps_cleared), f"temporary left: {path}"
                if ATOM_FILE.match(name):
                    parse(path.read_text(encoding="utf-8"), str(path))
                elif name == "TASKS.yaml":
                    yaml.safe_load(path.read_text(encoding="utf-8"))
                elif name == "access-log.jsonl":
                    data = path.read_bytes()
                    assert not data or data.endswith(b"\n"), f"torn last line in {path}"
                    for line in data.splitlines():
                        json.loads(line)


def run_machine(examples: int, steps: int, derandomize: bool) -> None:
    """Run the machine (the suite's and benchmarks/invariant.py's entry point)."""
    run_state_machine_as_test(CortexMachine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
        derandomize=derandomize, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(__import__("hypothesis").HealthCheck)))


def test_the_store_holds_together_under_random_use(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # in the test's own folder (in memory where conftest put it there), not /tmp on the disk
    monkeypatch.setattr(CortexMachine, "root", tmp_path)
    run_machine(examples=3, steps=14, derandomize=True)


def test_a_commit_that_git_finishes_after_cortex_is_killed_is_whole(tmp_path: Path) -> None:
    """kill -9 of cortex while its `git update-ref` runs: that git is not killed with it and
    moves HEAD a moment later, to a commit holding the index and the atom it lists; the next
    command finds the store clean. (Why check_head reads one commit, not HEAD twice.)"""
    env = cortex_env(tmp_path)
    home = Path(env["CORTEX_HOME"])

    def cortex(*args: str, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "cortexfs", *args],
                                env={**env, **(extra or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=home, env=env, capture_output=True,
                              text=True, check=True).stdout

    for args in (["init"], ["project", "new", "alpha"],
                 ["new", "exp", "-p", "alpha", "-s", "first experiment", "-t", "seed"]):
        assert cortex(*args).wait(timeout=60) == 0
    folder = home / "context" / "projects" / "alpha" / "experiments"
    (folder / "EXP-002.md").write_text(
        "---\nid: EXP-002\ndate: 2026-03-09\nproject: alpha\nsummary: \"by hand\"\n"
        "tags: [hand]\n---\n\nWritten by hand.\n", encoding="utf-8")
    # a git that is slow to move HEAD, so that the kill lands while it runs
    slow = tmp_path / "bin"
    slow.mkdir()
    marker = tmp_path / "update-ref-started"
    (slow / "git").write_text(
        f"#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = update-ref ] && "
        f"{{ : > '{marker}'; sleep 1; }}; done\nexec '{shutil.which('git')}' \"$@\"\n")
    (slow / "git").chmod(0o755)
    before = git("rev-parse", "HEAD").strip()
    proc = cortex("index", "regen", "--all", extra={"PATH": f"{slow}:{env['PATH']}"})
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert git("rev-parse", "HEAD").strip() == before  # cortex is gone, its git is not
    while git("rev-parse", "HEAD").strip() == before:
        assert time.monotonic() < deadline, "the orphaned git never moved HEAD"
        time.sleep(0.05)
    head = git("rev-parse", "HEAD").strip()
    index = git("show", f"{head}:context/projects/alpha/experiments/index.md")
    assert sorted(row[0] for row in index_rows(index)) == ["EXP-001", "EXP-002"]
    assert "context/projects/alpha/experiments/EXP-002.md" in git(
        "ls-tree", "-r", "--name-only", head, "--", "context/").splitlines()
    # the next command alone: nothing pending, your index equal to HEAD
    assert cortex("index", "regen", "--all").wait(timeout=60) == 0
    assert git("status", "--porcelain", "--untracked-files=all", "--", "context/") == ""
    staged = subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=home, env=env)
    assert staged.returncode == 0
