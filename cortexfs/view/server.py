"""`cortex view --serve`: the site over HTTP on 127.0.0.1 only, read-only (stdlib http.server).

Only GET and HEAD are answered. A path is served only when it names a regular file inside
the site folder reached without any symlink and without a dot-named part (the site's
state folder is not served); anything else — `..`, encoded or not, a symlink out of the
site, a folder listing — is a 404. A request whose Host is not the loopback address it
was sent to is refused (a web page cannot reach the site through DNS rebinding).
"""

from __future__ import annotations

import os
import posixpath
import stat
import urllib.parse
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cortexfs import wall
from cortexfs.errors import InvalidInputError
from cortexfs.view import CSP

HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class Handler(SimpleHTTPRequestHandler):
    """Serves the files of one site folder, and nothing else."""

    server_version = "cortex-view"
    sys_version = ""

    def __init__(self, *args: Any, directory: str, **kwargs: Any) -> None:
        self.root = os.path.realpath(directory)
        super().__init__(*args, directory=self.root, **kwargs)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: a person watching the terminal wants the URL, not every request

    def send_head(self) -> Any:
        """What GET and HEAD answer (both come through here)."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        if host not in ("127.0.0.1", "localhost"):
            self.send_error(HTTPStatus.FORBIDDEN, "Only http://127.0.0.1 may ask this server")
            return None
        if not self.translate_path(self.path):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def translate_path(self, path: str) -> str:
        """The file `path` names inside the site, or "" when it names none."""
        nowhere = ""
        try:
            clean = urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0],
                                         errors="strict")
        except UnicodeDecodeError:
            return nowhere
        if "\0" in clean or "\\" in clean:
            return nowhere
        if clean.endswith("/"):
            clean += "index.html"
        parts = [p for p in posixpath.normpath(clean).split("/") if p]
        if not parts or any(p.startswith(".") for p in parts):
            return nowhere
        current = os.path.join(self.root, *parts)
        if wall.reason(self.root, current) is not None:  # a symlink on the way
            return nowhere
        try:
            return current if stat.S_ISREG(os.lstat(current).st_mode) else nowhere
        except OSError:
            return nowhere

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()


def server(site: Path, port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """A server for `site` bound to 127.0.0.1:`port` (0: any free port), not yet serving."""
    try:
        httpd = ThreadingHTTPServer((HOST, port), partial(Handler, directory=str(site)))
    except OSError as e:
        raise InvalidInputError(f"cannot listen on {HOST}:{port} ({e.strerror}): pass another "
                                "--port (0 picks a free one)") from None
    httpd.daemon_threads = True
    return httpd


def url(httpd: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{httpd.server_address[1]}/"
