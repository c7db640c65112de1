"""An atom's whole life from the CLI: new (--body, --edit), show, list, edit, supersede,
invalidate, status, mv, rm, project rm/archive (cortexfs.lifecycle, cortexfs/cli/atoms.py).

Every change is one commit holding the atoms and the indexes regenerated for them; every
bad input is one line, exit 1, and nothing written (HEAD and the work tree as they were)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stores import Cli, Templates, initialised

from cortexfs.store import Store


def git(store: Store, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=store.home, check=True, capture_output=True,
                          text=True).stdout


def snapshot(store: Store) -> tuple[str, dict[str, bytes]]:
    """HEAD and `git status` (one git: v2's `# branch.oid` line is HEAD), and every file
    under context/: what "nothing written" keeps."""
    files = {str(p.relative_to(store.home)): p.read_bytes()
             for p in sorted(store.context.rglob("*")) if p.is_file()}
    status = git(store, "status", "--porcelain=v2", "--branch", "--untracked-files=all")
    assert status.startswith("# branch.oid ") and "(initial)" not in status.split("\n")[0]
    return status, files


def clean_and_current(cli: Any, store: Store) -> None:
    """Nothing pending under context/, and the indexes list the atoms as they are."""
    assert git(store, "status", "--porcelain", "--untracked-files=all", "--",
               "context/") == ""
    check = cli("index", "regen", "--all", "--check")
    assert check.exit_code == 0, check.output


def one_line_error(result: Any, says: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, \
        result.stderr
    assert says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(autouse=True)
def _no_background(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")  # `show` would start the log committer


def _loop(store: Store) -> None:
    initialised(store)
    cli = Cli()
    assert cli("project", "new", "flywheel").exit_code == 0
    for args in (["exp", "-s", "Cache invalidation cut stale reads", "-t", "cache"],
                 ["exp", "-s", "Shard rebalancing doubled tail latency", "-t", "shard"],
                 ["k", "-s", "Invalidate caches on write", "-t", "cache", "-e", "EXP-001",
                  "-l", "EXP-002"]):
        result = cli("new", *args)
        assert result.exit_code == 0, result.output
    clean_and_current(cli, store)


@pytest.fixture
def loop(store: Store, templates: Templates) -> Store:
    """One project, flywheel: EXP-001, EXP-002, K-001 (evidence EXP-001, links EXP-002)."""
    return templates.copy("lifecycle-loop", _loop, store.home)


def atom(store: Store, rel: str) -> Path:
    return store.projects_dir / "flywheel" / rel


def commits(store: Store) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


# --- new -------------------------------------------------------------------------------------

def test_new_with_a_body_from_the_option_stdin_or_a_file(cli: Any, loop: Store,
                                                         tmp_path: Path) -> None:
    before = commits(loop)
    assert cli("new", "exp", "-s", "From the option", "-t", "a", "--body",
               "## Results\n\nIt held.").exit_code == 0
    assert cli("new", "exp", "-s", "From stdin", "-t", "a", "--body", "-",
               input="## Results\n\nPiped in.\n").exit_code == 0
    body = tmp_path / "body.md"
    body.write_text("## Results\n\nFrom a file, mentioning EXP-001.\n")
    assert cli("new", "exp", "-s", "From a file", "-t", "a", "--body-file",
               str(body)).exit_code == 0
    texts = [atom(loop, f"experiments/EXP-00{n}.md").read_text() for n in (3, 4, 5)]
    assert texts[0].endswith("---\n\n## Results\n\nIt held.\n")
    assert texts[1].endswith("---\n\n## Results\n\nPiped in.\n")
    assert texts[2].endswith("---\n\n## Results\n\nFrom a file, mentioning EXP-001.\n")
    assert commits(loop) == before + 3  # one commit each, the index with it
    assert "EXP-005" in atom(loop, "experiments/index.md").read_text()
    clean_and_current(cli, loop)


@pytest.mark.parametrize(("args", "says"), [
    (["--body", "x", "--edit"], "give one of --body, --body-file and --edit"),
    (["--body", "   "], "--body is empty"),
    (["--body-file", "/nonexistent/body.md"], "cannot read --body-file"),
    (["--body-file", "/"], "is a folder"),
    (["--body", "a\0b"], "NUL"),
    (["--executor", "bob", "-e", "EXP-001"], "--executor is for experiments"),
    (["--sources", "EXP-001", "-e", "EXP-001"], "--sources is for patterns"),
    (["-t", "anti-pattern,x", "-e", "EXP-001"], "the tag anti-pattern goes with a summary"),
])
def test_new_refuses_bad_input_in_one_line(cli: Any, loop: Store, args: list[str],
                                           says: str) -> None:
    kind = "k" if "-e" in args else "exp"
    before = snapshot(loop)
    result = cli("new", kind, "-s", "Something", *(["-t", "x"] if "-t" not in args else []),
                 *args)
    one_line_error(result, says)
    assert snapshot(loop) == before


def test_new_body_that_is_not_utf8(cli: Any, loop: Store, tmp_path: Path) -> None:
    body = tmp_path / "latin1.md"
    body.write_bytes("caf\xe9\n".encode("latin-1"))
    before = snapshot(loop)
    one_line_error(cli("new", "exp", "-s", "x", "-t", "x", "--body-file", str(body)),
                   "is not UTF-8 text")
    assert snapshot(loop) == before


def test_an_anti_pattern_summary_gets_its_tag(cli: Any, loop: Store) -> None:
    result = cli("new", "k", "-s", "ANTI-PATTERN: caching without invalidation", "-t", "cache",
                 "-e", "EXP-001")
    assert result.exit_code == 0, result.output
    assert "added the tag anti-pattern" in result.stderr
    assert "tags: [cache, anti-pattern]" in atom(loop, "knowledge/K-002.md").read_text()
    report = json.loads(cli("validate", "--format", "json").stdout)
    assert not [f for f in report["findings"] if f["rule"] == "anti-pattern"]


def test_one_project_is_the_default_and_a_typo_suggests_the_name(cli: Any, loop: Store) -> None:
    assert cli("new", "exp", "-s", "No -p needed", "-t", "x").exit_code == 0
    assert cli("project", "new", "beta").exit_code == 0
    one_line_error(cli("new", "exp", "-s", "Which one?", "-t", "x"),
                   "which project? pass --project NAME (projects: beta, flywheel)")
    result = cli("new", "exp", "-s", "Typo", "-t", "x", "-p", "flywhel")
    one_line_error(result, "did you mean 'flywheel'?")
    assert "project new" not in result.stderr


# --- an editor that is a small script --------------------------------------------------------

EDITOR = """\
import shutil, sys
source, target = sys.argv[1], sys.argv[2]
if source == "-empty":
    open(target, "w").close()
elif source != "-same":
    shutil.copy(source, target)
"""


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """editor(text) makes $EDITOR save `text`; editor(None) saves the file unchanged,
    editor("") empty."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    monkeypatch.delenv("VISUAL", raising=False)

    def use(text: str | None) -> None:
        if text is None:
            source = "-same"
        elif text == "":
            source = "-empty"
        else:
            saved = tmp_path / "saved.md"
            saved.write_text(text)
            source = str(saved)
        monkeypatch.setenv("EDITOR", f"{sys.executable} {script} {source}")

    return use


def test_new_edit_writes_what_was_saved(cli: Any, loop: Store, editor: Any) -> None:
    text = ("---\nid: EXP-003\ndate: 2026-03-09\nproject: flywheel\n"
            "summary: \"Written in the editor\"\ntags: [editor]\nstatus: partial\n"
            "links: [EXP-001]\n---\n\n# EXP-003: Written in the editor\n\nBody.\n")
    editor(text)
    result = cli("new", "exp", "--edit")
    assert result.exit_code == 0, result.output
    written = atom(loop, "experiments/EXP-003.md").read_text()
    assert "summary: Written in the editor\n" in written and "status: partial\n" in written
    assert written.endswith("---\n\n# EXP-003: Written in the editor\n\nBody.\n")
    assert not list((loop.cache_dir / "drafts").glob("*.md"))
    clean_and_current(cli, loop)


@pytest.mark.parametrize(("kind", "rel", "cited"), [
    ("k", "knowledge/K-002.md", "evidence: [EXP-002]\n"),
    ("pat", "patterns/PAT-001.md", "source-experiments: [EXP-001, EXP-002]\n"
                                   "evidence: [EXP-001]\n"),
])
def test_new_edit_keeps_the_cited_experiments(cli: Any, loop: Store, editor: Any, kind: str,
                                              rel: str, cited: str) -> None:
    # what the saved file cites is what the atom cites: evidence for knowledge, and for a
    # pattern its source experiments and its evidence both
    atom_id = rel.split("/")[1].removesuffix(".md")
    editor(f"---\nid: {atom_id}\ndate: 2026-03-09\nproject: flywheel\nsummary: \"Cited in the "
           f"editor\"\ntags: [editor]\n{cited}---\n\n# {atom_id}: Cited in the editor\n")
    result = cli("new", kind, "--edit")
    assert result.exit_code == 0, result.output
    assert cited in atom(loop, rel).read_text()
    clean_and_current(cli, loop)


@pytest.mark.parametrize(("saved", "says"), [
    (None, "the template was saved unchanged: nothing written"),
    ("", "the file was saved empty: nothing written"),
])
def test_new_edit_aborts_cleanly(cli: Any, loop: Store, editor: Any, saved: str | None,
                                 says: str) -> None:
    editor(saved)
    before = snapshot(loop)
    one_line_error(cli("new", "exp", "-s", "Draft", "-t", "x", "--edit"), says)
    assert snapshot(loop) == before


def test_new_edit_refuses_an_invalid_atom_and_keeps_the_text(cli: Any, loop: Store,
                                                              editor: Any) -> None:
    editor("---\nid: EXP-003\nsummary: [unclosed\n---\nbody\n")
    before = snapshot(loop)
    result = cli("new", "exp", "-s", "Draft", "-t", "x", "--edit")
    one_line_error(result, "nothing written, your text is kept in")
    assert snapshot(loop) == before
    [kept] = (loop.cache_dir / "drafts").glob("*.md")
    assert "[unclosed" in kept.read_text()


def test_edit_validates_then_commits(cli: Any, loop: Store, editor: Any) -> None:
    path = atom(loop, "experiments/EXP-001.md")
    editor(path.read_text().replace("Background", "Background and motive"))
    before = commits(loop)
    result = cli("edit", "EXP-001")
    assert result.exit_code == 0, result.output
    assert "Background and motive" in path.read_text()
    assert commits(loop) == before + 1
    clean_and_current(cli, loop)
    editor(None)  # saved unchanged: nothing to do
    assert cli("edit", "EXP-001").exit_code == 0 and commits(loop) == before + 1


def test_an_invalid_edit_is_refused_and_kept_aside(cli: Any, loop: Store, editor: Any) -> None:
    """The decision: the atom is never touched by a refused edit; the text is kept aside and
    the next `cortex edit` of that atom starts from it."""
    path = atom(loop, "experiments/EXP-001.md")
    original = path.read_bytes()
    broken = path.read_text().replace("date: ", "date: 2026-13-45 #", 1)
    editor(broken)
    before = snapshot(loop)
    result = cli("edit", "EXP-001")
    one_line_error(result, "is not a date")
    assert "your text is kept in" in result.stderr
    assert snapshot(loop) == before and path.read_bytes() == original
    editor(None)  # the next edit opens the kept text; saving it as it is: refused again
    again = cli("edit", "EXP-001")
    assert "starting from your unsaved edit" in again.stderr and again.exit_code == 1
    editor("")
    emptied = cli("edit", "EXP-001")
    assert emptied.exit_code == 1 and "error: the file was saved empty" in emptied.stderr
    assert path.read_bytes() == original


# --- reading ---------------------------------------------------------------------------------

def test_show_prints_the_atom_its_references_and_counts_a_read(cli: Any, loop: Store) -> None:
    result = cli("show", "EXP-1")  # any spelling of the number
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("---\nid: EXP-001\n")
    assert "cited by:\n  K-001 (evidence) Invalidate caches on write" in result.stdout
    data = json.loads(cli("show", "flywheel/K-001", "--format", "json").stdout)
    assert data["id"] == "K-001" and data["frontmatter"]["evidence"] == ["EXP-001"]
    assert [(r["relation"], r["target"]) for r in data["cites"]] == [
        ("evidence", "EXP-001"), ("links", "EXP-002")]
    assert data["refs"] == 0 and "## Statement" in data["body"]
    log = (loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl").read_text()
    assert [json.loads(x)["file"] for x in log.splitlines()] == ["EXP-001.md", "K-001.md"]
    assert json.loads(cli("show", "K-001", "-f", "json").stdout)["refs"] == 1


@pytest.mark.parametrize(("args", "says"), [
    (["show", "EXP-999"], "no atom EXP-999 in any project"),
    (["show", "nonsense"], "is not an atom id"),
    (["show", "EXP-001", "-p", "flywhel"], "did you mean 'flywheel'?"),
    (["list", "--status", "bogus"], "unknown --status 'bogus'"),
    (["list", "--since", "yesterday"], "--since 'yesterday' is not a date"),
    (["list", "--since", "99999m"], "--since '99999m' reaches back before the year 1"),
    (["list", "--kind", "x"], "unknown atom type 'x'"),
    (["list", "--limit", "0"], "--limit 0"),
    (["validate", "--format", "ids"], "--format ids is for `cortex list`"),
])
def test_reading_refuses_bad_input_in_one_line(cli: Any, loop: Store, args: list[str],
                                               says: str) -> None:
    before = snapshot(loop)
    one_line_error(cli(*args), says)
    assert snapshot(loop) == before


def test_list_filters_and_sorts_as_the_index(cli: Any, loop: Store) -> None:
    log = loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl"
    log.write_text("".join(json.dumps({"file": "EXP-002.md", "tool": "Read",
                                       "ts": "2026-03-09T10:00:00.000Z"}) + "\n"
                           for _ in range(3)))
    assert cli("supersede", "EXP-001", "--by", "EXP-002").exit_code == 0
    ids = cli("list", "--format", "ids").stdout.split()
    assert ids == ["EXP-002", "EXP-001", "K-001"]  # active by refs, then superseded
    assert cli("list", "-k", "k", "-f", "ids").stdout.split() == ["K-001"]
    assert cli("list", "--status", "superseded", "-f", "ids").stdout.split() == ["EXP-001"]
    assert cli("list", "--status", "active", "-f", "ids").stdout.split() == ["EXP-002",
                                                                               "K-001"]
    assert cli("list", "--tag", "cache", "-f", "ids").stdout.split() == ["EXP-001", "K-001"]
    assert cli("list", "--since", "2999-01-01", "-f", "ids").stdout == ""
    # the ages `cortex recall --since` takes (one parser: atoms.parse_since)
    for age in ("1y", "2W"):  # (atoms dated today)
        assert cli("list", "--since", age, "-f", "ids").stdout.split() == ids
    data = json.loads(cli("list", "--format", "json", "--limit", "1").stdout)
    assert data["total"] == 3 and data["atoms"][0]["id"] == "EXP-002"
    assert data["atoms"][0]["refs"] == 3  # folded from the log, as the index shows
    text = cli("list").stdout
    assert text.splitlines()[0].startswith("EXP-002") and "superseded:EXP-002" in text


# --- status, supersede, invalidate -----------------------------------------------------------

def test_supersede_changes_that_key_only_in_one_commit(cli: Any, loop: Store) -> None:
    path = atom(loop, "experiments/EXP-001.md")
    before_text = path.read_text()
    before = commits(loop)
    result = cli("supersede", "EXP-001", "--by", "EXP-002")
    assert result.exit_code == 0, result.output
    assert path.read_text() == before_text.replace("status: active", "status: "
                                                   "superseded:EXP-002")
    assert commits(loop) == before + 1
    assert git(loop, "log", "-1", "--format=%s") == "atom: supersede EXP-001 by EXP-002\n"
    shown = git(loop, "show", "--name-only", "--format=", "HEAD").split()
    assert "context/projects/flywheel/experiments/index.md" in shown
    index = atom(loop, "experiments/index.md").read_text()
    assert index.index("## Superseded") < index.index("[EXP-001]")
    clean_and_current(cli, loop)


def test_invalidate_writes_the_tombstone_and_status_takes_it_back(cli: Any, loop: Store) -> None:
    path = atom(loop, "experiments/EXP-002.md")
    assert cli("invalidate", "EXP-002", "--reason", "the load generator was miswired",
               "--by", "EXP-001").exit_code == 0
    text = path.read_text()
    assert "status: invalidated:EXP-001\n" in text and "invalidated-date: " in text
    assert "invalidated-reason: the load generator was miswired\n" in text
    assert json.loads(cli("status", "EXP-002", "-f", "json").stdout)["status"] == \
        "invalidated:EXP-001"
    assert cli("status", "EXP-002", "challenged:EXP-001").exit_code == 0
    text = path.read_text()
    assert "status: challenged:EXP-001\n" in text and "invalidated-" not in text
    assert cli("status", "EXP-002", "challenged:EXP-001").stdout.startswith(
        "nothing to change")
    clean_and_current(cli, loop)


@pytest.mark.parametrize(("args", "says"), [
    (["supersede", "EXP-001", "--by", "EXP-001"], "cannot supersede itself"),
    (["supersede", "EXP-001", "--by", "EXP-404"], "no atom EXP-404 in project flywheel"),
    (["invalidate", "EXP-001", "--reason", "  "], "the reason is empty"),
    (["invalidate", "EXP-001", "--reason", "x" * 400], "at most 300"),
    (["status", "EXP-001", "bogus"], "unknown status 'bogus'"),
    (["status", "EXP-001", "invalidated"], "say why EXP-001 is invalid"),
    (["status", "EXP-001", "superseded:EXP-001"], "cannot be the cause of its own status"),
    (["status", "EXP-001", "valid", "--reason", "x"], "a reason goes with invalidated"),
    (["status", "--reason", "x"], "go with an atom id"),
    (["rm", "EXP-001"], "EXP-001 is cited by K-001 (evidence)"),
    (["rm", "EXP-001", "--force"], "K-001 rests on EXP-001 alone (evidence)"),
    (["mv", "K-001", "-p", "flywheel"], "already in project flywheel"),
    (["project", "rm", "flywheel"], "project flywheel holds 3 atoms"),
    (["project", "unarchive", "nope"], "no archived project named 'nope'"),
])
def test_lifecycle_refuses_bad_input_in_one_line(cli: Any, loop: Store, args: list[str],
                                                 says: str) -> None:
    before = snapshot(loop)
    one_line_error(cli(*args), says)
    assert snapshot(loop) == before


def test_a_superseding_atom_must_be_active(cli: Any, loop: Store) -> None:
    assert cli("invalidate", "EXP-002", "--reason", "wrong").exit_code == 0
    before = snapshot(loop)
    one_line_error(cli("supersede", "EXP-001", "--by", "EXP-002"),
                   "EXP-002 is invalidated: supersede EXP-001 by an active atom")
    assert snapshot(loop) == before


# --- rm, mv ----------------------------------------------------------------------------------

def test_rm_refuses_while_cited_and_force_says_what_it_rewrote(cli: Any, loop: Store) -> None:
    log = loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl"
    log.write_text(json.dumps({"file": "EXP-002.md", "tool": "Read",
                               "ts": "2026-03-09T10:00:00.000Z"}) + "\n")
    one_line_error(cli("rm", "EXP-002"), "EXP-002 is cited by K-001 (links)")
    result = cli("rm", "EXP-002", "--force")
    assert result.exit_code == 0, result.output
    assert "rewrote K-001: took EXP-002 out of links" in result.stderr
    assert not atom(loop, "experiments/EXP-002.md").exists()
    assert "links: []" in atom(loop, "knowledge/K-001.md").read_text()
    assert "EXP-002" not in log.read_text()  # a later EXP-002 starts without its reads
    assert "EXP-002" not in atom(loop, "experiments/index.md").read_text()
    clean_and_current(cli, loop)


def test_mv_moves_atoms_with_new_ids_and_rewrites_every_mention(cli: Any, loop: Store) -> None:
    assert cli("project", "new", "beta").exit_code == 0
    assert cli("new", "exp", "-p", "beta", "-s", "Beta's own first", "-t", "b").exit_code == 0
    status = loop.projects_dir / "flywheel" / "STATUS.md"
    status.write_text(status.read_text() + "\nSee K-001 and EXP-001.\n")
    log = loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl"
    log.write_text(json.dumps({"file": "EXP-001.md", "tool": "Read",
                               "ts": "2026-03-09T10:00:00.000Z"}) + "\n")
    one_line_error(cli("mv", "K-001", "-p", "beta"),
                   "K-001 (evidence, links) cite EXP-001, EXP-002, which would stay")
    one_line_error(cli("mv", "EXP-001", "-p", "beta"), "EXP-001 is cited by K-001 (evidence)")
    result = cli("mv", "K-001", "EXP-001", "EXP-002", "-p", "beta", "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["moved"] == {"EXP-001": "EXP-002", "EXP-002": "EXP-003",
                                                  "K-001": "K-001"}
    k = (loop.projects_dir / "beta" / "knowledge" / "K-001.md").read_text()
    assert "project: beta\n" in k and "evidence: [EXP-002]" in k and "links: [EXP-003]" in k
    moved = (loop.projects_dir / "beta" / "experiments" / "EXP-002.md").read_text()
    assert "id: EXP-002\n" in moved and "# EXP-002: Cache invalidation" in moved
    assert "See beta/K-001 and beta/EXP-002." in status.read_text()
    assert "EXP-001" not in log.read_text()
    beta_log = (loop.projects_dir / "beta" / "_meta" / "access-log.jsonl").read_text()
    assert json.loads(beta_log)["file"] == "EXP-002.md"  # its read went with it
    assert cli("list", "-p", "flywheel", "-f", "ids").stdout == ""
    assert cli("validate").exit_code == 0
    clean_and_current(cli, loop)


def test_mv_keeps_odd_access_log_lines_as_they_are(cli: Any, loop: Store) -> None:
    # a `file` that is not a string crashed the move (TypeError: unhashable), and a lone
    # surrogate (a "\\ud800" escape in a payload) could not be written back
    assert cli("project", "new", "beta").exit_code == 0
    assert cli("new", "exp", "-p", "beta", "-s", "Beta's own first", "-t", "b").exit_code == 0
    log = loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl"
    odd = b'{"file": ["EXP-002.md"], "tool": "Read"}\n'
    read = b'{"file": "EXP-002.md", "tool": "Read", "ts": "2026-03-09T10:00:00.000Z", ' \
           b'"session": "\\ud800"}\n'
    log.write_bytes(odd + read)
    result = cli("mv", "K-001", "EXP-001", "EXP-002", "-p", "beta")
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == odd
    beta_log = loop.projects_dir / "beta" / "_meta" / "access-log.jsonl"
    assert beta_log.read_bytes() == read.replace(b"EXP-002.md", b"EXP-003.md")


# --- projects --------------------------------------------------------------------------------

def test_projects_reports_a_phase_only_where_status_md_can_be_read(store: Store) -> None:
    from cortexfs import lifecycle, scaffold

    for name in ("alpha", "beta", "gamma"):
        scaffold.new_project(store, name)
    alpha = store.projects_dir / "alpha" / "STATUS.md"
    alpha.write_text("# Status\n\n## Phase\nPhase 2: build\n")
    (store.projects_dir / "beta" / "STATUS.md").unlink()
    status = store.projects_dir / "gamma" / "STATUS.md"
    status.unlink()
    status.symlink_to(alpha)  # not part of the store
    phases = {p["name"]: p["phase"] for p in lifecycle.projects(store)}
    assert phases == {"alpha": "Phase 2: build", "beta": None, "gamma": None}


def test_project_archive_takes_it_out_of_everything_and_unarchive_back(cli: Any, loop: Store,
                                                                       ) -> None:
    assert cli("project", "new", "beta").exit_code == 0
    result = cli("project", "archive", "flywheel")
    assert result.exit_code == 0, result.output
    assert (loop.context / "archive" / "flywheel" / "knowledge" / "K-001.md").is_file()
    assert cli("project", "list").stdout.split() == ["beta"]
    assert "flywheel (archived)" in cli("project", "list", "--archived").stdout
    assert cli("list", "-f", "ids").stdout == ""
    assert "flywheel" not in (loop.context / "OVERVIEW.md").read_text()
    assert "Cache invalidation" not in (loop.context / "HIPPOCAMPUS.md").read_text()
    assert "flywheel" not in cli("brief").stdout
    assert json.loads(cli("recall", "cache invalidation", "-f", "json").stdout)["hits"] == []
    clean_and_current(cli, loop)
    assert cli("project", "unarchive", "flywheel").exit_code == 0
    assert cli("list", "-f", "ids").stdout.split() == ["EXP-001", "EXP-002", "K-001"]
    clean_and_current(cli, loop)


def test_project_rm_needs_force_when_it_holds_atoms(cli: Any, loop: Store) -> None:
    assert cli("project", "new", "empty").exit_code == 0
    assert cli("project", "rm", "empty").exit_code == 0
    result = cli("project", "rm", "flywheel", "--force")
    assert result.exit_code == 0, result.output
    assert not (loop.projects_dir / "flywheel").exists()
    assert git(loop, "log", "-1", "--format=%s") == "project: remove flywheel\n"
    clean_and_current(cli, loop)


# --- the small wrong results (issue 15, item 7) ----------------------------------------------

def test_a_project_is_validated_and_checked_without_the_store_level_records(
        cli: Any, loop: Store) -> None:
    """Was: `validate flywheel` and `ready flywheel` failed on context/decisions/0001-….md,
    a store-level record no project owns (`decision new` writes it unfilled)."""
    assert cli("decision", "new", "Keep atoms as files").exit_code == 0
    assert cli("validate", "flywheel").exit_code == 0
    whole = cli("validate")
    assert whole.exit_code == 1 and "decisions/0001-keep-atoms-as-files.md" in whole.stdout
    gaps = json.loads(cli("ready", "flywheel", "-f", "json").stdout)["gaps"]
    assert not [g for g in gaps if "decisions/" in g["message"]]
    assert [g for g in json.loads(cli("ready", "-f", "json").stdout)["gaps"]
            if "decisions/0001" in g["message"]]


def test_decision_new_leaves_nothing_stale(cli: Any, loop: Store) -> None:
    """Was: the folder's CORTEX.md block did not list the new record, so `ready` failed on
    generated files out of date right after."""
    assert cli("decision", "new", "Shard by tenant", "-p", "flywheel").exit_code == 0
    gaps = json.loads(cli("ready", "flywheel", "-f", "json").stdout)["gaps"]
    assert "derived" not in {g["check"] for g in gaps}
    clean_and_current(cli, loop)


def test_an_impossible_date_is_indexed_with_a_warning(cli: Any, loop: Store) -> None:
    path = atom(loop, "experiments/EXP-002.md")
    path.write_text(path.read_text().replace("date: ", "date: 2026-13-45 #", 1))
    result = cli("index", "regen", "--all")
    assert result.exit_code == 0, result.output
    assert ("warning: context/projects/flywheel/experiments/EXP-002.md: `date` '2026-13-45' is not "
            "a date, so the index lists it as undated: write YYYY-MM-DD") in result.stderr
    data = json.loads(cli("index", "regen", "--all", "--check", "-f", "json").stdout)
    assert data["dubious"] == []  # said once, when indexed


def test_mv_takes_the_reads_set_aside_during_a_sync_with_the_atom(cli: Any, loop: Store) -> None:
    # a read the hook set aside while a (killed) sync replaced the log is the atom's too
    assert cli("project", "new", "beta").exit_code == 0
    log = loop.projects_dir / "flywheel" / "_meta" / "access-log.jsonl"
    read = b'{"file": "EXP-002.md", "tool": "Read", "ts": "2026-03-09T10:00:00.000Z", ' \
           b'"session": "in the log"}\n'
    log.write_bytes(read)
    pending = loop.home / "logs" / "pending-reads" / "flywheel"
    pending.mkdir(parents=True)
    (pending / "1-1.jsonl").write_bytes(read.replace(b"in the log", b"set aside"))
    result = cli("mv", "K-001", "EXP-001", "EXP-002", "-p", "beta")
    assert result.exit_code == 0, result.output
    beta_log = loop.projects_dir / "beta" / "_meta" / "access-log.jsonl"
    lines = beta_log.read_bytes().splitlines()
    assert {json.loads(line)["session"] for line in lines} == {"in the log", "set aside"}
    assert {json.loads(line)["file"] for line in lines} == {"EXP-002.md"}
    assert list(pending.iterdir()) == [] and log.read_bytes() == b""
    clean_and_current(cli, loop)
