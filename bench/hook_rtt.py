"""Hook round trip: an awaited beforeToolCall through the full ExtensionManager dispatch path, beside a bare
grpc.aio unary echo (separate server process, same Unix-socket kind, same request/response messages).

The extension opts in to decisions, so the manager awaits its reply (observe-only beforeToolCall is not
awaited). Baseline and subject alternate in rounds (ABAB) in the same run; p50/p99 are medians over rounds.

    .venv/bin/python -m bench --only hook_rtt        (or: .venv/bin/python bench/hook_rtt.py [--quick])
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script (`python bench/hook_rtt.py`): import the package properly
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "bench"  # noqa: A001

import grpc

from host import ExtensionManager, ToolCallSnapshot
from extension_sdk.proto import extension_pb2 as pb

from ._common import EXT_DIR, Config, Section, abab, bench_manifest, line_server, median, pct, python_argv, rnd, time_calls, workdir

NAME = "hook_rtt"


async def run(cfg: Config) -> Section:
    calls = cfg.n(2000, 200)
    warmup = cfg.n(300, 50)
    out = Section()
    snap = ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0)
    req = pb.BeforeToolCallRequest(
        context=pb.CallContext(session_id="s", request_id="r"),
        snapshot=pb.ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input_json='{"q":"hookwire"}',
                                     step_number=0),
        want_decision=True,
    )
    with workdir() as work:
        sock = work / "echo.sock"
        async with ExtensionManager(sandbox=cfg.sandbox) as mgr, line_server(
            python_argv(EXT_DIR / "echo_server.py", str(sock)), "ready|"
        ) as ready:
            await mgr.load(bench_manifest("hookrtt", ["beforeToolCall"], decisions=True))
            async with grpc.aio.insecure_channel(ready.split("|", 1)[1]) as channel:
                echo = channel.unary_unary(
                    "/bench.Echo/Echo",
                    request_serializer=pb.BeforeToolCallRequest.SerializeToString,
                    response_deserializer=pb.BeforeToolCallResponse.FromString,
                )

                async def echo_call() -> None:
                    await echo(req)

                async def hook_call() -> None:
                    await mgr.before_tool_call(snap)

                await time_calls(warmup, echo_call)
                await time_calls(warmup, hook_call)

                async def a() -> list[float]:
                    return await time_calls(calls, echo_call)

                async def b() -> list[float]:
                    return await time_calls(calls, hook_call)

                echo_rounds, hook_rounds = await abab(cfg.ab_rounds, a, b)
    hook_p50 = median([pct(r, 0.5) for r in hook_rounds])
    echo_p50 = median([pct(r, 0.5) for r in echo_rounds])
    out.values = {
        "hook_rtt_p50_us": rnd(hook_p50, 1),
        "hook_rtt_p99_us": rnd(median([pct(r, 0.99) for r in hook_rounds]), 1),
        "echo_rtt_p50_us": rnd(echo_p50, 1),
        "hook_vs_echo_ratio": rnd(hook_p50 / echo_p50, 3),
    }
    out.extra = {"echo_rtt_p99_us": rnd(median([pct(r, 0.99) for r in echo_rounds]), 1), "hook_rtt_calls": calls}
    return out


if __name__ == "__main__":
    from .__main__ import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
