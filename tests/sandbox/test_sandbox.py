"""The sandbox: real processes started through host/sandbox/_launcher.py, each a small Python script."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.sandbox_dirs import Dirs, require

from host import Manifest, SandboxUnavailable, parse_manifest, plan_launch, sandbox_capabilities
from host.sandbox import _plan as _sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox layers are Linux features")


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    # Short paths: AF_UNIX socket paths are limited to 108 bytes.
    with tempfile.TemporaryDirectory(prefix="hwsb-") as base:
        yield Dirs(Path(base))


def _manifest(**fields: Any) -> Manifest:
    return parse_manifest({"name": "sandboxed-ext", "command": ["python", "main.py"], **fields})


def _run(
    dirs: Dirs, script: str, *, mode: str = "auto", timeout: float = 30, args: list[str] | None = None, **fields: Any
) -> subprocess.CompletedProcess[str]:
    path = dirs.base / "script.py"
    path.write_text(textwrap.dedent(script))
    plan = plan_launch(
        _manifest(**fields),
        command=[sys.executable, str(path), *(args or [])],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        scratch_dir=dirs.scratch,
        runtime_dir=dirs.runtime,
        mode=mode,  # type: ignore[arg-type]
    )
    return subprocess.run(plan.argv, env=plan.env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- plans


def test_mode_off_runs_the_command_itself(dirs: Dirs) -> None:
    plan = plan_launch(_manifest(), command=["/bin/true", "x"], env={"A": "1"}, scratch_dir=dirs.scratch,
                       runtime_dir=dirs.runtime, mode="off")
    assert plan.argv == ["/bin/true", "x"]
    assert plan.env == {"A": "1"}
    assert plan.enforced == []


def test_auto_plan_goes_through_the_launcher_and_lists_enforced_layers(dirs: Dirs) -> None:
    require("landlock_fs", "net_namespace")
    plan = plan_launch(_manifest(), command=["/bin/true"], env={}, scratch_dir=dirs.scratch,
                       runtime_dir=dirs.runtime, mode="auto")
    assert plan.argv[:4] == [sys.executable, "-I", "-S", str(_sandbox.LAUNCHER_PATH)]
    assert plan.argv[-2:] == ["--", "/bin/true"]
    assert {"rlimits", "no_new_privs", "net_namespace", "landlock_fs"} <= set(plan.enforced)


def test_network_hosts_without_an_egress_proxy_are_refused_even_in_auto_mode(dirs: Dirs) -> None:
    """A host list is never given the whole network: with no proxy socket, auto refuses naming egress_proxy."""
    with pytest.raises(SandboxUnavailable) as info:
        plan_launch(_manifest(permissions={"network": ["api.example.com"]}), command=["/bin/true"], env={},
                    scratch_dir=dirs.scratch, runtime_dir=dirs.runtime, mode="auto")
    assert info.value.extension == "sandboxed-ext"
    assert info.value.layer == "egress_proxy"
    assert str(info.value).startswith("extension 'sandboxed-ext': sandbox mode is 'auto' but layer 'egress_proxy' "
                                      "cannot be enforced: ")


def test_network_hosts_with_an_egress_socket_get_the_namespace_relay_spec_and_proxy_env(dirs: Dirs) -> None:
    """With the proxy's socket, a host list plans net_namespace + egress_proxy, the relay spec and proxy variables."""
    require("egress_proxy")
    sock = dirs.runtime / "egress.sock"
    plan = plan_launch(_manifest(permissions={"network": ["api.example.com"]}), command=["/bin/true"],
                       env={"HTTPS_PROXY": "http://elsewhere:1"}, scratch_dir=dirs.scratch, runtime_dir=dirs.runtime,
                       mode="required", egress=_sandbox.EgressSpec(port=_sandbox.EGRESS_PORT, socket=str(sock)))
    assert {"net_namespace", "egress_proxy"} <= set(plan.enforced)
    spec = json.loads(plan.argv[plan.argv.index("--spec") + 1])
    assert spec["net_namespace"] is True
    assert spec["egress"] == {"port": _sandbox.EGRESS_PORT, "socket": str(sock)}
    url = f"http://127.0.0.1:{_sandbox.EGRESS_PORT}"
    assert {k: plan.env[k] for k in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                                     "all_proxy", "NO_PROXY", "no_proxy")} == {
        "HTTPS_PROXY": url, "HTTP_PROXY": url, "ALL_PROXY": url, "https_proxy": url, "http_proxy": url,
        "all_proxy": url, "NO_PROXY": "", "no_proxy": ""}


def test_required_mode_raises_when_a_layer_is_unavailable(dirs: Dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sandbox_capabilities()
    fake = {**real, "layers": {**real["layers"], "landlock_fs": {"available": False, "detail": "kernel too old"}}}
    monkeypatch.setattr(_sandbox, "sandbox_capabilities", lambda: fake)
    with pytest.raises(SandboxUnavailable) as info:
        plan_launch(_manifest(), command=["/bin/true"], env={}, scratch_dir=dirs.scratch, runtime_dir=dirs.runtime,
                    mode="required")
    assert info.value.extension == "sandboxed-ext"
    assert info.value.layer == "landlock_fs"
    assert "kernel too old" in str(info.value)


def test_capabilities_describe_every_layer() -> None:
    caps = sandbox_capabilities()
    for layer in ("rlimits", "process_limit", "user_namespace", "net_namespace", "egress_proxy",
                  "no_new_privs", "landlock_fs", "landlock_scope"):
        assert isinstance(caps["layers"][layer]["available"], bool)
        assert caps["layers"][layer]["detail"]
    assert caps["kernel"]


# ---------------------------------------------------------------- launcher: fails closed


def test_launcher_exits_with_a_message_when_a_promised_layer_fails(dirs: Dirs) -> None:
    require("landlock_fs")
    plan = plan_launch(_manifest(), command=[sys.executable, "-c", "print('ran')"], env={},
                       scratch_dir=dirs.base / "does-not-exist", runtime_dir=dirs.runtime, mode="auto")
    done = subprocess.run(plan.argv, env=plan.env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 125
    assert "ran" not in done.stdout
    # The first layer that needs the scratch dir fails: the private root (mounted there) or Landlock.
    layer = "fs_read_confinement" if "fs_read_confinement" in plan.enforced else "landlock_fs"
    assert f"hookwire-sandbox: extension 'sandboxed-ext': cannot apply {layer}" in done.stderr


# ---------------------------------------------------------------- rlimits


def test_memory_bomb_dies_under_the_memory_limit(dirs: Dirs) -> None:
    require("rlimits")
    done = _run(dirs, """
        block = bytearray(600 * 1024 * 1024)
        print("allocated", len(block))
    """, limits={"memoryMb": 128})
    assert done.returncode != 0
    assert "allocated" not in done.stdout
    assert "MemoryError" in done.stderr or done.returncode < 0


def test_etc_is_one_read_only_view_shared_by_the_host_s_extensions(dirs: Dirs) -> None:
    """The /etc allowlist is one directory per host runtime dir, bound read-only at /etc (no copy per start)."""
    require("fs_read_confinement")
    plans = [json.loads(plan_launch(_manifest(), command=[sys.executable, "x.py"], env={}, scratch_dir=dirs.scratch,
                                    runtime_dir=dirs.runtime, mode="auto").argv[5])["fs"] for _ in range(2)]
    assert plans[0]["etc"] == plans[1]["etc"] == str((dirs.runtime / "etc-view").resolve())
    assert plans[0]["copy"] == []
    done = _run(dirs, """
        import os
        import hashlib
        print(hashlib.sha256(open("/etc/hosts", "rb").read()).hexdigest(), os.path.exists("/etc/shadow"))
        try:
            open("/etc/hosts", "a").write("x")
        except OSError as exc:
            print(type(exc).__name__)
    """)
    with open("/etc/hosts", "rb") as fh:
        host_hosts = hashlib.sha256(fh.read()).hexdigest()
    assert done.stdout.split() == [host_hosts, "False", "PermissionError"], done.stderr


def test_an_extension_killed_by_sigkill_is_reported_as_killed_by_sigkill(dirs: Dirs) -> None:
    """What an OOM kill in the memory cgroup looks like: the waiter relays SIGKILL (it can't install a handler)."""
    require("pid_namespace")
    done = _run(dirs, """
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert (done.returncode, done.stderr) == (-signal.SIGKILL, "")


def test_cpu_spin_is_killed_by_the_cpu_limit(dirs: Dirs) -> None:
    require("rlimits")
    done = _run(dirs, """
        while True:
            pass
    """, limits={"cpuSeconds": 1}, timeout=30)
    assert done.returncode in (-signal.SIGXCPU, -signal.SIGKILL)


def test_open_files_limit_applies(dirs: Dirs) -> None:
    require("rlimits")
    done = _run(dirs, """
        import resource
        print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """, limits={"openFiles": 40})
    assert done.stdout.strip() == "40"


FORK_BOMB = """
    import os, sys
    read_end, write_end = os.pipe()
    started = 0
    for _ in range(200):  # bounded even if the limit fails
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)  # park until the parent closes the pipe
            os._exit(0)
        started += 1
    os.close(write_end)
    for _ in range(started):
        os.wait()
    print(started)
"""


def test_fork_bomb_is_contained_by_the_process_limit(dirs: Dirs) -> None:
    require("process_limit")
    done = _run(dirs, FORK_BOMB, limits={"processes": 8})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 8


def test_fork_bomb_script_forks_freely_without_the_sandbox(dirs: Dirs) -> None:
    done = _run(dirs, FORK_BOMB, mode="off", limits={"processes": 8})
    assert int(done.stdout) == 200


# ---------------------------------------------------------------- no_new_privs, namespaces


def test_no_new_privs_is_set(dirs: Dirs) -> None:
    require("no_new_privs")
    done = _run(dirs, """
        status = open("/proc/self/status").read()
        print(status.split("NoNewPrivs:")[1].split()[0])
    """)
    assert done.stdout.strip() == "1"


@pytest.fixture
def tcp_server() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


CONNECT = """
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
        print("connected")
    except OSError as exc:
        print("refused", exc)
"""


def test_network_is_unreachable_without_network_permission(dirs: Dirs, tcp_server: int) -> None:
    require("net_namespace")
    done = _run(dirs, CONNECT, args=[str(tcp_server)])
    assert done.stdout.startswith("refused"), done.stdout + done.stderr


def test_network_works_with_sandbox_off(dirs: Dirs, tcp_server: int) -> None:
    done = _run(dirs, CONNECT, mode="off", args=[str(tcp_server)])
    assert done.stdout.strip() == "connected", done.stderr


def test_unix_socket_in_the_runtime_dir_is_reachable_from_the_sandbox(dirs: Dirs) -> None:
    require("net_namespace", "landlock_fs")
    path = dirs.runtime / "echo.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(64))

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    done = _run(dirs, """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        s.sendall(b"ping")
        print(s.recv(64).decode())
    """, args=[str(path)])
    thread.join(timeout=10)
    server.close()
    assert done.stdout.strip() == "ping", done.stderr


def test_extension_can_bind_its_socket_in_the_runtime_dir(dirs: Dirs) -> None:
    require("landlock_fs")
    done = _run(dirs, """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sys.argv[1])
        print("bound")
    """, args=[str(dirs.runtime / "ext.sock")])
    assert done.stdout.strip() == "bound", done.stderr


# ---------------------------------------------------------------- filesystem


WRITE = """
    import sys
    try:
        open(sys.argv[1], "w").write("x")
        print("written")
    except OSError as exc:
        print("denied", exc.errno)
"""


def test_write_inside_scratch_works(dirs: Dirs) -> None:
    require("landlock_fs")
    done = _run(dirs, WRITE + "    print(open(sys.argv[1]).read())\n", args=[str(dirs.scratch / "out.txt")])
    # With scratch_quota the scratch is a tmpfs private to the sandbox: read back from inside.
    assert done.stdout.split() == ["written", "x"], done.stderr
    if "scratch_quota" not in _sandbox.sandbox_capabilities()["layers"] or not \
            _sandbox.sandbox_capabilities()["layers"]["scratch_quota"]["available"]:
        assert (dirs.scratch / "out.txt").read_text() == "x"


def test_write_outside_scratch_is_denied(dirs: Dirs) -> None:
    require("landlock_fs")
    done = _run(dirs, WRITE, args=[str(dirs.base / "outside.txt")])
    assert done.stdout.startswith("denied"), done.stdout + done.stderr
    assert not (dirs.base / "outside.txt").exists()


def test_regular_files_cannot_be_written_in_the_runtime_dir(dirs: Dirs) -> None:
    require("landlock_fs")
    done = _run(dirs, WRITE, args=[str(dirs.runtime / "planted.txt")])
    assert done.stdout.startswith("denied"), done.stdout + done.stderr


def test_tempfiles_go_to_scratch(dirs: Dirs) -> None:
    require("landlock_fs")
    done = _run(dirs, """
        import tempfile
        with tempfile.NamedTemporaryFile(delete=False) as fh:
            print(fh.name)
    """)
    assert done.stdout.strip().startswith(str(dirs.scratch.resolve())), done.stderr


def test_signals_to_processes_outside_the_sandbox_are_refused(dirs: Dirs) -> None:
    require("landlock_scope")
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = _run(dirs, """
            import os, signal, sys
            try:
                os.kill(int(sys.argv[1]), signal.SIGTERM)
                print("sent")
            except (PermissionError, ProcessLookupError):  # Landlock scope; in a pid namespace it is not even seen
                print("refused")
        """, args=[str(outsider.pid)])
        assert done.stdout.strip() == "refused", done.stderr
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()


def test_launcher_imports_only_the_standard_library() -> None:
    import ast

    tree = ast.parse(_sandbox.LAUNCHER_PATH.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)
