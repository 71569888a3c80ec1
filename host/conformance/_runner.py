"""Run one extension through every clause: start it (three times: the main run, the lifeline, the magic cookie),
drive it over real gRPC, and return the report. Nothing here raises for a misbehaving extension: every problem
becomes a FAIL row naming the clause."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import grpc

from ..extensions._manifest import Manifest, load_manifest
from ._bridge_session import start_bridge
from ._checks_auth import check_health, check_tokens, shutdown_denied
from ._checks_describe import check_describe
from ._checks_hooks import FrameIds, check_connect, check_multi_batch, check_prelude, check_unary
from ._checks_start import check_cookie, check_handshake, check_lifeline, check_shutdown, check_stdout
from ._checks_tools import check_execute_tool, check_stream_tools, tool_inputs
from ._kit import Kit
from ._process import KitStartError, SandboxMode, WatchedProcess
from ._report import ConformanceReport, Results
from ._wire import ConnectSession

SHUTDOWN_GRACE_MS = 1000
_MAX_RECEIVE = 16 * 1024 * 1024  # as the host (host/extensions/_extension_client.py)


async def run_conformance(
    manifest: str | Path | Manifest,
    *,
    sandbox: SandboxMode = "auto",
    endpoint: str | None = None,
    tool_inputs: dict[str, Any] | None = None,
) -> ConformanceReport:
    """Check the extension of `manifest` against docs/protocol.md; one row per clause.

    `endpoint`: test an extension already serving there (instead of the manifest's command; its token comes from
    the manifest's `token` or HOOKWIRE_TOKEN); the process clauses (1.x) are then skipped.
    `tool_inputs`: tool name -> input (default: a small instance of each tool's input schema).
    Raises ManifestError for an invalid manifest.
    """
    m = manifest if isinstance(manifest, Manifest) else load_manifest(manifest)
    results = Results()
    source = m.source or "<inline manifest>"
    report = ConformanceReport(extension=m.name, manifest=source)
    inputs = dict(tool_inputs or {})
    if endpoint is not None or m.endpoint is not None:
        target = endpoint or m.endpoint or ""
        report.target = target
        for cid in ("1.1", "1.2", "1.3", "1.4", "1.5", "1.6"):
            results.skipped(cid, "an endpoint: the host does not start this process")
        await _against(m, results, target, m.token or os.environ.get("HOOKWIRE_TOKEN", ""), inputs,
                       remote=True)
        report.results = results.rows()
        return report
    workdir = Path(tempfile.mkdtemp(prefix="hwkit-", dir="/tmp" if len(tempfile.gettempdir()) > 40 else None))
    os.chmod(workdir, 0o700)
    procs: list[WatchedProcess] = []
    bridge = await start_bridge(workdir) if m.permissions.grants_bridge() else None
    try:
        try:
            main = await WatchedProcess.start(m, workdir, sandbox=sandbox, label="main", bridge=bridge)
            procs.append(main)
            life = await WatchedProcess.start(m, workdir, sandbox=sandbox, label="lifeline", bridge=bridge)
            procs.append(life)
            nocookie = await WatchedProcess.start(m, workdir, sandbox=sandbox, cookie=False, label="cookie",
                                                  bridge=bridge)
            procs.append(nocookie)
        except KitStartError as exc:
            results.failed("1.1", str(exc))
            results.skip_rest("the extension could not be started (see 1.1)")
            report.results = results.rows()
            return report
        side = asyncio.ensure_future(asyncio.gather(check_lifeline(life, m, results),
                                                    check_cookie(nocookie, m, results)))
        try:
            target = await check_handshake(main, m, results)
            if target is None:
                for cid in ("1.3", "1.5", "2.1", "2.2", "2.3", "3.1", "3.2", "3.3", "4.1", "4.2", "4.3", "4.4",
                            "4.5", "4.6", "5.1", "5.2", "5.3", "5.4", "5.5"):
                    results.skipped(cid, "no valid handshake (see 1.1)")
            else:
                report.target = target
                await _against(m, results, target, main.token, inputs, remote=False, proc=main)
        finally:
            await side
    finally:
        for proc in procs:
            await proc.kill()
        if bridge is not None:
            await bridge.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report.results = results.rows()
    return report


async def _against(m: Manifest, results: Results, target: str, token: str, inputs: dict[str, Any], *,
                   remote: bool, proc: WatchedProcess | None = None) -> None:
    options = [("grpc.max_receive_message_length", _MAX_RECEIVE), ("grpc.enable_retries", 0)]
    if remote and m.tls is not None:
        from ..extensions._state import tls_credentials

        channel = grpc.aio.secure_channel(target, tls_credentials(m), options=options)
    else:
        channel = grpc.aio.insecure_channel(target, options=options)
    kit = Kit(manifest=m, results=results, channel=channel, token=token, tool_inputs=inputs)
    try:
        await check_tokens(kit)
        await check_health(kit)
        if not await check_describe(kit):
            results.skip_rest("Describe failed (see 3.1)")
        else:
            await check_unary(kit)
            per_tool = tool_inputs(kit)
            await check_execute_tool(kit, per_tool)
            await _stream_checks(kit, per_tool)
        if proc is not None:
            check_stdout(proc, results)
            refused, _ = await shutdown_denied(kit, SHUTDOWN_GRACE_MS)
            await check_shutdown(kit, proc, SHUTDOWN_GRACE_MS, accepted_already=not refused)
    finally:
        with contextlib.suppress(Exception):
            await channel.close(grace=None)


async def _stream_checks(kit: Kit, inputs: dict[str, str]) -> None:
    if "connect" not in kit.features:
        for cid in ("4.3", "4.4", "4.5", "4.6", "5.3", "5.4", "5.5"):
            kit.results.skipped(cid, "no 'connect' feature: the host uses the unary RPCs")
        return
    session = ConnectSession.open(kit.channel, kit.metadata)
    ids = FrameIds()
    try:
        await check_connect(kit, session, ids)
        first_tool = next(iter(inputs.items()), None)
        await check_prelude(kit, session, ids, first_tool)
        await check_multi_batch(kit, session, ids)
        await check_stream_tools(kit, session, ids, inputs)
    finally:
        await session.close()
