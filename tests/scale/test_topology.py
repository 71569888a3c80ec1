"""The topology in miniature, on one machine: 3 host processes sharing one PostgreSQL, 2 replicas of a remote
extension over mutual TLS, 60 sessions x 4 turns spread over the hosts, one host killed with SIGKILL mid-run.
Every turn completes exactly once, no session ever runs two turns at once, every transcript is intact and in order,
and every observation of a completed turn reached an extension replica. Prints turns/s and p99 latency; the same
load on a single SQLite host beside it is the bench entry's job (`python -m bench --only scale_topology`), which keeps
this test at one run of the topology."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scale_helpers import Pki, Service
from topology import drive, start_hosts, stop_hosts, text_of

from host import PostgresMessageStore

TOKEN = "topology-token"
SESSIONS, TURNS = 60, 4


def manifest(tmp: Path, replicas: list[Service], pki: Pki) -> Path:
    path = tmp / "remote.json"
    path.write_text(json.dumps({
        "name": "remote-svc", "endpoint": "ipv4:" + ",".join(r.address for r in replicas), "token": TOKEN,
        "tls": {"caFile": str(pki.ca.cert_file), "certFile": str(pki.client.cert), "keyFile": str(pki.client.key),
                "serverName": "localhost"},
        "restart": {"backoffMs": 50, "maxCrashes": 20},
    }))
    return path


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_three_hosts_share_postgres_and_two_replicas_through_a_host_kill(
        postgres: Any, services: Callable[..., Service], pki: Pki, tmp_path: Path) -> None:
    obs = [tmp_path / f"obs-r{i}.txt" for i in range(2)]
    replicas = [services(token=TOKEN, pki=pki, replica=f"r{i}", extra_env={"OBS_FILE": str(obs[i])}) for i in range(2)]
    m = manifest(tmp_path, replicas, pki)
    url = postgres.new_url()
    hosts = await start_hosts(3, url, m, tmp_path)
    try:
        run = await drive(hosts, sessions=SESSIONS, turns=TURNS, kill=2, kill_after=SESSIONS * TURNS // 3)
    finally:
        await stop_hosts(hosts)

    # every turn answered, once
    assert run.killed == 2
    assert len(run.outcomes) == SESSIONS * TURNS
    finished = ("completed", "elsewhere", "recovered")
    assert {o.status for o in run.outcomes} <= set(finished), [o for o in run.outcomes if o.status not in finished][:5]
    assert sum(o.retries for o in run.outcomes) >= 1  # the kill cost some turns a retry
    async with PostgresMessageStore(url) as store:
        for s in range(SESSIONS):
            session = f"sess{s:03d}"
            transcript = [(m["role"], m["content"]) for m in await store.messages(session)]
            want = [item for k in range(TURNS)
                    for item in (("user", text_of(session, k)), ("assistant", "echo: " + text_of(session, k)))]
            assert transcript == want, (session, transcript)  # intact, in order, turns never overlapped
            assert await store.pending_submissions(session) == []

    # every observation of a completed turn reached a replica
    seen = {line.split()[1] for f in obs if f.exists() for line in f.read_text().splitlines() if line.strip()}
    completed = {o.request_id for o in run.outcomes if o.status == "completed"}
    assert completed - seen == set()

    slowest = sorted(run.outcomes, key=lambda o: -o.latency_ms)[:3]
    print(f"\ntopology: 3 hosts + PostgreSQL + 2 mTLS replicas, host 2 killed after {run.killed_at_turns} turns: "
          f"{run.turns_per_s:.1f} turns/s, p50 {run.p(0.5):.0f} ms, p99 {run.p(0.99):.0f} ms "
          f"({sum(o.retries for o in run.outcomes)} turns retried on another host; slowest: "
          + ", ".join(f"{o.session}/{o.k} {o.latency_ms:.0f} ms {o.status} retries={o.retries}" for o in slowest) + ")")
