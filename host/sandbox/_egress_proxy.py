"""The host-side egress proxy of one extension: HTTP CONNECT and plain-HTTP proxying on a Unix socket.

Inside the extension's network namespace the only way out is a relay (host/sandbox/_egress_relay.py) that forwards each
TCP connection made to 127.0.0.1:<port> byte-for-byte to this proxy's Unix socket. The proxy:
  - accepts only connections from the extension's own network namespace once `bind_peer(pid)` named it
    (SO_PEERCRED pid -> /proc/<pid>/ns/net): a sibling extension that finds the socket path gets refused;
  - reads one request head: `CONNECT host:port` (a tunnel for HTTPS or any TCP) or an absolute-URI plain-HTTP
    request (`GET http://host[:port]/path`, default port 80), which it rewrites to origin form;
  - allows only what the extension's `EgressPolicy` allows; resolves names itself (a resolver override maps names
    to addresses in tests; with an override, names it doesn't list do not resolve at all); refuses special
    addresses unless listed; connects to the very address it checked (no second resolution: no DNS rebinding);
  - enforces caps: concurrent connections, and total bytes (both directions, since the proxy started);
  - answers a refusal with an HTTP 403 (502 when the upstream can't be reached, 400 for a malformed request)
    and a one-line `hookwire egress: ...` body;
  - audits every connection on the `hookwire.audit` logger (extension, host, port, allowed/refused and why,
    bytes each way, duration) and hands the same `EgressEvent` to `on_event` (the manager's trace).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from ._egress_policy import EgressPolicy, IPAddress, normalize_host, parse_ip, split_host_port

audit_logger = logging.getLogger("hookwire.audit")
log = logging.getLogger("hookwire.egress")

MAX_HEAD = 16 * 1024  # bytes of request line + headers
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
PEER_WAIT_S = 30.0  # how long a connection waits for bind_peer() while its extension is still starting
CHUNK = 64 * 1024

Resolver = Callable[[str, int], Awaitable[list[str]]]


class EgressEvent(BaseModel):
    """One proxied connection (or refused attempt), as audited."""

    extension: str
    host: str
    port: int
    allowed: bool
    reason: str = ""
    address: str = ""
    method: str = ""
    bytes_up: int = 0  # extension -> upstream
    bytes_down: int = 0  # upstream -> extension
    duration_ms: float = 0.0

    def line(self) -> str:
        """The audit line (one line, `key=value`)."""
        verdict = "allowed" if self.allowed else "refused"
        text = (f"egress extension={self.extension} host={self.host or '-'} port={self.port} {verdict} "
                f"method={self.method or '-'} address={self.address or '-'} up={self.bytes_up} "
                f"down={self.bytes_down} ms={self.duration_ms:.1f}")
        return f"{text} reason={self.reason}" if self.reason else text


class _Refused(Exception):
    def __init__(self, status: int, reason: str, host: str = "", port: int = 0) -> None:
        super().__init__(reason)
        self.status, self.reason, self.host, self.port = status, reason, host, port


_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


def mapping_resolver(names: Mapping[str, str | Sequence[str]]) -> Resolver:
    """A resolver that knows only `names` (name -> address or addresses); any other name does not resolve."""
    table = {normalize_host(k): [v] if isinstance(v, str) else list(v) for k, v in names.items()}

    async def resolve(host: str, port: int) -> list[str]:
        found = table.get(normalize_host(host))
        if not found:
            raise OSError(f"name {host!r} is not in the resolver override")
        return list(found)

    return resolve


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's resolver (getaddrinfo), addresses in its order, deduplicated."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _netns_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def _peer_pid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    with contextlib.suppress(OSError):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", raw)[0])
    return None


class EgressProxy:
    """One extension's egress proxy (asyncio) listening on a Unix socket."""

    def __init__(
        self,
        extension: str,
        network: list[str],
        socket_path: Path,
        *,
        resolver: Mapping[str, str | Sequence[str]] | Resolver | None = None,
        max_connections: int = 32,
        max_bytes: int = 1024 * 1024 * 1024,
        require_peer: bool = False,
        on_event: Callable[[EgressEvent, Any], None] | None = None,
    ) -> None:
        """`resolver`: a name->address(es) mapping (the test override) or an async resolve(host, port); default
        the system's. `require_peer`: accept connections only from the namespace of the pid given to bind_peer.
        `on_event(event, call)`: after each connection; `call` is what `during()` named when it opened, or None."""
        self.extension = extension
        self.policy = EgressPolicy(network)
        self.socket_path = Path(socket_path)
        if resolver is None:
            self._resolve: Resolver = system_resolver
        elif isinstance(resolver, Mapping):
            self._resolve = mapping_resolver(resolver)
        else:
            self._resolve = resolver
        self.max_connections = max_connections
        self.max_bytes = max_bytes
        self.require_peer = require_peer
        self.on_event = on_event
        self.active = 0
        self.bytes_total = 0
        self._peer_ns: str | None = None
        self._peer_bound = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._calls: list[Any] = []  # the hook/tool calls in progress (see during), innermost last

    @contextlib.contextmanager
    def during(self, call: Any) -> Iterator[None]:
        """Connections opened while this is active are reported to on_event with `call` (the manager's context)."""
        self._calls.append(call)
        try:
            yield
        finally:
            self._calls.remove(call)

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path), limit=MAX_HEAD)
        os.chmod(self.socket_path, 0o600)

    def bind_peer(self, pid: int | None) -> None:
        """Accept connections only from the network namespace of process `pid` (the extension); None unbinds."""
        if pid is None:
            self._peer_ns = None
            self._peer_bound.clear()
            return
        try:
            self._peer_ns = _netns_of(pid)
        except OSError as exc:
            log.warning("egress proxy of extension %r: cannot read the namespace of pid %d: %s", self.extension, pid,
                        exc)
            self._peer_ns = None
            return
        self._peer_bound.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    # -- one connection ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.active += 1
        t0 = time.perf_counter()
        event = EgressEvent(extension=self.extension, host="", port=0, allowed=False)
        call = self._calls[-1] if self._calls else None
        try:
            await self._handle(reader, writer, event)
        except _Refused as exc:
            event.allowed, event.reason = False, exc.reason
            event.host, event.port = event.host or exc.host, event.port or exc.port
            body = f"hookwire egress: {exc.reason}\n".encode()
            head = (f"HTTP/1.1 {exc.status} {_STATUS_TEXT[exc.status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(head + body)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            if not event.reason:
                event.reason = f"connection ended: {type(exc).__name__}"
        finally:
            self.active -= 1
            self._tasks.discard(task)
            writer.close()
            event.duration_ms = (time.perf_counter() - t0) * 1000
            self._audit(event, call)

    def _audit(self, event: EgressEvent, call: Any) -> None:
        if not event.host and not event.allowed and event.reason.startswith("connection ended"):
            return  # a connection closed before it asked for anything: nothing to audit
        audit_logger.log(logging.INFO if event.allowed else logging.WARNING, "%s", event.line(),
                         extra={"extension": event.extension, "egress": event.model_dump()})
        if self.on_event is not None:
            try:
                self.on_event(event, call)
            except Exception:  # noqa: BLE001 - a listener must not break the proxy
                log.exception("egress event listener failed")

    def _refuse_target(self, host: str, port: int) -> str:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if parse_ip(host) is not None:
            return (f"{target!r} is an IP address that is not listed in extension {self.extension!r} "
                    "permissions.network")
        return f"{target!r} is not in extension {self.extension!r} permissions.network"

    async def _peer_refusal(self, writer: asyncio.StreamWriter) -> str | None:
        """Why this connection's peer may not use the proxy (None when it may)."""
        if not self.require_peer:
            return None
        if not self._peer_bound.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._peer_bound.wait(), PEER_WAIT_S)
        pid = _peer_pid(writer)
        expected = self._peer_ns
        try:
            actual = _netns_of(pid) if pid is not None else None
        except OSError:
            actual = None
        if expected is None or actual != expected:
            return f"connection from outside the sandbox of extension {self.extension!r} (pid {pid})"
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, event: EgressEvent) -> None:
        foreign = await self._peer_refusal(writer)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            raise _Refused(400, f"request head over {MAX_HEAD} bytes") from None
        except TimeoutError:
            raise _Refused(400, f"no request within {HEAD_TIMEOUT_S:.0f} s") from None
        method, host, port, forward = self._parse_head(head)
        event.method, event.host, event.port = method, host, port
        if foreign is not None:  # refused after reading the head: closing on unread data would reset, not answer
            raise _Refused(403, foreign)
        if self.active > self.max_connections:
            raise _Refused(403, f"extension {self.extension!r} has {self.max_connections} egress connections open "
                                "(limits.egressConnections)")
        if self.bytes_total >= self.max_bytes:
            raise _Refused(403, f"extension {self.extension!r} used its {self.max_bytes // (1024 * 1024)} MB of "
                                "egress (limits.egressMb)")
        if self.policy.allows_target(host, port) is None:
            raise _Refused(403, self._refuse_target(host, port))
        addr = await self._address(host, port)
        event.address = str(addr)
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(str(addr), port, limit=CHUNK), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise _Refused(502, f"cannot connect to {host}:{port} ({addr}): {exc or type(exc).__name__}") from None
        event.allowed = True
        try:
            if forward is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(forward)
                event.bytes_up += len(forward)
                self.bytes_total += len(forward)
            await self._relay(reader, writer, up_reader, up_writer, event)
        finally:
            up_writer.close()

    def _parse_head(self, head: bytes) -> tuple[str, str, int, bytes | None]:
        """(method, host, port, the head to forward upstream, or None for CONNECT)."""
        try:
            text = head.decode("latin-1")
            request_line, _, rest = text.partition("\r\n")
            method, target, version = request_line.split(" ")
        except ValueError:
            raise _Refused(400, "malformed request line") from None
        if not version.startswith("HTTP/1."):
            raise _Refused(400, f"unsupported protocol {version[:20]!r}")
        if method == "CONNECT":
            try:
                host, port = split_host_port(target, default_port=443)
            except ValueError as exc:
                raise _Refused(400, f"CONNECT target {target[:100]!r}: {exc}") from None
            assert port is not None
            return method, normalize_host(host), port, None
        url = urlsplit(target)
        if url.scheme.lower() != "http" or not url.hostname:
            raise _Refused(400, f"{method} needs an absolute http:// URI through the proxy (got {target[:100]!r}); "
                                "use CONNECT for https")
        try:
            port = url.port or 80
        except ValueError:
            raise _Refused(400, f"bad port in {target[:100]!r}") from None
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        # Hop-by-hop proxy headers stay here; one request per connection keeps every request checked.
        lines = [f"{method} {path} {version}"]
        for line in rest.split("\r\n"):
            name = line.partition(":")[0].strip().lower()
            if line and name not in ("proxy-authorization", "proxy-connection", "connection", "keep-alive"):
                lines.append(line)
        lines.append("Connection: close")
        return method, normalize_host(url.hostname), port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _address(self, host: str, port: int) -> IPAddress:
        """The address to connect to: an IP literal as is, a name resolved once and checked."""
        literal = parse_ip(host)
        candidates: list[IPAddress]
        if literal is not None:
            candidates = [literal]
        else:
            try:
                found = await asyncio.wait_for(self._resolve(host, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, UnicodeError) as exc:
                raise _Refused(502, f"cannot resolve {host!r}: {exc or type(exc).__name__}") from None
            candidates = [a for a in (parse_ip(t) for t in found) if a is not None]
            if not candidates:
                raise _Refused(502, f"cannot resolve {host!r}: no address")
        refusal = ""
        for addr in candidates:
            why = self.policy.address_refusal(addr, port)
            if why is None:
                return addr
            refusal = refusal or why
        raise _Refused(403, f"'{host}:{port}' {refusal} in extension {self.extension!r} permissions.network")

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter, event: EgressEvent) -> None:
        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            while True:
                data = await src.read(CHUNK)
                if not data:
                    break
                self.bytes_total += len(data)
                if up:
                    event.bytes_up += len(data)
                else:
                    event.bytes_down += len(data)
                if self.bytes_total > self.max_bytes:
                    event.reason = "cut: limits.egressMb reached"
                    # Abort both sides: the other pump's read ends at once.
                    writer.transport.abort()
                    up_writer.transport.abort()
                    return
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                with contextlib.suppress(OSError, RuntimeError):
                    dst.write_eof()  # half-close: the other direction may still be talking

        async def guarded(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            try:
                await pump(src, dst, up)
            except OSError:
                writer.transport.abort()  # a reset on one side ends the whole connection
                up_writer.transport.abort()
                raise

        tasks = [asyncio.ensure_future(guarded(reader, up_writer, True)),
                 asyncio.ensure_future(guarded(up_reader, writer, False))]
        try:
            done = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for t in tasks:
                t.cancel()
        for result in done:
            if isinstance(result, OSError) and not event.reason:
                event.reason = f"connection ended: {type(result).__name__}"
