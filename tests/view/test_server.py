"""cortexfs.view.server: `cortex view --serve`, the site over HTTP on the loopback only."""

from __future__ import annotations

import http.client
import threading
from pathlib import Path

import pytest

from cortexfs.store import Project, Store
from cortexfs.view.build import build


@pytest.fixture
def served(store: Store, viewed: Project, tmp_path: Path):
    from cortexfs.view import server

    site = build(store).root
    (tmp_path / "secret.txt").write_text("secret")
    (site / "p" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (site / "p" / "leakdir").symlink_to(tmp_path)
    httpd = server.server(site, port=0)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _get(httpd, path: str, method: str = "GET", host: str | None = None) -> tuple[int, bytes]:
    port = httpd.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def test_server_serves_the_site_and_nothing_else(served) -> None:
    assert served.server_address[0] == "127.0.0.1"
    status, body = _get(served, "/")
    assert status == 200 and b"<title>Store" in body
    assert _get(served, "/p/flywheel/EXP-001.html")[0] == 200
    assert _get(served, "/search.html?q=registry")[0] == 200
    for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/p/..%2f..%2fsecret.txt",
                 "/p/leak.txt", "/p/leakdir/secret.txt", "/.cortex-view/manifest.bin",
                 "/p/", "/p", "/nosuch.html", "/%ff", "/p/flywheel/EXP-001.html%00"):
        status, body = _get(served, path)
        assert status == 404 and b"secret" not in body, path
    assert _get(served, "/", method="POST")[0] == 501
    assert _get(served, "/", method="PUT")[0] == 501
    assert _get(served, "/", host="evil.example:80")[0] == 403  # DNS rebinding
    assert _get(served, "/", method="HEAD", host="evil.example:80") == (403, b"")
    assert _get(served, "/", method="HEAD") == (200, b"")
    assert _get(served, "/p/leak.txt", method="HEAD")[0] == 404
    assert _get(served, "/", host=f"localhost:{served.server_address[1]}")[0] == 200


