"""Serve a generated site over HTTP: 127.0.0.1 unless told otherwise, files under the
site's root only (no directory listings, no `..`, no symlinks leading out), GET and HEAD
only, and only to requests whose Host header names this server (a web page on another
site that rebinds its DNS name to 127.0.0.1 sends its own name, and gets 421)."""

from __future__ import annotations

import errno
import ipaddress
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from blocklab.errors import UserError

DEFAULT_HOST = "127.0.0.1"
ALLOWED_METHODS = ("GET", "HEAD")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host_header: str | None, bound_host: str, port: int) -> bool:
    """Whether a request's Host header names this server: a loopback name, the host it
    was told to listen on, or (when it listens on every address) any IP address; always
    with the port it listens on (no port only when that is 80). Someone else's DNS name is
    what a DNS-rebinding page sends, so it is refused."""
    if not host_header or any(c in host_header for c in "/?#@ \t"):
        return False
    try:
        url = urlsplit("//" + host_header.strip())
        given_port = url.port if url.port is not None else 80
    except ValueError:
        return False
    name, bound = url.hostname or "", bound_host.lower().strip("[]")
    if given_port != port or not name:
        return False
    if name in LOOPBACK_NAMES or (bound not in WILDCARD_HOSTS and name == bound):
        return True
    return bound in WILDCARD_HOSTS and _is_ip_literal(name)


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
    bound_host: str = DEFAULT_HOST

    def parse_request(self) -> bool:
        """The request line and headers, then the method and Host checks: a request
        that fails one is answered here and never reaches do_GET/do_HEAD."""
        if not super().parse_request():
            return False
        if self.command not in ALLOWED_METHODS:
            self._refuse(405, "Method Not Allowed", allow=", ".join(ALLOWED_METHODS))
            return False
        port = int(getattr(self.server, "server_port", 0))  # HTTPServer sets it on bind
        if not host_allowed(self.headers.get("Host"), self.bound_host, port):
            self._refuse(421, "Misdirected Request: the Host header does not name this server")
            return False
        return True

    def _refuse(self, code: int, message: str, allow: str | None = None) -> None:
        body = f"{code} {message}\n".encode()
        self.send_response(code, message.split(":")[0])
        if allow is not None:
            self.send_header("Allow", allow)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

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
    attrs = {"site_root": site.absolute(), "quiet": quiet, "bound_host": host}
    handler = type("BoundSiteHandler", (SiteHandler,), attrs)
    try:
        return ThreadingHTTPServer((host, port), partial(handler, directory=str(site)))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"--port: {port} is in use on {host}; pick another port") from e
        raise UserError(f"--host: cannot listen on {host}:{port} ({e.strerror or e})") from e
