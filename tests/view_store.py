"""A small store for the `cortex view` tests: three kinds of atoms citing each other,
statuses of every group, tasks with dependencies, reads in the access log — and one atom
whose every field is hostile (markup, script, `javascript:` links, template syntax)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cortexfs.store import Project

HOSTILE_SUMMARY = 'Evil </script><script>alert("s")</script> {{ 7*7 }} & "quotes"'
HOSTILE_TAG = "<b>tag</b>"
HOSTILE_BODY = """
# EXP-003: hostile

<script>window.__pwned = "body"</script>
<img src=x onerror="window.__pwned = 'img'">
[click me](javascript:window.__pwned='link') and [data](data:text/html,<b>x</b>)
{{ 7*7 }} {% raw %} ${7*7} </script>
![pixel](http://tracker.invalid/pixel.png)
Names EXP-001 and the missing EXP-999.
"""
BODY_WORD = "zanzibarquux"  # in one body only: what the search test looks for

TASKS = """\
tasks:
  - id: T-1
    text: Measure the baseline
    status: done
    completed-at: 2026-03-02
  - id: T-2
    text: Write the <loader>
    status: doing
    priority: P1
    why: EXP-001 showed the cache matters
    depends-on: [T-1]
  - id: T-3
    text: Benchmark it
    status: todo
    depends-on: [T-2, T-9]
"""


def populate(project: Project) -> None:
    """Atoms, tasks, a STATUS.md and reads in `project` (a scaffolded one)."""
    root = project.root

    def atom(folder: str, name: str, front: str, body: str) -> None:
        (root / folder).mkdir(exist_ok=True)
        (root / folder / f"{name}.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")

    common = f"project: {project.name}\n"
    atom("experiments", "EXP-001", f"id: EXP-001\ndate: 2026-03-01\n{common}"
         "summary: \"Baseline registry extraction\"\ntags: [registry, baseline]\nstatus: valid\n"
         "links: [EXP-002]\n",
         f"\n# EXP-001: Baseline\n\n## Results\n\nThe {BODY_WORD} cache halved latency; "
         "see K-001.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    atom("experiments", "EXP-002", f"id: EXP-002\ndate: 2026-03-05\n{common}"
         "summary: \"Repeat on a clean checkout\"\ntags: [registry]\n"
         "status: invalidated:EXP-001\ninvalidated-date: 2026-03-06\n"
         "invalidated-reason: \"measured on the wrong split\"\n",
         "\nIt did not reproduce.\n")
    atom("experiments", "EXP-003", f"id: EXP-003\ndate: 2026-03-07\n{common}"
         f"summary: {json.dumps(HOSTILE_SUMMARY)}\ntags: [{json.dumps(HOSTILE_TAG)}, "
         "\"javascript:alert(1)\"]\n", HOSTILE_BODY)
    atom("knowledge", "K-001", f"id: K-001\ndate: 2026-03-08\n{common}"
         "summary: \"Registries need a schema check\"\ntags: [registry]\n"
         "evidence: [EXP-001, EXP-002]\n",
         "\n# K-001: Registries need a schema check\n\nRests on EXP-001.\n")
    atom("patterns", "PAT-001", f"id: PAT-001\ndate: 2026-03-09\n{common}"
         "summary: \"Check schemas at every stage\"\ntags: [registry]\n"
         "source-experiments: [EXP-001]\nevidence: [K-001]\nstatus: superseded:K-001\n",
         "\nAn older statement.\n")
    (root / "TASKS.yaml").write_text(TASKS, encoding="utf-8")
    status = (root / "STATUS.md").read_text(encoding="utf-8")
    (root / "STATUS.md").write_text(status.replace(
        "- Project created.", "- Project created.\n- Baseline measured (EXP-001) <b>bold</b>."),
        encoding="utf-8")
    lines = [{"file": "EXP-001.md", "tool": "Read", "ts": f"2026-03-{d:02d}T10:00:00.000Z",
              "session": "s"} for d in (10, 10, 11, 12, 12, 12)]
    lines.append({"file": "K-001.md", "tool": "Read", "ts": "2026-03-12T11:00:00.000Z",
                  "session": "s"})
    project.meta_dir.mkdir(exist_ok=True)
    with open(project.access_log, "a", encoding="utf-8") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    age(project.store.home)


def age(root: Path, seconds: float = 3600) -> None:
    """Date the files under `root` changed in the last minute back by `seconds`: cortex
    does not trust the stat data of a file changed in the last two seconds (a later write
    could keep them) and re-reads it, which a test of what is rewritten cannot have."""
    now = time.time()
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if st.st_mtime > now - 60:
            os.utime(path, (st.st_atime, st.st_mtime - seconds), follow_symlinks=False)


def site_files(site: Path) -> dict[str, str]:
    """rel path → text of every file of a built site (its state folder left out)."""
    return {p.relative_to(site).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(site.rglob("*")) if p.is_file() and ".cortex-view" not in p.parts
            and p.suffix in (".html", ".js", ".css")}


def site_data(path: Path) -> object:
    """The value a site's data script (`cortexData(name, VALUE);`, escape.data_script) holds."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index(",") + 1:text.rindex(")")])
