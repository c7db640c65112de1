"""cortexfs.view.history: reads per atom per day, folded from the access log and cached."""

from __future__ import annotations

import shutil
from pathlib import Path

from cortexfs import accesslog
from cortexfs.store import Project
from cortexfs.view.history import daily_reads


def read(project: Project, file: str, ts: str) -> None:
    accesslog.append(project.access_log, [accesslog.format_line(file, "Read", "s", ts)])


def test_reads_are_counted_per_file_per_day_and_resumed(project: Project) -> None:
    assert daily_reads(project) == {}  # no log yet
    read(project, "EXP-001.md", "2026-03-07T10:00:00.000Z")
    read(project, "EXP-001.md", "2026-03-07T23:59:00.000Z")
    read(project, "K-001.md", "2026-03-08T01:00:00.000Z")
    want = {"EXP-001.md": {"2026-03-07": 2}, "K-001.md": {"2026-03-08": 1}}
    assert daily_reads(project) == want
    assert daily_reads(project) == want  # from the cache
    read(project, "EXP-001.md", "2026-03-09T00:00:00.000Z")
    want["EXP-001.md"]["2026-03-09"] = 1
    assert daily_reads(project) == want  # only the new line folded in
    shutil.rmtree(project.store.cache_dir)
    assert daily_reads(project) == want  # the cache changes nothing


def test_a_rewritten_log_is_folded_again(project: Project) -> None:
    read(project, "EXP-001.md", "2026-03-07T10:00:00.000Z")
    read(project, "EXP-001.md", "2026-03-07T11:00:00.000Z")
    assert daily_reads(project) == {"EXP-001.md": {"2026-03-07": 2}}
    project.access_log.write_bytes(accesslog.format_line("K-009.md", "Read", "s",
                                                         "2026-04-01T00:00:00.000Z"))
    assert daily_reads(project) == {"K-009.md": {"2026-04-01": 1}}


def test_a_linked_log_is_not_read(project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(accesslog.format_line("EXP-001.md", "Read", "s",
                                              "2026-03-07T10:00:00.000Z"))
    project.access_log.parent.mkdir(parents=True, exist_ok=True)
    project.access_log.unlink(missing_ok=True)
    project.access_log.symlink_to(outside)
    assert daily_reads(project) == {}
