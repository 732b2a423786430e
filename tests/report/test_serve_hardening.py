"""`blocklab serve` against hostile clients: a real server on an ephemeral loopback port,
requests sent with http.client exactly as written (forged Host headers, every method)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import serving

from blocklab.report.server import DEFAULT_HOST, host_allowed

Addr = tuple[str, int]


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Addr]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>the site</p>")
    with serving(site) as addr:
        yield addr


def _request(addr: Addr, method: str, host: str | None, body: bytes | None = None):  # type: ignore[no-untyped-def]
    """Send one request with exactly this Host header (None: no Host header at all)."""
    conn = http.client.HTTPConnection(*addr, timeout=10)
    try:
        conn.putrequest(method, "/index.html", skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_the_default_listens_on_loopback_only(served: Addr) -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    assert served[0] == "127.0.0.1"


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LocalHost", "[::1]"])
def test_loopback_host_names_with_the_port_are_served(served: Addr, name: str) -> None:
    status, _, body = _request(served, "GET", f"{name}:{served[1]}")
    assert status == 200 and b"the site" in body
    assert _request(served, "HEAD", f"{name}:{served[1]}")[0] == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",  # what a DNS-rebinding page sends
        "localhost.evil.example:{port}",
        "127.0.0.1.nip.io:{port}",
        "127.0.0.1:1",  # another port
        "127.0.0.1",  # no port (it is not 80)
        "127.0.0.1:{port}@evil.example",
        "evil.example:{port}/x",
        "[::1:{port}",
        "",
        None,  # no Host header at all
    ],
)
def test_a_foreign_or_missing_host_gets_421(served: Addr, host: str | None) -> None:
    forged = None if host is None else host.format(port=served[1])
    status, _, body = _request(served, "GET", forged)
    assert status == 421, forged
    assert b"the site" not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_methods_other_than_get_and_head_get_405_with_allow(served: Addr, method: str) -> None:
    status, headers, body = _request(served, method, f"127.0.0.1:{served[1]}", body=b"x=1")
    assert status == 405, method
    assert headers.get("Allow") == "GET, HEAD"
    assert b"the site" not in body


def test_a_wrong_method_is_refused_before_the_host_is_looked_at(served: Addr) -> None:
    assert _request(served, "POST", "evil.example:1")[0] == 405


def test_host_allowed_for_an_explicit_or_wildcard_listen_address() -> None:
    assert host_allowed("myhost:8000", "myhost", 8000)
    assert host_allowed("10.1.2.3:8000", "10.1.2.3", 8000)
    assert not host_allowed("10.1.2.4:8000", "10.1.2.3", 8000)
    # Listening everywhere: any IP address (rebinding needs a name), never a name.
    assert host_allowed("10.1.2.4:8000", "0.0.0.0", 8000)
    assert not host_allowed("evil.example:8000", "0.0.0.0", 8000)
    assert host_allowed("127.0.0.1", "127.0.0.1", 80)  # port 80 may be left out
