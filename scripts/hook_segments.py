"""Where an awaited hook's wall time goes, segment by segment, beside its stream floor.

Both processes stamp CLOCK_MONOTONIC (one clock for the whole machine) at fixed points of each call, matched by frame
id; per call:

    pre    call start -> the frame handed to gRPC                      (calling process)
    out    handed to gRPC -> the answering side's handler starts         (both gRPCs, the answering side's frame loop)
    ext    handler starts -> its reply handed to gRPC                    (answering process)
    back   reply handed to gRPC -> the caller's Python has the reply     (both gRPCs, the caller's read)
    post   the caller has the reply -> the call returns                  (calling process)

for four subjects, alternated in rounds (medians over rounds of per-round medians, µs):

    floor  bench/hook_floor.py's bare ping-pong against bench/extensions/stream_echo_server.py
    raw    the same bare client on the extension's own Connect stream (the SDK answering: bench/extensions/bench_ext.py)
    conn   the host's `ExtensionConnection.call` with a prebuilt frame (no manager, dispatch or conversion)
    hook   an awaited beforeToolCall through `ExtensionManager`

raw - floor is the SDK's part, conn - raw the host's connection layer, hook - conn the manager, dispatch and
conversion. `pre` and `post` are on the critical path whole (nothing else runs meanwhile); `out` and `back` also hold
the gRPC transit, whose spread between rounds (±10 µs) is larger than most differences in it. The stamps cost
~0.3 µs each; the wrappers that take them ~1 µs per call.

    .venv/bin/python scripts/hook_segments.py [CALLS_PER_ROUND] [ROUNDS]      (run from the checkout's root)

What it showed (2026-12-04, 2 cores, quiet; before -> after the reader let the caller run first, ea2b95b):
              pre    out    ext   back   post  total
    floor     0.2    124    4.2    121    0.5    252
    raw       0.2    138   15.2    130    0.5    286
    conn      7.3    138   15.5    125   18.8    311     (post 27.8 before)
    hook     26.8    142   15.6    131   30.8    354     (post 41.6 before)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path.cwd()))  # the checkout to measure: run from its root

NS = time.monotonic_ns
STAMPS: dict[str, list[tuple[int, int]]] = {"e1": [], "e2": []}  # the answering process's: (frame id, ns)
SUBJECTS = ("floor", "raw", "conn", "hook")
SEGMENTS = ("pre", "out", "ext", "back", "post", "total")


def _stamp(key: str, fid: int) -> None:
    STAMPS[key].append((fid, NS()))


def _dump_on_usr1(path: str) -> None:
    """On SIGUSR1, write the stamps so far to `path` and start afresh (the driver reads them after each block)."""

    def dump(*_: Any) -> None:
        Path(path + ".tmp").write_text(json.dumps(STAMPS))
        os.replace(path + ".tmp", path)
        for v in STAMPS.values():
            v.clear()

    signal.signal(signal.SIGUSR1, dump)


def _read_peer(pid: int, path: str) -> dict[str, list[list[int]]]:
    p = Path(path)
    old = p.stat().st_mtime_ns if p.exists() else 0
    os.kill(pid, signal.SIGUSR1)
    for _ in range(500):
        time.sleep(0.01)
        if p.exists() and p.stat().st_mtime_ns != old:
            return json.loads(p.read_text())
    raise RuntimeError(f"no stamps from process {pid}")


def _stamp_the_sdk() -> None:
    """In the extension: e1 when an awaited hook's handler path starts, e2 when its reply is handed to the stream."""
    from extension_sdk import _extension_server as server
    from extension_sdk import _reply_out as reply_out

    servicer = server.ExtensionServicer
    answer_hook = servicer._answer_hook

    async def stamped_answer_hook(self: Any, fid: int, body: str, frame: Any, out: Any) -> None:
        _stamp("e1", fid)
        return await answer_hook(self, fid, body, frame, out)

    servicer._answer_hook = stamped_answer_hook  # type: ignore[method-assign]
    put_nowait = reply_out.ReplyOut.put_nowait

    def stamped_put_nowait(self: Any, frame: Any) -> None:
        if frame is not None:
            _stamp("e2", frame.id)
        put_nowait(self, frame)

    reply_out.ReplyOut.put_nowait = stamped_put_nowait  # type: ignore[method-assign]


def _serve_floor(sock: str) -> None:
    """The floor's server, stamped the same way (e1 as the frame is read, e2 as its answer is yielded)."""
    sys.path.insert(0, str(Path.cwd() / "bench" / "extensions"))
    import stream_echo_server

    from extension_sdk.proto import extension_pb2 as pb

    async def stamped_stream(requests: Any, context: Any) -> Any:
        async for frame in requests:
            _stamp("e1", frame.id)
            reply = pb.ExtensionFrame(id=frame.id, before_tool_call=pb.BeforeToolCallResponse())
            _stamp("e2", frame.id)
            yield reply

    stream_echo_server._stream = stamped_stream
    asyncio.run(stream_echo_server.serve(sock))


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def _segments(host: dict[str, dict[int, int]], peer: dict[str, list[list[int]]]) -> dict[str, float]:
    """Per-segment medians (µs) of one block, from the caller's stamps t0..t3 and the answering side's e1, e2."""
    e1, e2 = dict(map(tuple, peer["e1"])), dict(map(tuple, peer["e2"]))
    out: dict[str, list[int]] = {k: [] for k in SEGMENTS}
    for fid, t0 in host["t0"].items():
        try:
            t1, t2, t3, a, b = host["t1"][fid], host["t2"][fid], host["t3"][fid], e1[fid], e2[fid]
        except KeyError:
            continue
        for key, value in zip(SEGMENTS, (t1 - t0, a - t1, b - a, t2 - b, t3 - t2, t3 - t0)):
            out[key].append(value)
    return {k: _median(v) / 1000 for k, v in out.items()}


def _new_stamps() -> dict[str, dict[int, int]]:
    return {"t0": {}, "t1": {}, "t2": {}, "t3": {}}


async def drive(n: int, rounds: int, work: Path) -> dict[str, list[dict[str, float]]]:
    import grpc

    from extension_sdk.proto import extension_pb2 as pb
    from host import ExtensionManager, ToolCallSnapshot
    from host.extensions import _extension_client as client
    from host.extensions._manifest import parse_manifest

    me = str(Path(__file__).resolve())
    conn_stamps = _new_stamps()
    current = [0]  # the id of the frame the host is waiting for (the reply's is read after _on_frame)
    write_now, on_frame = client.ExtensionConnection._write_now, client.ExtensionConnection._on_frame

    def stamped_write_now(self: Any, frame: Any) -> None:
        conn_stamps["t1"][frame.id] = NS()
        write_now(self, frame)

    def stamped_on_frame(self: Any, raw: bytes) -> None:
        conn_stamps["t2"][current[0]] = NS()
        on_frame(self, raw)

    client.ExtensionConnection._write_now = stamped_write_now  # type: ignore[method-assign]
    client.ExtensionConnection._on_frame = stamped_on_frame  # type: ignore[method-assign]

    floor_file, ext_file = str(work / "floor.json"), str(work / "ext.json")
    server = subprocess.Popen([sys.executable, me, "floor-server", str(work / "floor.sock"), floor_file],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.getcwd())
    assert server.stdout is not None and server.stdin is not None
    ready = server.stdout.readline().decode().strip()
    manifest = parse_manifest({
        "name": "hookseg", "version": "0.1.0",
        "command": ["python", me, "ext", ext_file, "--name", "hookseg", "--hooks", "beforeToolCall"],
        "cwd": os.getcwd(), "timeouts": {"startMs": 30_000}, "hooks": {"beforeToolCall": {"decisions": True}},
    }, source="<hook_segments>")
    snap = ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0)
    frame = pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(
        context=pb.CallContext(session_id="s", request_id="r"),
        snapshot=pb.ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input_json='{"q":"hookwire"}',
                                     step_number=0),
        want_decision=True))
    results: dict[str, list[dict[str, float]]] = {s: [] for s in SUBJECTS}
    try:
        async with grpc.aio.insecure_channel(ready.split("|", 1)[1]) as floor_channel, \
                ExtensionManager(sandbox="off") as mgr:  # the stamp file is written to our /tmp
            await mgr.load(manifest)
            conn = mgr._registry.exts["hookseg"].conn  # noqa: SLF001 - a measurement
            assert conn is not None
            (ext_pid,) = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()
                          and Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[1:3] == [me.encode(), b"ext"]]
            ext_channel = grpc.aio.insecure_channel(conn.target)
            ids = iter(range(1 << 40, 1 << 62))  # the bare clients' frame ids: never the host's

            def bare(channel: Any, method: str, md: Any = None) -> Callable[[], Awaitable[dict[str, float]]]:
                stream = channel.stream_stream(method, request_serializer=pb.HostFrame.SerializeToString,
                                               response_deserializer=pb.ExtensionFrame.FromString)(metadata=md)
                peer = (server.pid, floor_file) if channel is floor_channel else (ext_pid, ext_file)

                async def block() -> dict[str, float]:
                    s = _new_stamps()
                    for _ in range(n):
                        fid = frame.id = next(ids)
                        s["t0"][fid] = s["t1"][fid] = NS()
                        await stream.write(frame)
                        reply = await stream.read()
                        s["t2"][fid] = s["t3"][fid] = NS()
                        if reply.id != fid:
                            raise RuntimeError(f"answer to frame {reply.id}, expected {fid}")
                    return _segments(s, _read_peer(*peer))

                return block

            conn_frame = pb.HostFrame()
            conn_frame.CopyFrom(frame)

            def host_side(call: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[dict[str, float]]]:
                async def block() -> dict[str, float]:
                    for v in conn_stamps.values():
                        v.clear()
                    for _ in range(n):
                        fid = current[0] = conn._next_id + 1  # noqa: SLF001
                        conn_stamps["t0"][fid] = NS()
                        await call()
                        conn_stamps["t3"][fid] = NS()
                    return _segments(conn_stamps, _read_peer(ext_pid, ext_file))

                return block

            blocks = {
                "floor": bare(floor_channel, "/bench.Floor/Stream"),
                "raw": bare(ext_channel, "/hookwire.v1.Extension/Connect", conn._md),  # noqa: SLF001
                "conn": host_side(lambda: conn.call(conn_frame, 5.0)),
                "hook": host_side(lambda: mgr.before_tool_call(snap)),
            }
            for block in blocks.values():  # warm-up
                await block()
            for _ in range(rounds):
                for subject, block in blocks.items():
                    results[subject].append(await block())
            await ext_channel.close()
    finally:
        server.stdin.close()
        server.wait()
    return results


def main() -> None:
    if sys.argv[1:2] == ["ext"]:  # the answering extension: bench_ext.py, stamped
        _dump_on_usr1(sys.argv[2])
        _stamp_the_sdk()
        sys.argv = [sys.argv[0], *sys.argv[3:]]
        sys.path.insert(0, str(Path.cwd() / "bench" / "extensions"))
        import bench_ext
        bench_ext.main()
        return
    if sys.argv[1:2] == ["floor-server"]:
        _dump_on_usr1(sys.argv[3])
        _serve_floor(sys.argv[2])
        return
    args = [int(a) for a in sys.argv[1:3]]
    n, rounds = (args + [1000, 8][len(args):])[:2]
    with tempfile.TemporaryDirectory(prefix="segments-", dir="/tmp") as tmp:
        results = asyncio.run(drive(n, rounds, Path(tmp)))
    print(f"medians over {rounds} rounds of {n} calls, µs (load {open('/proc/loadavg').read().split()[0]})")
    print(f"{'':7}" + "".join(f"{k:>8}" for k in SEGMENTS))
    for subject in SUBJECTS:
        print(f"{subject:7}" + "".join(f"{_median([r[k] for r in results[subject]]):8.1f}" for k in SEGMENTS))


if __name__ == "__main__":
    main()
