"""MEMORY.md (neocortex.md v1.0): parser, lint, --fix, stats, prune, and the CLI."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cortexfs import memory_md
from cortexfs.errors import InvalidInputError
from cortexfs.tokens import estimate

FIXTURES = Path(__file__).parent / "fixtures" / "memory"
HEADER = ("<!-- neocortex.md v1.0 -->\n<!-- agent: atlas -->\n<!-- consolidated: 2026-01-31 -->\n"
          "<!-- entries: {n} | tokens: ~{t} -->\n\n# Memory\n\n")
SECTIONS = ("Identity", "People", "Projects", "Knowledge", "Patterns", "Lessons", "Context")


def memory(sections: dict[str, str] | None = None, header: str | None = None) -> str:
    """A MEMORY.md with the seven sections; `sections` gives some of them a body."""
    sections = sections or {}
    body = "".join(f"## {name}\n{sections.get(name, '')}\n" for name in SECTIONS)
    return (HEADER.format(n=0, t=0) if header is None else header) + body


def codes(text: str) -> dict[str, list[int | None]]:
    report = memory_md.lint(memory_md.parse(text))
    out: dict[str, list[int | None]] = {}
    for p in report.problems:
        out.setdefault(f"{p.severity}:{p.code}", []).append(p.line)
    return out


# --- the seed's own examples -----------------------------------------------------------------


def test_seed_template_reports_only_its_placeholders() -> None:
    report = memory_md.lint(memory_md.read(FIXTURES / "seed-template.md"))
    assert sorted((p.code, p.line) for p in report.problems) == [
        ("header-counts", 4), ("header-field", 3), ("nx-invalid", 21), ("nx-invalid", 21)]
    assert report.entries == 9
    assert report.sections == list(SECTIONS)


def test_atlas_example_parses_every_seed_construct() -> None:
    doc = memory_md.read(FIXTURES / "atlas.md")
    assert doc.header.version == "1.0"
    assert doc.header.fields == {"agent": "atlas", "owner": "Jane Chen",
                                 "consolidated": "2026-01-31", "entries": "187",
                                 "tokens": "~9,400"}
    assert [s.name for s in doc.sections] == list(SECTIONS)
    assert doc.title_line == 7
    people = doc.sections[1].entries
    assert len(people) == 2
    assert people[0].lines[1] == "  Runs multiple projects. Named the agent Atlas.\n"
    sup = doc.sections[2].entries[2]
    assert sup.superseded == "PostgreSQL for all projects"
    assert sup.replacement == "Split: PostgreSQL for web, SQLite for CLI (2026-01-20)"
    assert sup.meta is not None and sup.meta.fields["x"] == '"PostgreSQL for all projects"'
    knowledge = doc.sections[3].entries
    rate = knowledge[3]
    assert rate.meta is not None and rate.meta.fields == {"u": "2026-01-15", "c": "high", "a": "7"}
    assert rate.meta.updated == dt.date(2026, 1, 15) and rate.meta.accesses == 7
    assert rate.content == ("- API rate limit: 100 req/min per key. Use exponential backoff on "
                            "429s.")
    # the seed's transformation example: week 1 (user-sourced) → week 3 → month 3 gist
    assert [e.meta.accesses for e in knowledge[4:] if e.meta] == [1, 4, 11]
    assert knowledge[4].meta is not None and knowledge[4].meta.user_marked
    report = memory_md.lint(doc)
    assert report.ok and report.entries == 25
    assert {p.code for p in report.problems} == {"header-counts"}  # 187 / ~9,400 are stale


def test_estimator_is_chars_over_four_and_never_undercounts_the_seed_figures() -> None:
    assert estimate("") == 0 and estimate("abcd") == 1 and estimate("abcde") == 2
    verbatim = ("On January 15th at 3:47pm, during a Slack conversation in #engineering,\n"
                "Sarah mentioned that the new API endpoint /api/v2/users requires OAuth2\n"
                "Bearer tokens and she suggested we use PKCE flow because our app is a\n"
                "single-page application.")
    gist = "API v2 uses OAuth2 + PKCE (SPA requirement). Sarah confirmed Jan 15."
    # the seed counts 55 and 12 tokens: chars/4 errs on the safe side for budgets
    assert estimate(verbatim) >= 55 and estimate(gist) >= 12
    assert estimate(verbatim) > 3 * estimate(gist)


# --- lint: header ----------------------------------------------------------------------------


def test_no_header_is_an_error() -> None:
    found = codes(memory(header="# Memory\n\n"))
    assert found["error:header-missing"] == [1]


def test_header_without_a_version_line_does_not_send_the_user_to_fix() -> None:
    # `--fix` cannot add counts under a header it does not recognise: asking for it was a loop
    found = codes(memory(header="<!-- agent: a -->\n# Memory\n"))
    assert found["error:header-missing"] == [1] and "error:header-counts" not in found


def test_header_counts_missing_or_malformed() -> None:
    no_counts = "<!-- neocortex.md v1.0 -->\n<!-- agent: a -->\n<!-- consolidated: 2026-01-01 -->\n"
    assert "error:header-counts" in codes(memory(header=no_counts + "\n# Memory\n"))
    bad = no_counts + "<!-- entries: many | tokens: ~lots -->\n\n# Memory\n"
    assert codes(memory(header=bad))["error:header-counts"] == [4]
    v2 = "<!-- neocortex.md v2.0 -->\n<!-- entries: 0 | tokens: ~0 -->\n"
    assert "error:header-version" in codes(memory(header=v2))


def test_header_count_forms() -> None:
    def claims(entries: str, tokens: str) -> list[str]:
        header = HEADER.replace("{n}", entries).replace("~{t}", tokens)
        return [p.message.split(", the file has")[0].split(": run")[0] for p in memory_md.lint(
            memory_md.parse(memory(header=header))).problems if p.code == "header-counts"]

    assert claims("~9,400", "~3.2K") == ["header says 9,400 entries",
                                        "header says ~3,200 tokens"]
    assert claims("187", "12,000") == ["header says 187 entries", "header says ~12,000 tokens"]
    assert claims("0", "~50") == []  # (tokens: within the tolerance)
    assert claims("about 3", "~50") == ["header counts `entries: about 3 | tokens: ~50` are not "
                                        "numbers"]


# --- lint: sections --------------------------------------------------------------------------


def test_unknown_sections_are_warnings_but_missing_or_misordered_are_errors() -> None:
    text = memory() + "## Recipes\n- Pancakes: flour, eggs, milk.\n"
    found = codes(text)
    assert "warning:section-custom" in found and not any(k.startswith("error") for k in found
                                                         if k != "error:header-counts")
    swapped = memory().replace("## People", "## TMP").replace("## Projects", "## People") \
        .replace("## TMP", "## Projects")
    assert "error:section-order" in codes(swapped)
    misspelt = memory().replace("## Lessons", "## Lesson")
    found = codes(misspelt)
    assert "error:section-missing" in found and "warning:section-custom" in found


def test_too_many_sections_and_duplicates() -> None:
    extra = "".join(f"## Custom {i}\n- x\n" for i in range(4))
    assert "error:section-count" in codes(memory() + extra)
    assert "error:section-duplicate" in codes(memory() + "## Knowledge\n- again\n")


def test_section_entry_limits_follow_the_table() -> None:
    fifteen = "".join(f"- Fact {i}\n" for i in range(15))
    assert "error:section-entries" not in codes(memory({"Identity": fifteen}))
    found = codes(memory({"Identity": fifteen + "- one too many\n"}))
    assert "error:section-entries" in found
    assert "error:section-entries" in codes(memory({"Knowledge": "- k\n" * 61}))
    assert "error:section-entries" not in codes(memory({"Knowledge": "- k\n" * 60}))


# --- lint: entries and metadata --------------------------------------------------------------


def test_continuations_blank_lines_and_stray_text() -> None:
    text = memory({"Knowledge": "- First: a\n  more of a\n\n  <!-- nx: u=2026-01-01 -->\n"
                                "- Second\n\tTabbed continuation\nLoose paragraph\n"})
    doc = memory_md.parse(text)
    first, second = doc.sections[3].entries
    assert first.lines[-1] == "  <!-- nx: u=2026-01-01 -->\n" and first.meta is not None
    assert len(first.lines) == 4  # the blank line between belongs to the entry
    assert second.content.endswith("Tabbed continuation")
    found = codes(text)
    assert found["warning:indent"] == [20]
    assert found["warning:stray-text"] == [21]  # text at column 0 is not part of an entry
    assert len(doc.sections[3].entries) == 2


def test_oversized_entry_is_an_error_metadata_excluded() -> None:
    long = "- " + "word " * 80 + "\n"  # 402 chars → ~101 tokens
    assert "error:entry-tokens" in codes(memory({"Knowledge": long}))
    short = "- " + "word " * 78 + "\n  <!-- nx: u=2026-01-01 c=high a=3 s=docs -->\n"
    assert "error:entry-tokens" not in codes(memory({"Knowledge": short}))


@pytest.mark.parametrize("nx, fragment", [
    ("<!-- nx: u=2026-13-45 -->", "is not a date"),
    ("<!-- nx: c=certain -->", "is not a confidence"),
    ("<!-- nx: a=-1 -->", "is not an access count"),
    ("<!-- nx: a=many -->", "is not an access count"),
    ("<!-- nx: a=\u00b2 -->", "is not an access count"),
    ("<!-- nx: s=rumour -->", "is not a source"),
    ('<!-- nx: x="unterminated -->', "missing its closing quote"),
    ("<!-- nx: u=2026-01-01 u=2026-01-02 -->", "appears twice"),
    ("<!-- nx: high -->", "is not `key=value`"),
    ("<!-- nx: u= -->", "has no value"),
    ("<!-- nx: u=2026-01-01", "not closed"),
])
def test_broken_metadata_is_an_error_on_its_line(nx: str, fragment: str) -> None:
    text = memory({"Knowledge": f"- Fact: value\n  {nx}\n"})
    report = memory_md.lint(memory_md.parse(text))
    bad = [p for p in report.problems if p.code == "nx-invalid"]
    assert bad and all(p.severity == "error" for p in bad)
    assert any(fragment in p.message for p in bad), [p.message for p in bad]
    knowledge_line = text.splitlines().index("- Fact: value") + 1
    assert bad[0].line == knowledge_line + 1


def test_metadata_forms_that_are_fine() -> None:
    text = memory({"Knowledge": "- A\n  <!-- nx: u=2026-01-15T10:00:00Z c=med a=0 s=tested "
                                'x="old \\"quoted\\" text" -->\n- B <!-- nx: keep -->\n'})
    report = memory_md.lint(memory_md.parse(text))
    assert not [p for p in report.problems if p.code.startswith("nx")]
    a, b = memory_md.parse(text).sections[3].entries
    assert a.meta is not None and a.meta.updated == dt.date(2026, 1, 15)
    assert b.meta is not None and b.meta.user_marked
    found = codes(memory({"Knowledge": "- A\n  <!-- nx: u=2026-01-01 -->\n  <!-- nx: a=1 -->\n"}))
    assert "error:nx-duplicate" in found
    assert "warning:nx-unknown" in codes(memory({"Knowledge": "- A <!-- nx: z=1 -->\n"}))


def test_supersession_without_replacement_and_mismatched_x() -> None:
    assert "warning:supersession" in codes(memory({"Projects": "- ~~Old fact~~\n"}))
    text = memory({"Projects": '- ~~Old~~ → New\n  <!-- nx: u=2026-01-01 x="Other" -->\n'})
    assert "warning:supersession" in codes(text)
    text = memory({"Projects": "- ~~Old~~ -> New\n"})
    assert "warning:supersession" not in codes(text)


def test_total_token_target_and_ceiling() -> None:
    entry = "- " + "z" * 390 + "\n"  # ~98 tokens, just under the entry limit
    warn = memory({"Knowledge": entry * 60, "People": entry * 40, "Projects": entry * 10})
    assert 10_000 < estimate(warn) < 15_000
    found = codes(warn)
    assert "warning:total-tokens" in found and "error:total-tokens" not in found
    huge = memory({"Knowledge": entry * 60, "People": entry * 40, "Projects": entry * 30,
                   "Patterns": entry * 30, "Lessons": entry * 30})
    assert estimate(huge) > 15_000
    assert "error:total-tokens" in codes(huge)


def _big_memory(path: Path, sections: int) -> None:
    chunk = "".join(f"- Fact {j}: a fairly long sentence to fill the memory file with text.\n"
                    f"  <!-- nx: u=2025-01-01 a=0 -->\n" for j in range(400))
    body = "".join(f"## {SECTIONS[i % 7]}\n{chunk}" for i in range(sections))
    path.write_text(HEADER.format(n=1, t=1) + body)


def test_a_megabyte_memory_gives_a_clear_capped_result(tmp_path: Path, cli) -> None:
    path = tmp_path / "MEMORY.md"
    _big_memory(path, 24)
    assert 900_000 < path.stat().st_size < memory_md.MAX_BYTES
    result = cli("memory", "lint", str(path))
    assert result.exit_code == 1
    out = result.stdout
    assert "over the 15,000-token ceiling" in out
    assert len(out.splitlines()) < 400  # capped listing
    assert "9,600 entries" in out


def test_a_five_megabyte_memory_is_refused_in_one_line(tmp_path: Path, cli) -> None:
    # a 12 MB one took 11.5 s to lint: past MAX_BYTES it is not read at all
    path = tmp_path / "MEMORY.md"
    _big_memory(path, 170)
    assert path.stat().st_size > 5_000_000
    result = cli("memory", "lint", str(path))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "is over 1,000,000 bytes" in result.stderr
    assert "split it into satellite files" in result.stderr


# --- --fix -----------------------------------------------------------------------------------


def test_fix_rewrites_only_the_counts_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    shutil.copy(FIXTURES / "atlas.md", path)
    before = path.read_text().splitlines(keepends=True)
    report, changed = memory_md.lint_file(path, fix=True)
    assert changed and not report.problems
    after = path.read_text().splitlines(keepends=True)
    assert len(after) == len(before)
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert diff == [4]
    tokens = round(estimate(path.read_text()), -2)
    assert after[4] == f"<!-- entries: 25 | tokens: ~{tokens:,} -->\n"
    assert memory_md.lint_file(path, fix=True) == (report, False)


def test_fix_and_prune_take_turns_without_a_lock_file_anywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MEMORY.md need not live in a store: its lock is a flock on the file itself, and a run
    # that waited while another replaced the file locks the new one
    import fcntl
    import os
    import tempfile
    import threading

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    path = tmp_path / "notes" / "MEMORY.md"
    path.parent.mkdir()
    path.write_text(_prune_fixture())
    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(memory_md.apply_prune(path, TODAY)))
    with open(path, "rb") as holder:  # another run holds the lock on the current file
        fcntl.flock(holder, fcntl.LOCK_EX)
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not results  # it waits for the holder
        replacement = path.with_name("MEMORY.new")
        replacement.write_text(_prune_fixture() + "\n")
        os.replace(replacement, path)  # the holder's own write: a new file, same name
    waiter.join(10)
    assert results and path.read_text().count("Ancient fact") == 0
    assert sorted(p.name for p in path.parent.iterdir()) == ["MEMORY.md", "memory"]
    assert list(temp.iterdir()) == []


def test_fix_adds_a_missing_counts_line_and_keeps_crlf_and_bom(tmp_path: Path) -> None:
    text = "\ufeff<!-- neocortex.md v1.0 -->\r\n<!-- agent: a -->\r\n\r\n# Memory\r\n" \
           "## Identity\r\n- Name: A\r\n"
    path = tmp_path / "MEMORY.md"
    path.write_bytes(text.encode())
    _report, changed = memory_md.lint_file(path, fix=True)
    assert changed
    raw = path.read_bytes().decode()
    assert raw.startswith("\ufeff<!-- neocortex.md v1.0 -->\r\n<!-- agent: a -->\r\n"
                          "<!-- entries: 1 | tokens: ~")
    assert raw.endswith("-->\r\n\r\n# Memory\r\n## Identity\r\n- Name: A\r\n")


def test_fix_counts_split_over_two_comments(tmp_path: Path) -> None:
    header = ("<!-- neocortex.md v1.0 -->\n<!-- agent: a | entries: 9 -->\n"
              "<!-- consolidated: 2026-01-01 -->\n<!-- tokens: ~5 -->\n")
    path = tmp_path / "MEMORY.md"
    path.write_text(memory(header=header))
    memory_md.lint_file(path, fix=True)
    lines = path.read_text().splitlines()
    assert lines[1] == "<!-- agent: a | entries: 0 -->"
    assert lines[3].startswith("<!-- tokens: ~") and lines[2] == "<!-- consolidated: 2026-01-01 -->"


def test_fix_without_header_changes_nothing(tmp_path: Path, cli) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n## Identity\n- A\n")
    result = cli("memory", "lint", "--fix", str(path))
    assert result.exit_code == 1 and "no neocortex.md header" in result.output
    assert path.read_text() == "# Memory\n## Identity\n- A\n"


# --- stats -----------------------------------------------------------------------------------


def test_stats_per_section_against_budgets() -> None:
    result = memory_md.stats(memory_md.read(FIXTURES / "atlas.md"))
    by_name = {s.name: s for s in result.sections}
    assert by_name["Knowledge"].entries == 7 and by_name["Knowledge"].max_entries == 60
    assert by_name["Knowledge"].budget == 2500 and by_name["Knowledge"].state == "ok"
    assert result.entries == 25 and result.with_metadata == 5
    assert sum(s.tokens for s in result.sections) <= result.tokens
    over = memory_md.stats(memory_md.parse(memory({"Context": "- c\n" * 16})))
    assert {s.name: s.state for s in over.sections}["Context"] == "over max"


# --- prune -----------------------------------------------------------------------------------

TODAY = dt.date(2026, 6, 1)


def _prune_fixture() -> str:
    return memory({
        "Identity": "- Name: Atlas\n  <!-- nx: u=2020-01-01 a=0 -->\n",
        "Projects": "- Old project: shipped\n  <!-- nx: u=2025-11-01 c=high a=0 -->\n"
                    "- Live project\n  <!-- nx: u=2025-11-01 a=5 -->\n",
        "Knowledge": "- Ancient fact\n  <!-- nx: u=2025-10-01 a=0 -->\n"
                     "- Stale but used once\n  <!-- nx: u=2025-10-01 a=1 -->\n"
                     "- Month-old fact\n  <!-- nx: u=2026-04-15 a=2 -->\n"
                     "- Fresh fact\n  <!-- nx: u=2026-05-25 a=0 -->\n"
                     "- User said so\n  <!-- nx: u=2020-01-01 s=user -->\n"
                     "- Pinned\n  <!-- nx: keep u=2020-01-01 -->\n"
                     "- Hot\n  <!-- nx: u=2020-01-01 a=11 -->\n"
                     "- Undated fact\n",
        "Lessons": "- Old lesson\n  <!-- nx: u=2019-01-01 a=0 -->\n",
    })


def test_plan_follows_the_retention_rules() -> None:
    plan = memory_md.plan_prune(memory_md.parse(_prune_fixture()), TODAY)
    assert [j.entry.first_line() for j in plan.archive] == ["Old project: shipped", "Ancient fact"]
    assert [j.entry.first_line() for j in plan.compress] == ["Stale but used once",
                                                             "Month-old fact"]
    assert [j.entry.first_line() for j in plan.review] == ["Fresh fact"]
    assert [e.first_line() for e in plan.undated] == ["Undated fact"]
    assert plan.protected == {"Identity": 1, "Lessons": 1, "user-marked": 2,
                              "accessed > 10 times": 1}
    assert plan.kept == 1
    assert plan.archive[1].age_days == (TODAY - dt.date(2025, 10, 1)).days


def test_absurd_counts_are_problems_not_crashes() -> None:
    """A count of thousands of digits: a header that claims it is not a number (as a float it
    is infinity), and an entry read that often is protected from pruning (int() refuses
    4,300 digits and more)."""
    header = ("<!-- neocortex.md v1.0 -->\n<!-- agent: a -->\n<!-- consolidated: 2026-01-01 -->"
              f"\n<!-- entries: {'9' * 400} | tokens: ~50 -->\n")
    problems = memory_md.lint(memory_md.parse(memory(header=header))).problems
    assert any(p.code == "header-counts" and "are not numbers" in p.message for p in problems)
    text = memory({"Knowledge": f"- Hot\n  <!-- nx: u=2020-01-01 a={'9' * 5000} -->\n"})
    plan = memory_md.plan_prune(memory_md.parse(text), TODAY)
    assert plan.protected == {"accessed > 10 times": 1} and not plan.archive


def test_prune_dry_run_writes_nothing(tmp_path: Path, cli) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text(_prune_fixture())
    result = cli("memory", "prune", "--dry-run", "--as-of", "2026-06-01", str(path))
    assert result.exit_code == 0, result.output
    assert "would archive (2)" in result.stdout and "dry run: nothing written" in result.stdout
    assert path.read_text() == _prune_fixture()
    assert not (tmp_path / "memory").exists()


def test_prune_moves_entries_to_the_yearly_archive_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    original = _prune_fixture().replace("\n", "\r\n")
    path.write_bytes(original.encode())
    result = memory_md.apply_prune(path, TODAY)
    archive = tmp_path / "memory" / "archive" / "2025.md"
    assert result.written == [archive, path]
    expected = original.replace("- Old project: shipped\r\n  <!-- nx: u=2025-11-01 c=high a=0 -->"
                                "\r\n", "").replace("- Ancient fact\r\n  <!-- nx: u=2025-10-01 "
                                                    "a=0 -->\r\n", "")
    assert path.read_bytes().decode() == expected
    text = archive.read_text()
    assert text.startswith("<!-- neocortex.md archive v1.0 -->\n")
    assert ("## Projects\n- Old project: shipped\n  <!-- nx: u=2025-11-01 c=high a=0 -->\n"
            "  <!-- archived: 2026-06-01 -->\n") in text
    assert "## Knowledge\n- Ancient fact\n" in text
    again = memory_md.apply_prune(path, TODAY)
    assert again.written == [] and archive.read_text() == text


def test_prune_crash_between_archive_and_memory_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text(_prune_fixture())
    real = memory_md.atomic_write

    def crash_on_memory(target: Path, data: str | bytes) -> None:
        if target == path:
            raise KeyboardInterrupt  # killed after the archive, before MEMORY.md
        real(target, data)

    monkeypatch.setattr(memory_md, "atomic_write", crash_on_memory)
    with pytest.raises(KeyboardInterrupt):
        memory_md.apply_prune(path, TODAY)
    archive = tmp_path / "memory" / "archive" / "2025.md"
    assert path.read_text() == _prune_fixture()  # entries still in MEMORY.md …
    assert "- Ancient fact\n" in archive.read_text()  # … and already in the archive
    monkeypatch.setattr(memory_md, "atomic_write", real)
    memory_md.apply_prune(path, TODAY)
    assert archive.read_text().count("- Ancient fact\n") == 1
    assert "Ancient fact" not in path.read_text()


def test_prune_appends_to_an_existing_archive_section(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    archive = tmp_path / "memory" / "archive" / "2025.md"
    archive.parent.mkdir(parents=True)
    archive.write_text("# Memory archive — 2025\n\n## Knowledge\n- Earlier\n"
                       "  <!-- archived: 2026-01-01 -->\n\n## Context\n- Ctx\n")
    path.write_text(_prune_fixture())
    memory_md.apply_prune(path, TODAY)
    assert archive.read_text() == (
        "# Memory archive — 2025\n\n## Knowledge\n- Earlier\n  <!-- archived: 2026-01-01 -->\n"
        "- Ancient fact\n  <!-- nx: u=2025-10-01 a=0 -->\n  <!-- archived: 2026-06-01 -->\n"
        "\n## Context\n- Ctx\n\n## Projects\n- Old project: shipped\n"
        "  <!-- nx: u=2025-11-01 c=high a=0 -->\n  <!-- archived: 2026-06-01 -->\n")


def test_prune_in_the_store_commits_both_files(store, cli) -> None:
    path = store.context / "user" / "MEMORY.md"
    path.write_text(_prune_fixture())
    result = cli("memory", "prune", "--as-of", "2026-06-01")
    assert result.exit_code == 0, result.output
    log = subprocess.run(["git", "log", "--format=%s", "--name-only", "-1"], cwd=store.home,
                         capture_output=True, text=True).stdout
    assert log.splitlines()[0] == "memory: archive 2 MEMORY.md entries"
    assert "context/user/MEMORY.md" in log and "context/user/memory/archive/2025.md" in log


# --- CLI and bad input -----------------------------------------------------------------------


def test_cli_lint_exit_codes_and_json(tmp_path: Path, cli) -> None:
    good = tmp_path / "good.md"
    shutil.copy(FIXTURES / "atlas.md", good)
    result = cli("memory", "lint", str(good))
    assert result.exit_code == 0 and "0 errors, 2 warnings" in result.stdout
    bad = tmp_path / "bad.md"
    bad.write_text(memory(header="") + "## Extra\n- x\n  <!-- nx: c=sure -->\n")
    result = cli("memory", "lint", str(bad), "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert {p["code"] for p in data["problems"]} >= {"header-missing", "nx-invalid",
                                                     "section-custom"}


def test_default_path_is_the_stores_user_memory(store, cli) -> None:
    result = cli("memory", "lint")
    assert result.exit_code == 1
    assert "no MEMORY.md at" in result.stderr and str(store.context / "user") in result.stderr
    shutil.copy(FIXTURES / "atlas.md", store.context / "user" / "MEMORY.md")
    assert cli("memory", "stats").exit_code == 0


@pytest.mark.parametrize("content, message", [
    (b"\x00\x01binary", "binary file"),
    (b"\xff\xfe not utf-8", "not UTF-8"),
])
def test_unreadable_files_fail_with_one_line(tmp_path: Path, cli, content: bytes,
                                             message: str) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(content)
    result = cli("memory", "lint", str(path))
    assert result.exit_code == 1 and message in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(InvalidInputError):
        memory_md.read(path)


def test_missing_file_and_bad_options(tmp_path: Path, cli) -> None:
    result = cli("memory", "stats", str(tmp_path / "nope.md"))
    assert result.exit_code == 1 and "no MEMORY.md at" in result.stderr
    path = tmp_path / "MEMORY.md"
    path.write_text(memory())
    result = cli("memory", "prune", "--as-of", "June", str(path))
    assert result.exit_code == 1 and "--as-of 'June' is not a date" in result.stderr
    result = cli("memory", "lint", "--format", "xml", str(path))
    assert result.exit_code == 1 and "unknown --format" in result.stderr
    assert cli("memory", "lint", str(tmp_path)).exit_code == 1
