"""The egress proxy (host/sandbox/_egress_proxy.py) and its policy, driven directly over its Unix socket.

Loopback only: a resolver override maps test names to local servers started here; nothing reaches the internet.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from host.sandbox._egress_policy import EgressEntryError, EgressPolicy, is_special, parse_entry
from host.sandbox._egress_proxy import EgressEvent, EgressProxy

EXT = "fetcher"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hweg-") as base:  # short: AF_UNIX paths are limited
        yield Path(base)


@contextlib.asynccontextmanager
async def origin() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A local HTTP/1.1 server: answers every request with `origin saw: <request line>`; records the heads."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        body = b"origin saw: " + head.split(b"\r\n")[0]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], heads
    finally:
        server.close()


@contextlib.asynccontextmanager
async def echo() -> AsyncIterator[int]:
    """A local TCP echo server (stands for any TCP service behind a CONNECT tunnel)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


@contextlib.asynccontextmanager
async def proxy(sock_dir: Path, network: list[str], events: list[EgressEvent] | None = None,
                **kw: object) -> AsyncIterator[EgressProxy]:
    p = EgressProxy(EXT, network, sock_dir / "egress.sock",
                    resolver={name: "127.0.0.1" for name in ("api.test", "evil.test", "inner.test", "api.corp.test",
                                                             "corp.test")},
                    on_event=(lambda e, _call: events.append(e)) if events is not None else None, **kw)  # type: ignore[arg-type]
    await p.start()
    try:
        yield p
    finally:
        await p.close()


async def ask(p: EgressProxy, request: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """Open a connection to the proxy, send `request`, return the streams and the proxy's response head."""
    reader, writer = await asyncio.open_unix_connection(str(p.socket_path))
    writer.write(request)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return reader, writer, head


async def refusal(p: EgressProxy, request: bytes) -> tuple[bytes, str]:
    """(status line, body) of a refused request."""
    reader, writer, head = await ask(p, request)
    body = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return head.split(b"\r\n")[0], body.decode()


async def tunnel_echo(p: EgressProxy, target: str, payload: bytes) -> bytes:
    reader, writer, head = await ask(p, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"
    writer.write(payload)
    await writer.drain()
    got = await asyncio.wait_for(reader.readexactly(len(payload)), 10)
    writer.close()
    return got


async def test_connect_to_a_listed_name_tunnels_bytes_both_ways(sock_dir: Path) -> None:
    """CONNECT to a listed name (its loopback address listed too) relays bytes unchanged both ways."""
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"]) as p:
        payload = bytes(range(256)) * 40
        assert await tunnel_echo(p, f"api.test:{port}", payload) == payload


async def test_plain_http_absolute_uri_is_forwarded_in_origin_form(sock_dir: Path) -> None:
    """A plain-HTTP absolute-URI request reaches the origin as `GET /path?query`, without proxy headers."""
    async with origin() as (port, heads), proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"]) as p:
        reader, writer, head = await ask(
            p, f"GET http://api.test:{port}/v1/items?q=1 HTTP/1.1\r\nHost: api.test:{port}\r\n"
               "Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n\r\n".encode())
        body = await reader.read()
        writer.close()
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert body == b"origin saw: GET /v1/items?q=1 HTTP/1.1"
    assert heads[0] == f"GET /v1/items?q=1 HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n".encode()


async def test_unlisted_name_is_refused_with_a_403_naming_extension_and_target(sock_dir: Path) -> None:
    """A name not in permissions.network gets a 403 whose one-line body names the target and the extension."""
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"]) as p:
        status, body = await refusal(p, b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == "hookwire egress: 'evil.test:443' is not in extension 'fetcher' permissions.network\n"


async def test_listed_name_on_another_port_is_refused(sock_dir: Path) -> None:
    """An entry without a port allows port 443 only."""
    async with proxy(sock_dir, ["api.test"]) as p:
        status, body = await refusal(p, b"CONNECT api.test:8443 HTTP/1.1\r\n\r\n")
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == "hookwire egress: 'api.test:8443' is not in extension 'fetcher' permissions.network\n"


async def test_ip_literal_is_refused_unless_listed(sock_dir: Path) -> None:
    """An IP literal is refused even when a listed name resolves to it."""
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}"]) as p:
        status, body = await refusal(p, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == (f"hookwire egress: '127.0.0.1:{port}' is an IP address that is not listed in extension "
                    "'fetcher' permissions.network\n")


async def test_listed_name_resolving_to_loopback_is_refused(sock_dir: Path) -> None:
    """A listed name that resolves to 127.0.0.1 is refused when 127.0.0.1 itself is not listed."""
    async with echo() as port, proxy(sock_dir, [f"inner.test:{port}"]) as p:
        status, body = await refusal(p, f"CONNECT inner.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == (f"hookwire egress: 'inner.test:{port}' resolves to 127.0.0.1, a loopback/private/link-local/"
                    "metadata address that is not listed in extension 'fetcher' permissions.network\n")


async def test_name_the_resolver_does_not_know_gets_a_502(sock_dir: Path) -> None:
    """A listed name the resolver can't resolve gets a 502 naming it (the override never falls back to DNS)."""
    async with proxy(sock_dir, ["nowhere.test"]) as p:
        status, body = await refusal(p, b"CONNECT nowhere.test:443 HTTP/1.1\r\n\r\n")
    assert status == b"HTTP/1.1 502 Bad Gateway"
    assert body == ("hookwire egress: cannot resolve 'nowhere.test': name 'nowhere.test' is not in the resolver "
                    "override\n")


async def test_wildcard_entry_allows_subdomains_not_the_apex(sock_dir: Path) -> None:
    """`*.corp.test` allows api.corp.test but the bare corp.test is refused."""
    async with echo() as port, proxy(sock_dir, [f"*.corp.test:{port}", f"127.0.0.1:{port}"]) as p:
        assert await tunnel_echo(p, f"api.corp.test:{port}", b"ping") == b"ping"
        status, body = await refusal(p, f"CONNECT corp.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == f"hookwire egress: 'corp.test:{port}' is not in extension 'fetcher' permissions.network\n"


async def test_connections_beyond_the_cap_are_refused(sock_dir: Path) -> None:
    """With limits.egressConnections 1, a second connection while the first is open is refused."""
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"], max_connections=1) as p:
        reader, writer, head = await ask(p, f"CONNECT api.test:{port} HTTP/1.1\r\n\r\n".encode())
        assert head.startswith(b"HTTP/1.1 200")
        status, body = await refusal(p, f"CONNECT api.test:{port} HTTP/1.1\r\n\r\n".encode())
        writer.close()
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == ("hookwire egress: extension 'fetcher' has 1 egress connections open "
                    "(limits.egressConnections)\n")


async def test_byte_cap_cuts_the_connection_and_refuses_the_next(sock_dir: Path) -> None:
    """Past the byte cap the open tunnel is cut and a new connection is refused."""
    events: list[EgressEvent] = []
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"], events,
                                     max_bytes=100_000) as p:
        reader, writer, head = await ask(p, f"CONNECT api.test:{port} HTTP/1.1\r\n\r\n".encode())
        writer.write(b"x" * 200_000)
        with contextlib.suppress(OSError):
            await writer.drain()
        received = await asyncio.wait_for(reader.read(), 10)  # EOF when the proxy cuts
        writer.close()
        status, body = await refusal(p, f"CONNECT api.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert len(received) < 100_000
    assert events[0].reason == "cut: limits.egressMb reached"
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body == "hookwire egress: extension 'fetcher' used its 0 MB of egress (limits.egressMb)\n"


async def test_every_attempt_is_audited_with_extension_verdict_and_bytes(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """One hookwire.audit line per attempt: extension, host, port, verdict, bytes each way."""
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"]) as p:
        await tunnel_echo(p, f"api.test:{port}", b"0123456789")
        await refusal(p, b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
        await asyncio.sleep(0.1)  # the tunnel's audit line is written when the proxy sees it close
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "hookwire.audit")
    assert len(lines) == 2
    assert lines[0].startswith(f"egress extension=fetcher host=api.test port={port} allowed method=CONNECT "
                               "address=127.0.0.1 up=10 down=10 ms=")
    assert lines[1].startswith("egress extension=fetcher host=evil.test port=443 refused method=CONNECT address=- "
                               "up=0 down=0 ms=")
    assert lines[1].endswith("reason='evil.test:443' is not in extension 'fetcher' permissions.network")


async def test_connection_from_another_network_namespace_is_refused(sock_dir: Path) -> None:
    """Bound to a process in another network namespace, the proxy refuses a client from this one."""
    other = subprocess.Popen(["unshare", "-Urn", "sleep", "30"])
    try:
        await asyncio.sleep(0.3)
        async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"],
                                         require_peer=True) as p:
            p.bind_peer(other.pid)
            status, body = await refusal(p, f"CONNECT api.test:{port} HTTP/1.1\r\n\r\n".encode())
    finally:
        other.kill()
        other.wait()
    assert status == b"HTTP/1.1 403 Forbidden"
    assert body.startswith("hookwire egress: connection from outside the sandbox of extension 'fetcher' (pid ")


async def test_connection_from_the_bound_network_namespace_is_served(sock_dir: Path) -> None:
    """Bound to this process's own namespace, the proxy serves it."""
    import os

    async with echo() as port, proxy(sock_dir, [f"api.test:{port}", f"127.0.0.1:{port}"], require_peer=True) as p:
        p.bind_peer(os.getpid())
        assert await tunnel_echo(p, f"api.test:{port}", b"same namespace") == b"same namespace"


@pytest.mark.parametrize("entry, error", [
    ("https://api.example.com", "'https://api.example.com': write a host (optionally ':port'), not a URL"),
    ("api.example.com:0", "'api.example.com:0': port '0' is not a number from 1 to 65535"),
    ("api.example.com:http", "'api.example.com:http': port 'http' is not a number from 1 to 65535"),
    ("*.com", "'*.com': a wildcard is '*.' followed by a domain with at least two labels, like '*.example.com'"),
    ("api.*.com", "'api.*.com': '*' is allowed only as the first label ('*.example.com')"),
    ("bad host", "'bad host' is not a valid host name, IP address or '*.domain' pattern"),
    ("", "'' is empty; write a host name like 'api.example.com'"),
])
def test_invalid_entries_are_rejected_with_the_reason(entry: str, error: str) -> None:
    """Each malformed permissions.network entry gets an error naming it and what is wrong."""
    with pytest.raises(EgressEntryError) as info:
        parse_entry(entry)
    assert str(info.value) == error


def test_entries_parse_to_kind_host_and_port() -> None:
    """host, host:port, *.suffix, IPv4 and bracketed IPv6 entries parse (default port 443)."""
    rules = EgressPolicy(["API.Example.com.", "api.example.com:8080", "*.example.org", "203.0.113.7",
                          "[2001:db8::1]:8443", "::1"]).rules
    assert [(r.kind, r.host, r.port) for r in rules] == [
        ("host", "api.example.com", 443), ("host", "api.example.com", 8080), ("suffix", "example.org", 443),
        ("ip", "203.0.113.7", 443), ("ip", "2001:db8::1", 8443), ("ip", "::1", 443)]


@pytest.mark.parametrize("address, special", [
    ("127.0.0.1", True), ("10.1.2.3", True), ("172.16.0.1", True), ("192.168.1.1", True), ("169.254.169.254", True),
    ("100.64.0.1", True), ("0.0.0.0", True), ("::1", True), ("fd00:ec2::254", True), ("fe80::1", True),
    ("fc00::1", True), ("::", True), ("8.8.8.8", False), ("2606:4700::1111", False), ("203.0.113.7", False),
])
def test_address_classification(address: str, special: bool) -> None:
    """Loopback, private, link-local, CGNAT, unique-local and metadata addresses are special; public ones not."""
    assert is_special(ipaddress.ip_address(address)) is special


def test_ipv4_mapped_loopback_is_judged_as_loopback() -> None:
    """::ffff:127.0.0.1 is refused like 127.0.0.1 (and allowed only by listing 127.0.0.1)."""
    from host.sandbox._egress_policy import parse_ip

    addr = parse_ip("::ffff:127.0.0.1")
    assert addr is not None
    assert EgressPolicy(["api.test"]).address_refusal(addr, 443) is not None
    assert EgressPolicy(["api.test", "127.0.0.1"]).address_refusal(addr, 443) is None
