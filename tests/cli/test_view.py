"""cortexfs.cli.view: `cortex view` reports and opens the site; --help imports no view module."""

from __future__ import annotations

import json

import pytest

from cortexfs.store import Project, Store
from cortexfs.view.build import default_dir


def test_cli_reports_and_opens(store: Store, viewed: Project, cli,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    result = cli("view", "--open")
    assert result.exit_code == 0, result.output
    site = default_dir(store)
    assert f"site: {site / 'index.html'}" in result.stdout
    assert "5 atoms in 1 project:" in result.stdout
    assert opened == [(site / "index.html").as_uri()]
    data = json.loads(cli("view", "-f", "json").stdout)
    assert data["written"] == 0 and data["atoms"] == 5 and data["site"] == str(site)
    assert not (store.home / ".gitignore").read_text().find(".cache/") < 0  # never committed


def test_help_does_not_import_the_view() -> None:
    import subprocess
    import sys

    code = "import sys; from cortexfs.cli.main import app; print('cortexfs.view' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --- the server --------------------------------------------------------------------------------

@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_serve_answers_until_ctrl_c_then_closes_its_socket(store: Store, viewed: Project,
                                                           stop: str) -> None:
    """`cortex view --serve` answers until Ctrl-C (or SIGTERM), which is how it is stopped:
    exit 0, a line saying so (not "interrupted, run it again"), and its socket closed."""
    import signal
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "cortexfs", "--home", str(store.home),
                             "view", "--serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving http://127.0.0.1:"), line
        address = line.split()[1]
        with urllib.request.urlopen(address, timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read()
        proc.send_signal(getattr(signal, stop))
        assert proc.wait(timeout=30) == 0
        assert proc.stderr.read() == f"stopped serving {address}\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(OSError):
        urllib.request.urlopen(address, timeout=5)
