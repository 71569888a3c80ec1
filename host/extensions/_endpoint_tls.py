"""How the host reaches a remote extension (a manifest's `endpoint`): channel credentials from its `tls` block, and
start errors that say what went wrong in the manifest's terms.

`tls: {caFile, certFile, keyFile, serverName}` (paths relative to the manifest): `caFile` is the CA that signed the
extension's server certificate (default: the system's roots); `certFile` + `keyFile` are the host's client
certificate for mutual TLS; `serverName` overrides the name checked in the server certificate (when the endpoint is
reached by an address its certificate does not name). Without `tls` the channel is plaintext.

Several replicas behind one `endpoint`: a target that resolves to several addresses (`dns:///ext.internal:7443` with
several A records, or a list: `ipv4:10.0.0.1:7443,10.0.0.2:7443`) gets gRPC's own `round_robin` balancing with
client-side health checks per replica (grpc.health.v1 Watch of the server's overall status: a replica that reports
NOT_SERVING, e.g. one draining after SIGTERM, gets no new calls; one without the health service counts as healthy).
The host's Connect stream rides one replica for the life of the connection, so a session's observations stay in order
on it; when that replica dies the connection breaks, the call in flight fails under its hook's failure policy, and the
reconnect (restart.backoffMs) lands on a live replica.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from .._errors import ExtensionStartError
from ._manifest import Manifest


def _read(m: Manifest, field: str, path: str | None, source: str) -> bytes | None:
    if not path:
        return None
    full = m.base_dir() / path
    try:
        data = full.read_bytes()
    except OSError as exc:
        raise ExtensionStartError(
            f"extension {m.name!r} (manifest {source}): tls.{field} {str(full)!r} cannot be read: "
            f"{exc.strerror or exc}", extension=m.name, manifest=source,
        ) from None
    return data


# round_robin over the resolved addresses, each replica health-checked (grpc.health.v1, the server's overall status)
SERVICE_CONFIG = json.dumps({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}})


def endpoint_channel(m: Manifest, source: str) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    """(credentials, extra channel options) for the manifest's endpoint; raises ExtensionStartError naming the field."""
    balancing: list[tuple[str, Any]] = [("grpc.service_config", SERVICE_CONFIG)]
    tls = m.tls
    if tls is None:
        return None, balancing
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ExtensionStartError(
            f"extension {m.name!r} (manifest {source}): tls.certFile and tls.keyFile go together (the host's client "
            "certificate for mutual TLS and its key)", extension=m.name, manifest=source,
        )
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(m, "caFile", tls.ca_file, source),
        private_key=_read(m, "keyFile", tls.key_file, source),
        certificate_chain=_read(m, "certFile", tls.cert_file, source),
    )
    options = balancing
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return credentials, options


def describe_failure_hint(m: Manifest, code: grpc.StatusCode, details: str) -> str:
    """A hint, in manifest terms, for a Describe that failed against an endpoint ("" when none applies)."""
    if m.endpoint is None:
        return ""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return " (the endpoint refused the host's token: check the manifest's `token`)"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        text = details.lower()
        if m.tls is None:
            return (f" (is the endpoint {m.endpoint!r} up? If it serves TLS, the manifest needs a `tls` block)")
        if "certificate" in text or "ssl" in text or "tls" in text or "handshake" in text:
            return (" (the TLS handshake failed: check tls.caFile signs the endpoint's certificate, tls.serverName "
                    "matches it, and tls.certFile/keyFile when the endpoint requires a client certificate)")
        return (f" (could not reach {m.endpoint!r} over TLS: is it up, and do tls.caFile, tls.serverName and "
                "tls.certFile/keyFile match what it expects?)")
    return ""
