"""Concurrent hooks on one project: every line arrives whole, none is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cortexfs.store import Project

SCRIPT = Path(__file__).resolve().parent.parent / "hooks" / "memory-ref-tracker"
WORKER = """
import json, sys
from cortexfs.hook import main
home, atoms, worker, calls = sys.argv[1], sys.argv[2].split(","), sys.argv[3], int(sys.argv[4])
for i in range(calls):
    payload = {"session_id": f"{worker}-{i}-" + "x" * (i % 97), "cwd": "/",
               "tool_name": "Bash", "tool_input": {"command": "cat " + " ".join(atoms)}}
    main(["--home", home], json.dumps(payload).encode())
"""


def make_atoms(project: Project, n: int) -> list[str]:
    out = []
    for i in range(1, n + 1):
        path = project.root / "experiments" / f"EXP-{i:03d}.md"
        path.write_text("x")
        out.append(str(path))
    return out


def check_log(project: Project, expected_sessions: set[str], per_call: int) -> None:
    raw = project.access_log.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == len(expected_sessions) * per_call
    sessions: dict[str, int] = {}
    for line in lines:
        entry = json.loads(line)  # every line whole and valid
        sessions[entry["session"]] = sessions.get(entry["session"], 0) + 1
    assert set(sessions) == expected_sessions
    assert set(sessions.values()) == {per_call}


def test_eight_processes_times_500_calls(project: Project) -> None:
    atoms = make_atoms(project, 3)
    env = dict(os.environ, CORTEX_AUTOCOMMIT="0")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(project.store.home),
                               ",".join(atoms), f"w{k}", "500"], env=env)
             for k in range(8)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    sessions = {f"w{k}-{i}-" + "x" * (i % 97) for k in range(8) for i in range(500)}
    check_log(project, sessions, per_call=3)  # 4,000 calls x 3 atoms, each call one write
    assert not (project.store.logs_dir / "hook.log").exists()


def test_real_script_processes_in_parallel(project: Project) -> None:
    [atom] = make_atoms(project, 1)
    env = dict(os.environ, CORTEX_AUTOCOMMIT="0")
    procs = []
    for k in range(24):
        payload = json.dumps({"session_id": f"r{k}", "cwd": "/", "tool_name": "Read",
                              "tool_input": {"file_path": atom}}).encode()
        p = subprocess.Popen([sys.executable, "-I", "-S", str(SCRIPT), "--home",
                              str(project.store.home)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        procs.append((p, payload))
    for p, payload in procs:
        out, err = p.communicate(payload, timeout=60)
        assert (p.returncode, out, err) == (0, b"", b"")
    check_log(project, {f"r{k}" for k in range(24)}, per_call=1)
