"""The topology in miniature (issue 15, section 3): 3 host processes sharing one throwaway PostgreSQL, 2 replicas of
a remote extension over mutual TLS, 100 sessions x 5 turns spread over the hosts, one host SIGKILLed a third of the
way through; beside it, in the same run, the same load on a single host process with SQLite (the embedded default).

Reports turns/s and p99 turn latency (as the client sees it, a retry on another host included) for both. Needs
PostgreSQL's server binaries (`make postgres`) and the dev extras (cryptography, psycopg). Not part of `--quick`
(it starts a database and five processes); run it with `--only scale_topology`.

The pieces are the test suite's own (tests/scale: certificates, the remote extension, the host worker, the driver).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ._common import REPO_ROOT, Config, Section, rnd

NAME = "scale_topology"
TOKEN = "bench-topology-token"

for _p in (REPO_ROOT / "tests", REPO_ROOT / "tests" / "scale"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def _service(tmp: Path, pki: object, replica: str) -> tuple[subprocess.Popen[bytes], str]:
    from scale_helpers import REMOTE_EXT

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKWIRE_")}
    env.update({"HOOKWIRE_LISTEN": "127.0.0.1:0", "HOOKWIRE_TOKEN": TOKEN, "REPLICA": replica,
                "HOOKWIRE_TLS_CERT": str(pki.server.cert), "HOOKWIRE_TLS_KEY": str(pki.server.key),  # type: ignore[attr-defined]
                "HOOKWIRE_TLS_CLIENT_CA": str(pki.ca.cert_file),  # type: ignore[attr-defined]
                "HOOKWIRE_LOG_LEVEL": "WARNING"})
    proc = subprocess.Popen([sys.executable, str(REMOTE_EXT)], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("hookwire|1|"):
        proc.kill()
        raise RuntimeError(f"the remote extension did not start: {line!r}")
    return proc, line.split("|", 2)[2]


async def run(cfg: Config) -> Section:
    from fixtures.postgres import PostgresServer, missing_reason
    from scale_helpers import make_pki
    from topology import drive, start_hosts, stop_hosts

    reason = missing_reason()
    if reason is not None:
        raise RuntimeError(reason)
    sessions, turns = cfg.n(100, 20), cfg.n(5, 2)
    with tempfile.TemporaryDirectory(prefix="hookwire-bench-topology-") as d:
        tmp = Path(d)
        pki = make_pki(tmp)
        replicas = [_service(tmp, pki, f"r{i}") for i in range(2)]
        server = PostgresServer()
        try:
            server.start()
            manifest = tmp / "remote.json"
            manifest.write_text(json.dumps({
                "name": "remote-svc", "endpoint": "ipv4:" + ",".join(addr for _, addr in replicas), "token": TOKEN,
                "tls": {"caFile": str(pki.ca.cert_file), "certFile": str(pki.client.cert),
                        "keyFile": str(pki.client.key), "serverName": "localhost"},
                "restart": {"backoffMs": 50, "maxCrashes": 20},
            }))
            single_hosts = await start_hosts(1, str(tmp / "single.db"), manifest, tmp)
            try:
                single = await drive(single_hosts, sessions=sessions, turns=turns)
            finally:
                await stop_hosts(single_hosts)
            hosts = await start_hosts(3, server.new_url(), manifest, tmp)
            try:
                topo = await drive(hosts, sessions=sessions, turns=turns, kill=2, kill_after=sessions * turns // 3)
            finally:
                await stop_hosts(hosts)
        finally:
            server.stop()
            for proc, _ in replicas:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    bad = [o for o in topo.outcomes if o.status not in ("completed", "elsewhere", "recovered")]
    return Section(
        values={
            "topology_turns_per_s": rnd(topo.turns_per_s, 1),
            "topology_turn_p99_ms": rnd(topo.p(0.99), 1),
            "single_sqlite_turns_per_s": rnd(single.turns_per_s, 1),
            "single_sqlite_turn_p99_ms": rnd(single.p(0.99), 1),
        },
        extra={"topology_turns": len(topo.outcomes), "topology_retried": sum(o.retries for o in topo.outcomes),
               "topology_not_finished": len(bad), "topology_turn_p50_ms": rnd(topo.p(0.5), 1),
               "single_sqlite_turn_p50_ms": rnd(single.p(0.5), 1)},
        notes=[f"scale_topology: {sessions} sessions x {turns} turns; 3 hosts on PostgreSQL (host 2 SIGKILLed after "
               f"{topo.killed_at_turns} turns) vs 1 host on SQLite, same extension replicas, same run"],
    )
