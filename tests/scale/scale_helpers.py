"""Helpers for the beyond-one-machine tests: certificates and remote extension services run as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from certs import CA, Pair

FIXTURES = Path(__file__).parent / "fixtures"
REMOTE_EXT = FIXTURES / "remote_ext.py"


@dataclass(frozen=True)
class Pki:
    ca: CA
    server: Pair
    client: Pair
    other_ca: CA
    other_client: Pair


def make_pki(d: Path) -> Pki:
    ca = CA(d, "test-ca")
    other = CA(d, "other-ca")
    return Pki(ca=ca, server=ca.issue("server", server=True), client=ca.issue("host-client", server=False),
               other_ca=other, other_client=other.issue("stranger", server=False))

@dataclass
class Service:
    proc: subprocess.Popen[bytes]
    address: str  # HOST:PORT it listens on (from its handshake line)
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def start_service(tmp: Path, *, token: str, pki: Pki | None, mutual: bool = True, replica: str = "r0",
                  extra_env: dict[str, str] | None = None, script: Path = REMOTE_EXT) -> Service:
    """Run the remote fixture as an operator would: `--listen 127.0.0.1:0`, TLS from the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKWIRE_")}
    env.update({"HOOKWIRE_LISTEN": "127.0.0.1:0", "HOOKWIRE_TOKEN": token, "REPLICA": replica})
    if pki is not None:
        env.update({"HOOKWIRE_TLS_CERT": str(pki.server.cert), "HOOKWIRE_TLS_KEY": str(pki.server.key)})
        if mutual:
            env["HOOKWIRE_TLS_CLIENT_CA"] = str(pki.ca.cert_file)
    env.update(extra_env or {})
    log = tmp / f"service-{replica}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, str(script)], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("hookwire|1|"):
        proc.kill()
        raise AssertionError(f"no handshake from the service: {line!r}; stderr: {log.read_text()}")
    return Service(proc=proc, address=line.split("|", 2)[2], log=log)
