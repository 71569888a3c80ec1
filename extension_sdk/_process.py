"""The process side of the contract: environment, bind, handshake line, lifeline, signals, shutdown.

Local mode (the host started the process): bind the Unix socket the host names. Remote mode (`--listen HOST:PORT` or
HOOKWIRE_LISTEN, extension_sdk._listen): serve on TCP, with TLS / mutual TLS when given the material, as a service
that hosts reach through a manifest's `endpoint`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ._bridge_client import HostConnection
from ._extension import Extension
from ._extension_server import ExtensionServicer, TokenInterceptor
from ._listen import ListenConfig, ListenConfigError, add_listen_args, is_loopback, listen_config, listen_token
from .proto import HANDSHAKE_MAGIC, MAGIC_COOKIE, PROTOCOL_VERSION, extension_pb2_grpc

DEFAULT_GRACE_S = 1.0
MIN_GRACE_S = 0.05
_MAX_MESSAGE = 64 * 1024 * 1024

log = logging.getLogger("extension_sdk")


def _setup_logging(name: str) -> None:
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"%(asctime)s [{name}] %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(os.environ.get("HOOKWIRE_LOG_LEVEL", "INFO").upper())


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--socket", default=None)
    add_listen_args(parser)
    args, _unknown = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    return args


def serve(ext: Extension, argv: list[str] | None = None) -> None:
    """Read the host's environment, serve until told to stop, then exit the process (0 on a clean stop)."""
    args = _parse_args(argv)
    environ = dict(os.environ)
    if environ.get("HOOKWIRE_MAGIC_COOKIE") == MAGIC_COOKIE and environ.get("HOOKWIRE_SOCKET"):
        environ.pop("HOOKWIRE_LISTEN", None)  # a host started this process: its socket wins over a stray variable
    try:
        listen = listen_config(args, environ)
    except ListenConfigError as exc:
        sys.stderr.write(f"{ext.name}: {exc}\n")
        raise SystemExit(1) from None
    if listen is not None:
        _serve_remote(ext, args, listen)
        return
    cookie = os.environ.get("HOOKWIRE_MAGIC_COOKIE")
    if cookie != MAGIC_COOKIE and args.socket is None:
        sys.stderr.write(
            f"{ext.name}: this is a hookwire extension; load its manifest from a hookwire host "
            f"(e.g. `hookwire run 'hi' -e manifest.yaml`), or run it by hand with --socket PATH.\n"
        )
        sys.stderr.flush()
        raise SystemExit(1)
    socket_path = args.socket or os.environ.get("HOOKWIRE_SOCKET", "")
    token = os.environ.get("HOOKWIRE_TOKEN") or None
    if not socket_path:
        sys.stderr.write(f"{ext.name}: HOOKWIRE_SOCKET is not set; the host must name the socket to bind\n")
        raise SystemExit(1)
    if cookie == MAGIC_COOKIE and token is None and args.socket is None:
        sys.stderr.write(f"{ext.name}: HOOKWIRE_TOKEN is not set; refusing to serve without a token\n")
        raise SystemExit(1)
    _setup_logging(ext.name)
    if token is None:
        log.warning("no HOOKWIRE_TOKEN: serving WITHOUT the token check (development mode)")
    host_address = os.environ.get("HOOKWIRE_HOST_ADDRESS") or None
    _run_and_exit(ext, lambda: serve_async(ext, socket_path=socket_path, token=token, host_address=host_address))


def _serve_remote(ext: Extension, args: argparse.Namespace, listen: ListenConfig) -> None:
    """Remote mode: serve on TCP until SIGTERM/SIGINT (no lifeline: no host owns this process)."""
    try:
        token = listen_token(args)
    except ListenConfigError as exc:
        sys.stderr.write(f"{ext.name}: {exc}\n")
        raise SystemExit(1) from None
    if token is None:
        sys.stderr.write(f"{ext.name}: serving on {listen.address} needs a token (HOOKWIRE_TOKEN or --token-file); "
                         "every host call must carry it\n")
        raise SystemExit(1)
    _setup_logging(ext.name)
    if not listen.tls and not is_loopback(listen.address):
        log.warning("serving on %s WITHOUT TLS: the token and every snapshot cross the network in clear text "
                    "(give --tls-cert/--tls-key, and --tls-client-ca for mutual TLS)", listen.address)
    host_address = os.environ.get("HOOKWIRE_HOST_ADDRESS") or None
    _run_and_exit(ext, lambda: serve_async(ext, socket_path=None, token=token, host_address=host_address,
                                           lifeline=False, listen=listen))


def _run_and_exit(ext: Extension, main: Callable[[], Any]) -> None:
    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    except OSError as exc:
        log.error("extension %s failed to serve: %s", ext.name, exc)
        code = 1
    except Exception as exc:
        log.error("extension %s failed to serve: %s", ext.name, exc, exc_info=exc)
        code = 1
    try:
        logging.shutdown()
        sys.stderr.flush()  # raises BrokenPipeError when the host is gone
    except Exception:  # noqa: BLE001 - nothing left to report to
        pass
    finally:
        # Exit now: a sync tool stuck in a worker thread must not keep the process alive past its grace.
        os._exit(code)


def _remove_stale_socket(path: str) -> None:
    """Remove a socket left at `path`. Best effort: a sandbox may forbid deleting in the runtime directory (the
    host removes that directory itself)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except (FileNotFoundError, PermissionError):
        pass


def _watch_lifeline(on_eof: Callable[[], None]) -> None:
    """Read stdin until EOF in a daemon thread; the host holds the other end."""

    def run() -> None:
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            return
        on_eof()

    threading.Thread(target=run, name="hookwire-lifeline", daemon=True).start()


async def serve_async(
    ext: Extension,
    *,
    socket_path: str | None,
    token: str | None,
    host_address: str | None = None,
    lifeline: bool | None = None,
    listen: ListenConfig | None = None,
) -> int:
    """Serve `ext` on a Unix socket (or on TCP with `listen`) until Shutdown, stdin EOF or SIGTERM/SIGINT; returns
    the exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    grace: list[float] = [DEFAULT_GRACE_S]
    reason: list[str] = ["stopped"]

    def request_stop(why: str, grace_s: float = DEFAULT_GRACE_S) -> None:
        if not stop.is_set():
            reason[0] = why
            grace[0] = grace_s
            stop.set()

    if listen is None:
        if not socket_path:
            raise OSError("no Unix socket path and no listen address: nowhere to serve")
        socket_path = os.path.abspath(socket_path)
        target = f"unix:{socket_path}"
    else:
        socket_path = None
        target = listen.address
    conn = HostConnection(host_address, token or "") if host_address else None
    executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"{ext.name}-tool")
    servicer = ExtensionServicer(
        ext, conn, on_shutdown=lambda g: request_stop("Shutdown RPC", g), executor=executor
    )
    server = grpc.aio.server(
        interceptors=[TokenInterceptor(token)],
        options=[
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
        ],
    )
    extension_pb2_grpc.add_ExtensionServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set("hookwire.v1.Extension", health_pb2.HealthCheckResponse.SERVING)

    if socket_path is not None:
        _remove_stale_socket(socket_path)
        try:
            server.add_insecure_port(target)
        except RuntimeError as exc:
            hint = " (a Unix socket path may be at most 107 bytes)" if len(socket_path) > 107 else ""
            raise OSError(f"cannot bind {target}{hint}") from exc
    else:
        assert listen is not None
        target = _bind_tcp(server, listen)
    await server.start()

    # Signal handlers before the handshake: the host may send SIGTERM the moment it has read the line.
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        try:
            loop.add_signal_handler(sig, request_stop, name)
        except (NotImplementedError, RuntimeError):
            pass

    # The handshake goes to the real stdout; afterwards stray print()s go to stderr, not the host's pipe.
    out = sys.stdout
    out.write(f"{HANDSHAKE_MAGIC}|{PROTOCOL_VERSION}|{target}\n")
    out.flush()
    sys.stdout = sys.stderr
    log.info("serving %s %s on %s%s (hooks: %s; tools: %s)", ext.name, ext.version, target,
             f", {listen.describe()}" if listen is not None else "",
             ", ".join(ext.hooks) or "none", ", ".join(ext.tools) or "none")

    if lifeline is None:
        lifeline = not os.isatty(0) if _fd_ok(0) else False
    if lifeline:
        _watch_lifeline(lambda: loop.call_soon_threadsafe(request_stop, "stdin closed (lifeline)"))

    try:
        await stop.wait()
        log.info("stopping: %s", reason[0])
        await health_servicer.enter_graceful_shutdown()
        await server.stop(max(grace[0], MIN_GRACE_S))
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
        executor.shutdown(wait=False, cancel_futures=True)
        if conn is not None:
            await conn.close()
        if socket_path is not None:
            _remove_stale_socket(socket_path)
        sys.stdout = out
    return 0


def _bind_tcp(server: grpc.aio.Server, listen: ListenConfig) -> str:
    """Bind the listen address (TLS when configured); the bound HOST:PORT (port 0 becomes the port taken)."""
    credentials = listen.server_credentials()
    try:
        if credentials is None:
            port = server.add_insecure_port(listen.address)
        else:
            port = server.add_secure_port(listen.address, credentials)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {listen.address}: {exc}") from exc
    if not port:
        raise OSError(f"cannot listen on {listen.address} (address in use, or not an address of this machine)")
    return f"{listen.address.rpartition(':')[0]}:{port}"


def _fd_ok(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
