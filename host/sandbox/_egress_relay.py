"""hookwire egress relay: inside a sandbox's network namespace, relay 127.0.0.1:PORT to the host's egress socket.

STANDALONE, stdlib only: loaded by path from host/sandbox/_launcher.py (which the zygote also loads by path); it must
not import the `host` package. The sandbox's pid-1 init (host/sandbox/_launcher.py) runs it: `open_listeners` binds
127.0.0.1:PORT (and [::1]:PORT when the namespace has IPv6 on loopback) BEFORE the extension is forked, so the
port is listening when the extension runs; then `Relay.serve` moves bytes between each accepted TCP connection
and a fresh connection to the Unix socket (the host-side egress proxy, bind-mounted at the same path).

Invariants:
  - byte-for-byte, both directions, half-close propagated (shutdown(SHUT_WR) when one side ends);
  - bounded: at most MAX_CONNECTIONS pairs (further connections are closed at once), at most BUFFER bytes
    buffered per direction (reading pauses while the other side has not drained: back-pressure, no growth);
  - no busy loop: one selector; `serve` blocks in select() and returns only when `on_wake` says so;
  - a failure on one pair (unix socket gone, reset) closes that pair only.
"""

from __future__ import annotations

import errno
import fcntl
import os
import selectors
import socket
import struct
from collections.abc import Callable

MAX_CONNECTIONS = 256
BUFFER = 256 * 1024
_CHUNK = 65536

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def loopback_up() -> None:
    """Bring the network namespace's loopback interface up (needs CAP_NET_ADMIN in the namespace's owner)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def open_listeners(port: int) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1:port and, when possible, [::1]:port (non-blocking, close-on-exec)."""
    listeners: list[socket.socket] = []
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    v4.bind(("127.0.0.1", port))
    v4.listen(128)
    v4.setblocking(False)
    listeners.append(v4)
    try:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            v6.bind(("::1", port))
            v6.listen(128)
            v6.setblocking(False)
            listeners.append(v6)
        except OSError:
            v6.close()
    except OSError:
        pass  # no IPv6 in this namespace: 127.0.0.1 is enough
    return listeners


class _Side:
    """One socket of a pair: bytes read from it wait in `peer.pending` until written to the peer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.peer: _Side | None = None
        self.pending = bytearray()  # bytes to write to THIS socket
        self.eof = False  # this socket will send no more (its peer gets SHUT_WR once pending is drained)
        self.shut = False  # SHUT_WR already sent on this socket
        self.connecting = False


class Relay:
    """Accept on the listeners, connect each client to `unix_path`, move bytes; one selector, no threads."""

    def __init__(self, listeners: list[socket.socket], unix_path: str) -> None:
        self.listeners = listeners
        self.unix_path = unix_path
        self.sel = selectors.DefaultSelector()
        self.pairs = 0
        for lst in listeners:
            self.sel.register(lst, selectors.EVENT_READ, ("listen", lst))

    def serve(self, wake_fd: int | None = None, on_wake: Callable[[], bool] | None = None) -> None:
        """Relay until `on_wake()` (called when wake_fd is readable) returns True."""
        if wake_fd is not None:
            self.sel.register(wake_fd, selectors.EVENT_READ, ("wake", None))
        while True:
            for key, mask in self.sel.select():
                kind, obj = key.data
                if kind == "wake":
                    if on_wake is not None and on_wake():
                        return
                elif kind == "listen":
                    self._accept(obj)
                else:
                    self._event(obj, mask)

    def _accept(self, lst: socket.socket) -> None:
        while True:
            try:
                client, _ = lst.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if self.pairs >= MAX_CONNECTIONS:
                client.close()
                continue
            client.setblocking(False)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.setblocking(False)
            a, b = _Side(client), _Side(upstream)
            a.peer, b.peer = b, a
            try:
                upstream.connect(self.unix_path)
            except (BlockingIOError, InterruptedError):
                b.connecting = True
            except OSError:
                client.close()
                upstream.close()
                continue
            self.pairs += 1
            self._update(a)
            self._update(b)

    def _interest(self, side: _Side) -> int:
        peer = side.peer
        assert peer is not None
        mask = 0
        if side.connecting:
            return selectors.EVENT_WRITE
        if not side.eof and len(peer.pending) < BUFFER and not (peer.connecting):
            mask |= selectors.EVENT_READ
        if side.pending:
            mask |= selectors.EVENT_WRITE
        return mask

    def _update(self, side: _Side) -> None:
        if side.sock.fileno() < 0:
            return
        mask = self._interest(side)
        try:
            key = self.sel.get_key(side.sock)
        except KeyError:
            key = None
        if mask and key is None:
            self.sel.register(side.sock, mask, ("side", side))
        elif mask and key is not None and key.events != mask:
            self.sel.modify(side.sock, mask, ("side", side))
        elif not mask and key is not None:
            self.sel.unregister(side.sock)

    def _close_pair(self, side: _Side) -> None:
        for s in (side, side.peer):
            if s is None or s.sock.fileno() < 0:
                continue
            try:
                self.sel.unregister(s.sock)
            except (KeyError, ValueError):
                pass
            s.sock.close()
        self.pairs -= 1

    def _event(self, side: _Side, mask: int) -> None:
        peer = side.peer
        assert peer is not None
        try:
            if side.connecting:
                err = side.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                side.connecting = False
            if mask & selectors.EVENT_READ and not side.eof:
                try:
                    data = side.sock.recv(min(_CHUNK, BUFFER - len(peer.pending)) or 1)
                except (BlockingIOError, InterruptedError):
                    data = None
                if data == b"":
                    side.eof = True
                elif data:
                    peer.pending += data
            if mask & selectors.EVENT_WRITE and side.pending:
                try:
                    sent = side.sock.send(side.pending)
                    del side.pending[:sent]
                except (BlockingIOError, InterruptedError):
                    pass
            # Propagate a half-close once everything read before it was written.
            for src, dst in ((side, peer), (peer, side)):
                if src.eof and not dst.pending and not dst.shut and not dst.connecting:
                    dst.shut = True
                    try:
                        dst.sock.shutdown(socket.SHUT_WR)
                    except OSError as exc:
                        if exc.errno != errno.ENOTCONN:
                            raise
        except OSError:
            self._close_pair(side)
            return
        if side.shut and peer.shut:
            self._close_pair(side)
            return
        self._update(side)
        self._update(peer)
