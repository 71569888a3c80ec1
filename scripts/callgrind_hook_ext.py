"""Instructions per awaited beforeToolCall in the extension process, under callgrind (repeatable under load).

A host-side driver (this process, not instrumented) opens the Connect stream of an SDK extension
(bench/extensions/bench_ext.py, a no-op async beforeToolCall) run under `valgrind --tool=callgrind --dump-instr=no`
and sends awaited BeforeToolCall frames one at a time (the frame bench/hook_floor.py's host sends), each answer read
before the next frame. `--floor` does the same against the floor's bare server (bench/extensions/stream_echo_server.py).

The count per call is the difference of two runs (`--calls` and `--calls + --extra`) divided by `--extra`: start-up
and shut-down cancel out. Both processes are started with this interpreter (the worktree's venv: its SDK).

    .venv/bin/python scripts/callgrind_hook_ext.py            # the SDK extension
    .venv/bin/python scripts/callgrind_hook_ext.py --floor    # the floor's bare server
    .venv/bin/python scripts/callgrind_hook_ext.py --both     # both, and their ratio
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import grpc.aio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from extension_sdk.proto import BRIDGE_METADATA_KEY, BRIDGE_ON_STREAM  # noqa: E402
from extension_sdk.proto import extension_pb2 as pb  # noqa: E402

EXT_DIR = ROOT / "bench" / "extensions"


def _frame() -> pb.HostFrame:
    return pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(
        context=pb.CallContext(session_id="s", request_id="r"),
        snapshot=pb.ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input_json='{"q":"hookwire"}',
                                     step_number=0),
        want_decision=True,
    ))


async def _drive(target: str, method: str, calls: int, bridge: bool) -> None:
    md = ((BRIDGE_METADATA_KEY, BRIDGE_ON_STREAM),) if bridge else ()
    async with grpc.aio.insecure_channel(target) as channel:
        stream = channel.stream_stream(method, request_serializer=pb.HostFrame.SerializeToString,
                                       response_deserializer=pb.ExtensionFrame.FromString)(metadata=md)
        frame = _frame()
        for i in range(1, calls + 1):
            frame.id = i
            await stream.write(frame)
            reply = await stream.read()
            if reply.id != i or not reply.HasField("before_tool_call"):
                raise RuntimeError(f"unexpected reply to frame {i}: {reply}")
        await stream.done_writing()
        while await stream.read() is not grpc.aio.EOF:  # drain to the end of the stream
            pass


def _instructions(floor: bool, calls: int, bridge: bool, work: Path) -> int:
    sock = work / f"s{calls}.sock"
    out = work / f"callgrind.{calls}.out"
    if floor:
        argv = [str(EXT_DIR / "stream_echo_server.py"), str(sock)]
        method = "/bench.Floor/Stream"
    else:
        argv = [str(EXT_DIR / "bench_ext.py"), "--name", "cg", "--hooks", "beforeToolCall", "--socket", str(sock)]
        method = "/hookwire.v1.Extension/Connect"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKWIRE_")}
    env["HOOKWIRE_LOG_LEVEL"] = "WARNING"
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}", sys.executable, *argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT), env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if "|unix:" not in line:
            raise RuntimeError(f"no ready line from {argv[0]}: {line!r}")
        asyncio.run(_drive("unix:" + line.rsplit("|unix:", 1)[1], method, calls, bridge))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=120)
    text = out.read_text()
    found = re.search(r"^summary:\s*(\d+)", text, re.M) or re.search(r"^totals:\s*(\d+)", text, re.M)
    if found is None:
        raise RuntimeError(f"no summary line in {out}")
    return int(found.group(1))


def per_call(floor: bool, calls: int, extra: int, bridge: bool, keep: Path | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="cg-", dir="/tmp") as tmp:
        work = Path(tmp)
        if keep is not None:
            work = keep / ("floor" if floor else "sdk")
            work.mkdir(parents=True, exist_ok=True)
        low = _instructions(floor, calls, bridge, work)
        high = _instructions(floor, calls + extra, bridge, work)
    return (high - low) / extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", action="store_true", help="the floor's bare server instead of the SDK")
    parser.add_argument("--both", action="store_true", help="the SDK and the floor, and their ratio")
    parser.add_argument("--calls", type=int, default=200, help="calls in the short run (warm-up included)")
    parser.add_argument("--extra", type=int, default=2000, help="calls more in the long run")
    parser.add_argument("--bridge", action="store_true", help="offer the bridge on the stream (x-hookwire-bridge)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the callgrind output files under this folder")
    args = parser.parse_args()
    results: dict[str, float] = {}
    for name, floor in (("sdk", False), ("floor", True)):
        if floor == args.floor or args.both:
            results[name] = per_call(floor, args.calls, args.extra, args.bridge, args.keep)
            print(f"{name}: {results[name] / 1000:.1f}k instructions per call", flush=True)
    if len(results) == 2:
        print(f"sdk/floor: {results['sdk'] / results['floor']:.3f}")


if __name__ == "__main__":
    main()
