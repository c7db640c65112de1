"""cortexfs.accesslog: appending reads, folding the log into counts, one folded state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cortexfs import accesslog
from cortexfs.store import Project


def test_fold_counts_and_newest_and_resumes(tmp_path: Path) -> None:
    log = tmp_path / "_meta" / "access-log.jsonl"
    accesslog.append(log, [
        accesslog.format_line("EXP-001.md", "Read", "s1", "2026-01-01T00:00:00.000Z"),
        accesslog.format_line("EXP-001.md", "Grep", "s1", "2026-02-01T00:00:00.000Z"),
    ])
    with open(log, "ab") as f:
        f.write(b"not json\n{\"file\": \"K-001.md\", \"ts\": \"2026-03-01T00:00:00.000Z\"}\n{\"fi")
    stats = accesslog.fold(log)
    assert stats.counts == {"EXP-001.md": 2, "K-001.md": 1}
    assert stats.newest["EXP-001.md"] == "2026-02-01T00:00:00.000Z"
    assert stats.bad_lines == 1
    with open(log, "ab") as f:
        f.write(b"le\": \"K-001.md\", \"ts\": \"2026-04-01T00:00:00.000Z\"}\n")
    stats = accesslog.fold(log, stats)
    assert stats.counts["K-001.md"] == 2 and stats.newest["K-001.md"].startswith("2026-04")
    line = json.loads(accesslog.format_line("a.md", "Read", "x"))
    assert set(line) == {"file", "tool", "ts", "session"} and line["ts"].endswith("Z")


def test_resume_folds_only_new_lines_and_restarts_on_a_rewritten_log(tmp_path: Path) -> None:
    log = tmp_path / "access-log.jsonl"
    line = accesslog.format_line
    accesslog.append(log, [line("EXP-001.md", "Read", "s", "2026-01-01T00:00:00.000Z")])
    stats, state = accesslog.resume(log, None)
    assert stats.counts == {"EXP-001.md": 1} and state[2] == log.stat().st_size
    assert accesslog.resume(log, state) == (stats, state)  # nothing new: same result
    accesslog.append(log, [line("K-001.md", "Read", "s", "2026-02-01T00:00:00.000Z")])
    stats2, state2 = accesslog.resume(log, state)
    assert stats2.counts == {"EXP-001.md": 1, "K-001.md": 1}
    # a merge rewrote the log in place, same length: the saved tail no longer matches
    log.write_bytes(log.read_bytes().replace(b"EXP-001", b"EXP-002"))
    stats3, _ = accesslog.resume(log, state2)
    assert stats3.counts == {"EXP-002.md": 1, "K-001.md": 1}
    assert accesslog.resume(tmp_path / "missing.jsonl", state2) == (accesslog.AccessStats(), [])



def test_access_stats_compare_and_show_every_field() -> None:
    stats = accesslog.AccessStats({"EXP-001.md": 2}, {"EXP-001.md": "2026-01-01"}, 80, 1, 3, 2)
    assert repr(stats) == ("AccessStats(counts={'EXP-001.md': 2}, newest={'EXP-001.md': "
                           "'2026-01-01'}, offset=80, bad_lines=1, lines=3, first_bad=2)")
    assert stats == accesslog.AccessStats({"EXP-001.md": 2}, {"EXP-001.md": "2026-01-01"},
                                          80, 1, 3, 2)
    for changed in ({"offset": 81}, {"bad_lines": 0}, {"lines": 4}, {"first_bad": 1},
                    {"counts": {}}, {"newest": {}}):
        other = accesslog.AccessStats({"EXP-001.md": 2}, {"EXP-001.md": "2026-01-01"},
                                      80, 1, 3, 2)
        vars(other).update(changed)
        assert stats != other, changed
    assert stats != (stats.counts, stats.newest)


def test_current_is_one_folded_state_every_reader_shares(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    def read(n: int) -> bytes:
        return accesslog.format_line("EXP-001.md", "Read", "s", f"2026-01-0{n}T00:00:00.000Z")

    accesslog.append(project.access_log, [read(1), read(2)])
    first, _ = accesslog.current(project)  # (e.g. recall)
    assert first.counts == {"EXP-001.md": 2}
    accesslog.append(project.access_log, [read(3)])
    offsets: list[int] = []
    real = accesslog.fold

    def spy(log: Path, stats: accesslog.AccessStats | None = None) -> accesslog.AccessStats:
        offsets.append(stats.offset if stats else 0)
        return real(log, stats)

    monkeypatch.setattr(accesslog, "fold", spy)
    second, state = accesslog.current(project)  # another reader, another process
    assert second.counts == {"EXP-001.md": 3}
    assert second.newest["EXP-001.md"].startswith("2026-01-03")
    assert offsets == [first.offset]  # only what was appended since the first reader
    assert accesslog.current(project, state)[0] == second and len(offsets) == 1
    shutil.rmtree(project.store.cache_dir)  # a deleted cache: folded again, the same stats
    assert accesslog.current(project)[0] == second and offsets[-1] == 0
