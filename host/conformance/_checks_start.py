"""Clauses 1.1-1.6: the process contract — handshake, start time, stdout, lifeline, Shutdown, magic cookie."""

from __future__ import annotations

import time

import grpc

from extension_sdk.proto import HANDSHAKE_MAGIC, PROTOCOL_VERSION
from extension_sdk.proto import extension_pb2 as pb

from ..extensions._manifest import Manifest
from ._kit import Kit
from ._process import WatchedProcess
from ._report import Results

SHUTDOWN_SLACK_MS = 500  # scheduling slack allowed beyond grace_ms on a loaded machine
EXPECTED = f"'{HANDSHAKE_MAGIC}|{PROTOCOL_VERSION}|unix:<HOOKWIRE_SOCKET>'"


async def check_handshake(proc: WatchedProcess, manifest: Manifest, results: Results) -> str | None:
    """1.1 and 1.2; the gRPC target when the handshake is good, else None."""
    start_ms = manifest.timeouts.start_ms
    decided = await proc.wait_handshake(start_ms / 1000)
    if not decided or proc.handshake is None:
        if not decided:
            results.failed("1.2", f"no handshake within {start_ms} ms (timeouts.startMs)")
            results.failed("1.1", f"no handshake line within {start_ms} ms{proc.tail()}")
            return None
        code = await proc.wait_exit(2.0)
        if proc.stdout_before:
            what = f"printed {proc.stdout_before[:120]!r} on stdout instead of the handshake {EXPECTED}"
        else:
            what = f"exited with code {code} before the handshake" if code is not None else "closed stdout"
        results.failed("1.1", what + proc.tail())
        results.skipped("1.2", "no handshake")
        return None
    line, ms = proc.handshake, proc.handshake_ms or 0.0
    parts = line.split("|")
    target = f"unix:{proc.socket_path}"
    if len(parts) != 3 or parts[0] != HANDSHAKE_MAGIC:
        results.failed("1.1", f"printed {line[:120]!r} instead of the handshake {EXPECTED} (logs belong on stderr)")
        results.skipped("1.2", "no handshake (see 1.1)")
        return None
    if ms <= start_ms:
        results.passed("1.2", f"handshake after {ms:.0f} ms (startMs {start_ms})")
    else:
        results.failed("1.2", f"handshake after {ms:.0f} ms, over startMs {start_ms}")
    if parts[1] != PROTOCOL_VERSION:  # the host refuses to talk to it: so does the kit
        results.failed("1.1", f"protocol version {parts[1]!r}; this host speaks {PROTOCOL_VERSION!r}")
        return None
    said = parts[2].strip()
    if said != target:  # the host would still connect there: the kit goes on
        results.failed("1.1", f"address {said!r}, not the socket HOOKWIRE_SOCKET named ({target})")
    else:
        results.passed("1.1", line)
    return said if said.startswith("unix:") else None


def check_stdout(proc: WatchedProcess, results: Results) -> None:
    """1.3: judged after everything else ran (so output caused by any call counts)."""
    if proc.stdout_after_total:
        results.failed("1.3", f"{proc.stdout_after_total} byte(s) on stdout after the handshake, starting "
                              f"{bytes(proc.stdout_after[:120])!r} (log to stderr)")
    else:
        results.passed("1.3", "nothing")


async def check_shutdown(kit: Kit, proc: WatchedProcess, grace_ms: int, accepted_already: bool) -> None:
    """1.5: Shutdown is answered, then the process exits within grace_ms (+ SHUTDOWN_SLACK_MS)."""
    t0 = time.monotonic()
    if not accepted_already:
        try:
            await kit.stub.Shutdown(pb.ShutdownRequest(grace_ms=grace_ms), metadata=kit.metadata, timeout=5.0)
        except grpc.aio.AioRpcError as exc:
            kit.results.failed("1.5", f"Shutdown answered {exc.code().name}: {exc.details()}")
            return
    code = await proc.wait_exit((grace_ms + SHUTDOWN_SLACK_MS) / 1000)
    ms = ((proc.exited_at or time.monotonic()) - t0) * 1000
    if code is None:
        kit.results.failed("1.5", f"still running {ms:.0f} ms after Shutdown(grace_ms={grace_ms})")
    else:
        kit.results.passed("1.5", f"answered; exited with code {code} after {ms:.0f} ms (grace_ms {grace_ms})"
                           + (" (the unauthenticated Shutdown, see 2.1/2.2)" if accepted_already else ""))


async def check_lifeline(proc: WatchedProcess, manifest: Manifest, results: Results) -> None:
    """1.4: a second process; after its handshake the kit closes its stdin and waits timeouts.shutdownMs."""
    await proc.wait_handshake(manifest.timeouts.start_ms / 1000)
    if proc.handshake is None or not proc.handshake.startswith(HANDSHAKE_MAGIC + "|"):
        results.skipped("1.4", "the second process (for the lifeline) did not hand-shake")
        return
    if proc.returncode is not None:
        results.skipped("1.4", f"the second process exited (code {proc.returncode}) before its stdin was closed")
        return
    limit_ms = max(manifest.timeouts.shutdown_ms, 500)
    t0 = time.monotonic()
    proc.close_stdin()
    code = await proc.wait_exit(limit_ms / 1000)
    if code is None:
        results.failed("1.4", f"still running {limit_ms} ms after stdin reached EOF (timeouts.shutdownMs)")
    else:
        ms = ((proc.exited_at or time.monotonic()) - t0) * 1000
        results.passed("1.4", f"exited with code {code} {ms:.0f} ms after stdin EOF")


async def check_cookie(proc: WatchedProcess, manifest: Manifest, results: Results) -> None:
    """1.6: started without HOOKWIRE_MAGIC_COOKIE it must not serve: no handshake, a non-zero exit."""
    limit_s = manifest.timeouts.start_ms / 1000
    t0 = time.monotonic()
    await proc.wait_handshake(limit_s)  # a line, EOF (it exited) or the time is up
    code = None
    if proc.handshake is None or not proc.handshake.startswith(HANDSHAKE_MAGIC + "|"):
        code = await proc.wait_exit(max(limit_s - (time.monotonic() - t0), 1.0))
    if proc.handshake is not None and proc.handshake.startswith(HANDSHAKE_MAGIC + "|"):
        results.failed("1.6", "printed the handshake and served without HOOKWIRE_MAGIC_COOKIE")
    elif code is None:
        results.failed("1.6", f"still running {limit_s * 1000:.0f} ms after a start without HOOKWIRE_MAGIC_COOKIE")
    elif code == 0:
        results.failed("1.6", "exited with code 0 (want non-zero: it was not started by a host)")
    else:
        results.passed("1.6", f"exited with code {code}" + (f"; said {proc.stderr_tail[-1]!r}"[:160]
                                                              if proc.stderr_tail else ""))
