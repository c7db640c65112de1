"""cortex rewriting an atom's frontmatter while someone else keeps saving it loses nothing.

A writer process re-saves one atom in a tight loop (a save every few milliseconds: atomic
renames and in-place rewrites, alternately, each building on the file as it finds it),
while regeneration folds new access-log lines into that atom's `refs` over and over. No
save may be lost (the writer finds its previous save each time), the writer's last save
survives, and every refs update lands on the latest content or is retried.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cortexfs import accesslog, frontmatter, fsutil
from cortexfs.fsutil import rewrite
from cortexfs.regen import regenerate
from cortexfs.store import Project

# Each save: read, check that the previous save is still there, bump the edit number.
WRITER = r"""
import json, os, re, sys, time
path, stop, mode, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
saves = lost = 0
while not os.path.exists(stop):
    time.sleep(pause)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^edit (\d+)$", text, re.M)
    if m is None:
        continue  # caught an in-place save half-way (our own): read again
    if saves and int(m.group(1)) != saves:
        lost += 1
        print("LOST", saves, m.group(1), "rename" if (saves % 2) else "inplace", file=sys.stderr)
    saves += 1
    text = text[:m.start()] + f"edit {saves}" + text[m.end():]
    if mode == "rename" or (mode == "both" and saves % 2):
        tmp = f"{path}.w{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
print(json.dumps({"saves": saves, "lost": lost}))
"""


def _atom(project: Project) -> Path:
    path = project.root / "experiments" / "EXP-001.md"
    path.write_text("---\nid: EXP-001\ndate: 2026-03-01\nproject: flywheel\nsummary: contested\n"
                    "tags: [race]\n---\nedit 0\n")
    return path


def test_regen_never_loses_a_concurrent_save(project: Project, tmp_path: Path) -> None:
    path = _atom(project)
    fsutil.swap_counts.clear()
    stop = tmp_path / "stop"
    # a save every millisecond or so (the issue: "an agent re-saving one atom every few ms";
    # CORTEX_RACE_PAUSE=0 for a loop with no pause at all)
    pause = os.environ.get("CORTEX_RACE_PAUSE", "0.001")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(stop), "both",
                               pause], stdout=subprocess.PIPE, text=True)
    regens = 0
    # CORTEX_RACE_SECONDS=60 pytest -s tests/test_edit_race.py: a longer run, with counts
    deadline = time.monotonic() + float(os.environ.get("CORTEX_RACE_SECONDS", "4"))
    while time.monotonic() < deadline:
        regens += 1
        accesslog.append(project.access_log, [accesslog.format_line(
            "EXP-001.md", "Read", f"r{regens}", f"2026-03-02T00:00:{regens % 60:02d}.000Z")])
        regenerate(project.store, [project.name])
    stop.touch()
    out, _ = writer.communicate(timeout=30)
    counts = json.loads(out)
    print(f"\n{regens} regens, {counts['saves']} saves, {counts['lost']} lost; refs "
          f"writes: {fsutil.swap_counts}")
    report = f"{regens} regens, {counts}, {fsutil.swap_counts}"
    assert counts["saves"] >= 100 and regens >= 10, report  # they overlapped
    assert counts["lost"] == 0, report
    # the writer's last save survived
    assert f"edit {counts['saves']}\n" in path.read_text(), report
    regenerate(project.store, [project.name])
    assert frontmatter.read(path).meta["refs"] == regens, report  # every read counted


def test_rewrite_applies_the_change_to_the_latest_content(tmp_path: Path) -> None:
    (tmp_path / "atoms").mkdir()
    path = tmp_path / "atoms" / "EXP-001.md"
    path.write_bytes(b"v1\n")
    seen = []

    def change(data: bytes) -> bytes:
        seen.append(data)
        if len(seen) == 1:  # someone saves between cortex's read and its rename
            path.write_bytes(b"v2 by hand\n")
        return data + b"refs\n"

    assert rewrite(path, change)
    assert path.read_bytes() == b"v2 by hand\nrefs\n"
    assert seen == [b"v1\n", b"v2 by hand\n"]
    assert [p.name for p in path.parent.iterdir()] == ["EXP-001.md"]  # no temporary left
