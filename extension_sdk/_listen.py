"""Serving as a remote extension: the TCP listen address and the TLS material, from flags or the environment.

The same extension code runs local (the host starts it and names a Unix socket) or remote (an operator runs it as a
service and a host's manifest names its `endpoint`). Remote mode is chosen by a listen address:

| flag | environment | meaning |
|---|---|---|
| `--listen HOST:PORT` | `HOOKWIRE_LISTEN` | serve on TCP (port 0: any free port; the handshake line names it) |
| `--tls-cert FILE` | `HOOKWIRE_TLS_CERT` | the server's certificate chain (PEM) |
| `--tls-key FILE` | `HOOKWIRE_TLS_KEY` | its private key (PEM) |
| `--tls-client-ca FILE` | `HOOKWIRE_TLS_CLIENT_CA` | CA bundle of the hosts' client certificates: mutual TLS, a host without a
  certificate this CA signed is refused during the handshake |
| `--token-file FILE` | `HOOKWIRE_TOKEN` | the token every host call must carry (`x-hookwire-token`); required |

A flag wins over the variable. Certificate and key go together; a client CA needs them.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import grpc


class ListenConfigError(ValueError):
    """The listen address or TLS material is unusable; the message names the flag/variable and the file."""


@dataclass(frozen=True)
class ListenConfig:
    """Where and how a remote extension serves."""

    address: str
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.cert_file is not None

    @property
    def mutual(self) -> bool:
        return self.client_ca_file is not None

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """gRPC server credentials (None: plaintext). With a client CA, client certificates are required."""
        if not self.tls:
            return None
        assert self.cert_file is not None and self.key_file is not None
        chain = _read(self.cert_file, "--tls-cert / HOOKWIRE_TLS_CERT")
        key = _read(self.key_file, "--tls-key / HOOKWIRE_TLS_KEY")
        client_ca = _read(self.client_ca_file, "--tls-client-ca / HOOKWIRE_TLS_CLIENT_CA") if self.mutual else None
        return grpc.ssl_server_credentials(
            [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
        )

    def describe(self) -> str:
        if not self.tls:
            return "plaintext (no TLS)"
        return "mutual TLS (client certificates required)" if self.mutual else "TLS (no client certificates)"


def _read(path: str | None, what: str) -> bytes:
    if not path:
        raise ListenConfigError(f"{what}: no file named")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ListenConfigError(f"{what}: cannot read {path!r}: {exc.strerror or exc}") from None
    if not data.strip():
        raise ListenConfigError(f"{what}: {path!r} is empty")
    return data


def add_listen_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default=None)
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--tls-client-ca", default=None)
    parser.add_argument("--token-file", default=None)


def listen_config(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ListenConfig | None:
    """The remote-serving configuration, or None when no listen address is given (local mode)."""
    env = os.environ if environ is None else environ
    address = args.listen or env.get("HOOKWIRE_LISTEN") or None
    if address is None:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ListenConfigError(f"--listen / HOOKWIRE_LISTEN: {address!r} is not HOST:PORT (e.g. 0.0.0.0:7443)")
    cert = args.tls_cert or env.get("HOOKWIRE_TLS_CERT") or None
    key = args.tls_key or env.get("HOOKWIRE_TLS_KEY") or None
    client_ca = args.tls_client_ca or env.get("HOOKWIRE_TLS_CLIENT_CA") or None
    if (cert is None) != (key is None):
        raise ListenConfigError("TLS needs both a certificate (--tls-cert / HOOKWIRE_TLS_CERT) and its key "
                                "(--tls-key / HOOKWIRE_TLS_KEY)")
    if client_ca is not None and cert is None:
        raise ListenConfigError("--tls-client-ca / HOOKWIRE_TLS_CLIENT_CA (mutual TLS) needs a server certificate "
                                "and key too (--tls-cert, --tls-key)")
    config = ListenConfig(address, cert, key, client_ca)
    config.server_credentials()  # read the files now: a bad path is a start error, not a failed handshake later
    return config


def listen_token(args: argparse.Namespace, environ: dict[str, str] | None = None) -> str | None:
    """The token of a remote extension: --token-file's content, else HOOKWIRE_TOKEN."""
    env = os.environ if environ is None else environ
    if args.token_file:
        token = _read(args.token_file, "--token-file").decode().strip()
        return token or None
    return env.get("HOOKWIRE_TOKEN") or None


def is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")
