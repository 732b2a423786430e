"""Serve a generated site over HTTP: 127.0.0.1 unless told otherwise, files under the
site's root only (no directory listings, no `..`, no symlinks leading out)."""

from __future__ import annotations

import errno
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from blocklab.errors import UserError

DEFAULT_HOST = "127.0.0.1"


def resolve_in_site(root: Path, url_path: str) -> Path | None:
    """The file a request path names, or None when it would leave `root`.

    The path is percent-decoded once; any `..` segment, backslash, NUL or a target
    outside the root after symlink resolution is refused. A directory maps to its
    index.html."""
    path = unquote(urlsplit(url_path).path, errors="strict")
    if "\x00" in path or "\\" in path:
        return None
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return None
    base = root.resolve()
    target = base.joinpath(*parts).resolve() if parts else base
    if target != base and base not in target.parents:
        return None
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


class SiteHandler(SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler restricted to resolve_in_site()."""

    quiet = False
    site_root: Path = Path(".")

    def _target(self) -> Path | None:
        try:
            return resolve_in_site(self.site_root, self.path)
        except UnicodeDecodeError:
            return None

    def send_head(self) -> Any:
        if self._target() is None:
            self.send_error(404, "Not found")
            return None
        return super().send_head()

    def translate_path(self, path: str) -> str:
        target = self._target()
        return str(target if target is not None else self.site_root / "\x00")

    def list_directory(self, path: Any) -> None:
        self.send_error(404, "Not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(
    site: Path, *, host: str = DEFAULT_HOST, port: int = 8000, quiet: bool = False
) -> ThreadingHTTPServer:
    """A server for `site` bound to host:port (port 0 picks a free one); call
    serve_forever() on it and shutdown() + server_close() to stop it."""
    handler = type(
        "BoundSiteHandler", (SiteHandler,), {"site_root": site.absolute(), "quiet": quiet}
    )
    try:
        return ThreadingHTTPServer((host, port), partial(handler, directory=str(site)))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"--port: {port} is in use on {host}; pick another port") from e
        raise UserError(f"--host: cannot listen on {host}:{port} ({e.strerror or e})") from e
