"""Several replicas of a remote extension behind one `endpoint` (a list of addresses here; `dns:///` resolves the
same way): gRPC round-robin with health checks; a replica that dies costs the call in flight, not the turn, and the
next calls reach a live replica."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from scale_helpers import Pki, Service

from host import Agent, ExtensionManager, parse_manifest

TOKEN = "replica-token"


def replicated(services: list[Service], pki: Pki) -> Any:
    return parse_manifest({
        "name": "remote-svc", "endpoint": "ipv4:" + ",".join(s.address for s in services), "token": TOKEN,
        "tls": {"caFile": str(pki.ca.cert_file), "certFile": str(pki.client.cert), "keyFile": str(pki.client.key),
                "serverName": "localhost"},
        "restart": {"backoffMs": 50, "maxCrashes": 10},
    }, "replicas.yaml")


async def _answer_from(mgr: ExtensionManager, want: str, within: float) -> str | None:
    """Call whoami until `want` answers (None if it never does within `within` s); failed calls are the cost."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while loop.time() < end:
        try:
            if await mgr.execute_tool("remote_svc_whoami", {}) == want:
                return want
        except Exception:  # noqa: BLE001 - the dead replica's calls fail until the reconnect
            pass
        await asyncio.sleep(0.05)
    return None


async def test_calls_reach_the_live_replica_after_one_dies(services: Callable[..., Service], pki: Pki) -> None:
    replicas = {name: services(token=TOKEN, pki=pki, replica=name) for name in ("r1", "r2")}
    async with ExtensionManager(sandbox="off") as mgr:
        await mgr.load(replicated(list(replicas.values()), pki))
        first = await mgr.execute_tool("remote_svc_whoami", {})
        survivor = "r2" if first == "r1" else "r1"
        victim = replicas[first].proc
        victim.kill()
        victim.wait(10)
        assert await _answer_from(mgr, survivor, 15) == survivor
        assert [await mgr.execute_tool("remote_svc_whoami", {}) for _ in range(3)] == [survivor] * 3


async def test_a_replica_dying_mid_session_costs_a_call_not_the_turn(services: Callable[..., Service],
                                                                       pki: Pki) -> None:
    replicas = {name: services(token=TOKEN, pki=pki, replica=name) for name in ("r1", "r2")}
    async with ExtensionManager(sandbox="off") as mgr:
        await mgr.load(replicated(list(replicas.values()), pki))
        async with Agent(session_id="s1", manager=mgr) as agent:
            ok = await agent.chat('/tool remote_svc_whoami {}')
            first = ok.message["parts"][-1]["text"] if ok.message else ""
            assert ok.status == "completed"
            serving = next(n for n in replicas if n in first)
            replicas[serving].proc.kill()
            replicas[serving].proc.wait(10)
            hit = await agent.chat('/tool remote_svc_whoami {}')
            assert hit.status == "completed"  # the tool call failed (or was retried elsewhere); the turn went on
            survivor = "r2" if serving == "r1" else "r1"
            assert await _answer_from(mgr, survivor, 15) == survivor
            after = await agent.chat('/tool remote_svc_whoami {}')
            assert after.status == "completed" and survivor in after.message["parts"][-1]["text"]


async def test_a_replica_reporting_not_serving_gets_no_calls(services: Callable[..., Service],
                                                             monkeypatch: Any) -> None:
    """Per-replica health checks: a replica whose grpc.health.v1 says NOT_SERVING (draining) is skipped by the round
    robin. Tool calls as unary RPCs here, so each call is balanced on its own (on the stream they ride one replica)."""
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    import host.extensions._extension_client as conn_mod

    monkeypatch.setattr(conn_mod, "USE_CONNECT_TOOLS", False)
    healthy = services(token=TOKEN, pki=None, replica="r1")
    draining = grpc.aio.server()  # serves Health (NOT_SERVING) and nothing else: a call reaching it would fail
    status = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(status, draining)
    await status.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    port = draining.add_insecure_port("127.0.0.1:0")
    await draining.start()
    try:
        m = parse_manifest({"name": "remote-svc", "endpoint": f"ipv4:127.0.0.1:{port},{healthy.address}",
                            "token": TOKEN}, "replicas.yaml")
        async with ExtensionManager(sandbox="off") as mgr:
            await mgr.load(m)
            assert [await mgr.execute_tool("remote_svc_whoami", {}) for _ in range(10)] == ["r1"] * 10
    finally:
        await draining.stop(0)


async def test_unary_calls_are_spread_round_robin_over_the_replicas(services: Callable[..., Service],
                                                                    pki: Pki, monkeypatch: Any) -> None:
    import host.extensions._extension_client as conn_mod

    monkeypatch.setattr(conn_mod, "USE_CONNECT_TOOLS", False)  # each tool call an RPC of its own
    replicas = [services(token=TOKEN, pki=pki, replica=name) for name in ("r1", "r2")]
    async with ExtensionManager(sandbox="off") as mgr:
        await mgr.load(replicated(replicas, pki))
        await asyncio.sleep(0.3)  # both subchannels connected and health-checked
        answers = [await mgr.execute_tool("remote_svc_whoami", {}) for _ in range(10)]
    assert sorted(set(answers)) == ["r1", "r2"] and abs(answers.count("r1") - answers.count("r2")) <= 2
