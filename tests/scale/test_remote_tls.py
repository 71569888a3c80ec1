"""A remote extension over TCP: the SDK serves with `--listen` and TLS from the environment; the host reaches it by
the manifest's `endpoint` + `tls` + `token`. mTLS is accepted; a wrong CA, a missing client certificate and a wrong
token are refused with a start error naming the extension."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scale_helpers import REMOTE_EXT, Pki, Service

from host import ExtensionManager, ExtensionStartError, TurnSnapshot, parse_manifest

TOKEN = "remote-token-123"


def manifest(svc: Service, pki: Pki | None, *, token: str = TOKEN, client: bool = True, ca: Path | None = None,
             server_name: str | None = None, **extra: Any) -> Any:
    data: dict[str, Any] = {"name": "remote-svc", "endpoint": svc.address, "token": token, **extra}
    if pki is not None:
        tls: dict[str, str] = {"caFile": str(ca or pki.ca.cert_file)}
        if client:
            tls.update(certFile=str(pki.client.cert), keyFile=str(pki.client.key))
        if server_name:
            tls["serverName"] = server_name
        data["tls"] = tls
    return parse_manifest(data, "remote.yaml")


async def test_mutual_tls_endpoint_serves_tools_and_hooks(services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        info = await mgr.load(manifest(svc, pki))
        assert info.state == "running" and info.endpoint == svc.address
        assert await mgr.execute_tool("remote_svc_add", {"a": 2, "b": 40}) == 42
        merged = await mgr.before_turn(TurnSnapshot(system="base"))
        assert merged.patch.system == "base [r0]"


async def test_server_name_override_reaches_a_certificate_naming_another_host(
        services: Callable[..., Service], pki: Pki, tmp_path: Path) -> None:
    named = pki.ca.issue("svc-internal", server=True, dns=("ext.internal",), ips=())
    svc = services(token=TOKEN, pki=pki, extra_env={"HOOKWIRE_TLS_CERT": str(named.cert),
                                                     "HOOKWIRE_TLS_KEY": str(named.key)})
    async with ExtensionManager(sandbox="off") as mgr:
        await mgr.load(manifest(svc, pki, server_name="ext.internal"))
        assert await mgr.execute_tool("remote_svc_add", {"a": 1, "b": 1}) == 2


async def test_wrong_ca_is_refused_naming_the_extension(services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        with pytest.raises(ExtensionStartError) as err:
            await mgr.load(manifest(svc, pki, ca=pki.other_ca.cert_file, timeouts={"startMs": 3000}))
    text = str(err.value)
    assert "'remote-svc'" in text and "TLS handshake failed" in text and "tls.caFile" in text


async def test_missing_client_certificate_is_refused_naming_the_extension(
        services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki, mutual=True)
    async with ExtensionManager(sandbox="off") as mgr:
        with pytest.raises(ExtensionStartError) as err:
            await mgr.load(manifest(svc, pki, client=False, timeouts={"startMs": 3000}))
    text = str(err.value)
    assert "'remote-svc'" in text and "Describe failed" in text and "tls.certFile" in text


async def test_client_certificate_of_another_ca_is_refused(services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki, mutual=True)
    m = parse_manifest({"name": "remote-svc", "endpoint": svc.address, "token": TOKEN, "timeouts": {"startMs": 3000},
                        "tls": {"caFile": str(pki.ca.cert_file), "certFile": str(pki.other_client.cert),
                                "keyFile": str(pki.other_client.key)}}, "remote.yaml")
    async with ExtensionManager(sandbox="off") as mgr:
        with pytest.raises(ExtensionStartError, match="'remote-svc'.*Describe failed"):
            await mgr.load(m)


async def test_wrong_token_over_mutual_tls_is_refused_naming_the_extension(
        services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        with pytest.raises(ExtensionStartError) as err:
            await mgr.load(manifest(svc, pki, token="not-the-token"))
    text = str(err.value)
    assert "'remote-svc'" in text and "UNAUTHENTICATED" in text and "`token`" in text
    assert "rejected" in svc.stderr()


async def test_unreadable_tls_file_is_a_start_error_naming_the_field(
        services: Callable[..., Service], pki: Pki, tmp_path: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        with pytest.raises(ExtensionStartError, match=r"'remote-svc'.*tls\.caFile .*missing-ca\.pem"):
            await mgr.load(manifest(svc, pki, ca=tmp_path / "missing-ca.pem"))


def test_service_logs_where_it_listens_and_how(services: Callable[..., Service], pki: Pki) -> None:
    svc = services(token=TOKEN, pki=pki)
    host, port = svc.address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    svc.proc.terminate()
    svc.proc.wait(10)
    assert f"on {svc.address}, mutual TLS (client certificates required)" in svc.stderr()


def _run_bad(env_extra: dict[str, str], *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKWIRE_")}
    env.update(env_extra)
    proc = subprocess.run([sys.executable, str(REMOTE_EXT), *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)
    return proc.returncode, proc.stderr.decode()


def test_listening_without_a_token_is_refused() -> None:
    code, err = _run_bad({}, "--listen", "127.0.0.1:0")
    assert code == 1 and "remote-svc: serving on 127.0.0.1:0 needs a token" in err


def test_certificate_without_key_is_refused_naming_the_variables(pki: Pki) -> None:
    code, err = _run_bad({"HOOKWIRE_TOKEN": "t", "HOOKWIRE_TLS_CERT": str(pki.server.cert)}, "--listen", "127.0.0.1:0")
    assert code == 1 and "HOOKWIRE_TLS_KEY" in err


def test_unreadable_client_ca_is_refused_naming_the_flag(pki: Pki, tmp_path: Path) -> None:
    code, err = _run_bad({"HOOKWIRE_TOKEN": "t"}, "--listen", "127.0.0.1:0", "--tls-cert", str(pki.server.cert),
                         "--tls-key", str(pki.server.key), "--tls-client-ca", str(tmp_path / "nope.pem"))
    assert code == 1 and "--tls-client-ca" in err and "nope.pem" in err


def test_a_host_started_process_serves_its_socket_despite_a_stray_listen_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKWIRE_")}
    sock = tmp_path / "ext.sock"
    env.update({"HOOKWIRE_MAGIC_COOKIE": "hookwire-extension-v1", "HOOKWIRE_SOCKET": str(sock),
                "HOOKWIRE_TOKEN": "t", "HOOKWIRE_LISTEN": "127.0.0.1:0"})
    proc = subprocess.Popen([sys.executable, str(REMOTE_EXT)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().decode().strip() == f"hookwire|1|unix:{sock}"
    finally:
        proc.kill()
        proc.wait(10)
