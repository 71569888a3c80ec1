"""The Python zygote: real forked extension processes, the real sandbox layers, real gRPC."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import grpc
import pytest
from zy_helpers import FIXTURES, REPO, Dirs, base_env, collect, require, run_script, spawn

from extension_sdk.proto import HANDSHAKE_MAGIC, TOKEN_METADATA_KEY, extension_pb2, extension_pb2_grpc
from host.sandbox._zygote import UNKNOWN_EXIT, Zygote, ZygoteUnavailable, zygote_launch

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux-only (pidfd, namespaces)")


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


async def _until(predicate: object, timeout: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return bool(predicate())  # type: ignore[operator]


# ---------------------------------------------------------------- an SDK extension end to end


async def test_sdk_extension_handshakes_and_answers_describe(zygote: Zygote, dirs: Dirs) -> None:
    sock = dirs.runtime / "ext.sock"
    token = "tok-describe"
    env = {"HOOKWIRE_SOCKET": str(sock), "HOOKWIRE_TOKEN": token, "HOOKWIRE_MAGIC_COOKIE": "hookwire-extension-v1",
           "HOOKWIRE_EXTENSION_NAME": "test-tools", "HOOKWIRE_SCRATCH_DIR": str(dirs.scratch)}
    proc = await spawn(zygote, dirs, [sys.executable, "tools_ext.py"], env=env, cwd=FIXTURES)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    assert line == f"{HANDSHAKE_MAGIC}|1|unix:{sock}"
    async with grpc.aio.insecure_channel(f"unix:{sock}") as channel:
        stub = extension_pb2_grpc.ExtensionStub(channel)
        desc = await stub.Describe(extension_pb2.DescribeRequest(), metadata=[(TOKEN_METADATA_KEY, token)], timeout=10)
    assert desc.name == "test-tools"
    assert {t.name for t in desc.tools} >= {"greet", "add"}
    code, _, err = await collect(proc)  # closing stdin (the lifeline) stops it
    assert "stopping: stdin closed (lifeline)" in err
    # (exit code 1 under Landlock: the SDK cannot unlink its socket in the runtime dir; the launcher path does
    # the same)
    assert code in (0, 1), err


async def test_module_form_runs_with_argv_and_cwd_on_sys_path(zygote: Zygote, dirs: Dirs) -> None:
    (dirs.base / "zmod.py").write_text("import os, sys\nprint(sys.argv[1:], sys.path[0] == os.getcwd())\n")
    proc = await spawn(zygote, dirs, [sys.executable, "-m", "zmod", "a", "b"], mode="off")
    code, out, err = await collect(proc)
    assert (code, out.strip()) == (0, "['a', 'b'] True"), err


async def test_script_sees_the_same_sys_path_flags_and_argv_as_in_a_real_interpreter(
    zygote: Zygote, dirs: Dirs
) -> None:
    script = dirs.base / "introspect.py"
    script.write_text("import json, sys\nprint(json.dumps([sys.path, list(sys.flags), sys.argv, __name__]))\n")
    env = base_env()
    real = subprocess.run([sys.executable, str(script), "x"], env=env, cwd=dirs.base, capture_output=True,
                          text=True, check=True).stdout
    proc = await spawn(zygote, dirs, [sys.executable, str(script), "x"], mode="off")
    code, out, err = await collect(proc)
    assert code == 0, err
    assert json.loads(out) == json.loads(real)


# ---------------------------------------------------------------- the sandbox in the child


async def test_child_has_no_new_privs(zygote: Zygote, dirs: Dirs) -> None:
    require("no_new_privs")
    code, out, err = await run_script(zygote, dirs, """
        print([l for l in open("/proc/self/status") if l.startswith("NoNewPrivs")][0].split()[1])
    """)
    assert (code, out.strip()) == (0, "1"), err


async def test_child_cannot_write_outside_its_scratch_dir(zygote: Zygote, dirs: Dirs) -> None:
    require("landlock_fs")
    outside = dirs.base / "outside.txt"
    code, out, err = await run_script(zygote, dirs, f"""
        import os
        open(os.path.join(os.environ["TMPDIR"], "inside.txt"), "w").write("ok")
        try:
            open({str(outside)!r}, "w").write("escaped")
            print("written")
        except OSError:  # EACCES from Landlock, or EROFS when the private root shows the dir read-only
            print("denied")
        print(open(os.path.join(os.environ["TMPDIR"], "inside.txt")).read())
    """)
    assert (code, out.split()) == (0, ["denied", "ok"]), err
    assert not outside.exists()


async def test_child_has_no_network(zygote: Zygote, dirs: Dirs) -> None:
    require("net_namespace")
    code, out, err = await run_script(zygote, dirs, """
        import os, socket
        print(os.readlink("/proc/self/ns/net"))
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=5)
            print("connected")
        except OSError as exc:
            print("refused", exc.errno)
    """)
    assert code == 0, err
    netns, result = out.split("\n")[:2]
    assert netns != os.readlink("/proc/self/ns/net")
    assert result.startswith("refused")


async def test_sandbox_failure_exits_125_with_the_launcher_message(zygote: Zygote, dirs: Dirs) -> None:
    spec = {"extension": "broken-ext", "extension_id": "broken_ext", "rlimits": {}, "no_new_privs": False,
            "user_namespace": False, "net_namespace": False, "process_limit": None,
            "landlock": {"writable_dirs": [str(dirs.base / "missing")], "socket_dirs": [], "writable_files": [],
                         "scope": False}}
    require("landlock_fs")
    launch = zygote_launch([sys.executable, "-I", "-S", str(REPO / "host" / "sandbox" / "_launcher.py"), "--spec",
                            json.dumps(spec), "--", sys.executable, "x.py"], base_env())
    assert launch is not None
    proc = await zygote.spawn(launch, name="broken-ext", env=base_env(), cwd=dirs.base)
    code, _, err = await collect(proc)
    assert code == 125
    assert "hookwire-sandbox: extension 'broken-ext': cannot apply landlock_fs" in err


# ---------------------------------------------------------------- secrets and the child's environment


async def test_child_environment_is_exactly_the_requested_one(dirs: Dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKWIRE_TEST_HOST_SECRET", "host-secret-value")
    z = Zygote()
    try:
        code, out, err = await run_script(z, dirs, "import json, os; print(json.dumps(dict(os.environ)))",
                                          mode="off", env={"ONLY_THIS": "1"})
    finally:
        await z.close()
    assert code == 0, err
    assert json.loads(out) == {**base_env(), "ONLY_THIS": "1"}


async def test_zygote_holds_neither_host_secrets_nor_extension_tokens(
    dirs: Dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKWIRE_TEST_HOST_SECRET", "host-secret-value-8d1f")
    token = "extension-token-5c0e2a9b7d"
    z = Zygote()
    try:
        code, _, err = await run_script(z, dirs, "pass", mode="off", env={"HOOKWIRE_TOKEN": token})
        assert code == 0, err
        assert z.pid is not None
        environ = Path(f"/proc/{z.pid}/environ").read_bytes()
        assert b"host-secret-value" not in environ
        assert {k.split(b"=")[0] for k in environ.split(b"\0") if k} <= {b"LANG", b"LC_ALL", b"PATH", b"TZ"}
        memory = b""
        with open(f"/proc/{z.pid}/maps") as maps, open(f"/proc/{z.pid}/mem", "rb", 0) as mem:
            for line in maps:
                addresses, perms = line.split()[:2]
                if not perms.startswith("rw"):
                    continue
                start, end = (int(a, 16) for a in addresses.split("-"))
                try:
                    mem.seek(start)
                    memory += mem.read(end - start)
                except OSError:
                    continue
        assert len(memory) > 1_000_000
        assert token.encode() not in memory
        assert b"host-secret-value-8d1f" not in memory
    finally:
        await z.close()


# ---------------------------------------------------------------- exit codes, reaping, stdio


async def test_sys_exit_code_is_reported(zygote: Zygote, dirs: Dirs) -> None:
    code, _, _ = await run_script(zygote, dirs, "import sys; sys.exit(7)", mode="off")
    assert code == 7


async def test_uncaught_exception_prints_a_traceback_and_exits_1(zygote: Zygote, dirs: Dirs) -> None:
    code, _, err = await run_script(zygote, dirs, "raise ValueError('kaboom')", mode="off")
    assert code == 1
    assert "Traceback (most recent call last)" in err and "ValueError: kaboom" in err


async def test_a_child_killed_by_a_signal_reports_minus_the_signal(zygote: Zygote, dirs: Dirs) -> None:
    (dirs.base / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    proc = await spawn(zygote, dirs, [sys.executable, "sleep.py"], mode="off")
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"up\n"
    proc.kill()
    assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL


async def test_the_child_is_reaped_after_it_exits(zygote: Zygote, dirs: Dirs) -> None:
    path = dirs.base / "quick.py"
    path.write_text("pass\n")
    proc = await spawn(zygote, dirs, [sys.executable, str(path)], mode="off")
    await collect(proc)
    assert await _until(lambda: _gone(proc.pid))  # not even a zombie


async def test_the_child_is_a_session_leader_with_only_its_three_stdio_fds(zygote: Zygote, dirs: Dirs) -> None:
    code, out, err = await run_script(zygote, dirs, """
        import os
        print(os.getsid(0) == os.getpid(), sorted(int(f) for f in os.listdir("/proc/self/fd"))[:4])
    """, mode="off")
    # listdir itself holds fd 3 while it reads the directory
    assert (code, out.strip()) == (0, "True [0, 1, 2, 3]"), err


async def test_the_child_shows_the_extension_command_line(zygote: Zygote, dirs: Dirs) -> None:
    (dirs.base / "title.py").write_text("print(open('/proc/self/cmdline', 'rb').read().rstrip(b'\\0').split(b'\\0'))\n")
    proc = await spawn(zygote, dirs, [sys.executable, "title.py", "--marker-xyz"], mode="off")
    code, out, _ = await collect(proc)
    assert out.strip() == repr([sys.executable.encode(), b"title.py", b"--marker-xyz"])


# ---------------------------------------------------------------- the zygote's own lifetime and failures


async def test_the_zygote_exits_when_its_host_dies(dirs: Dirs) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import asyncio, time
            from host.sandbox._zygote import Zygote
            async def main():
                z = Zygote()
                await z.start()
                print(z.pid, flush=True)
                time.sleep(60)
            asyncio.run(main())
        """)],
        cwd=str(REPO), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert host.stdout is not None
        zpid = int(host.stdout.readline())
        assert not _gone(zpid)
        host.kill()
        host.wait()
        assert await _until(lambda: _gone(zpid) or "Z" in Path(f"/proc/{zpid}/stat").read_text().split(")")[1][:3])
    finally:
        host.kill()
        host.wait()


async def test_spawn_after_the_zygote_died_raises_zygote_unavailable(zygote: Zygote, dirs: Dirs) -> None:
    assert zygote.pid is not None
    os.kill(zygote.pid, signal.SIGKILL)
    assert await _until(lambda: zygote.broken is not None)
    with pytest.raises(ZygoteUnavailable):
        await run_script(zygote, dirs, "pass", mode="off")


async def test_a_child_outliving_its_zygote_is_still_seen_exiting(zygote: Zygote, dirs: Dirs) -> None:
    (dirs.base / "wait_eof.py").write_text("import sys\nprint('up', flush=True)\nsys.stdin.read()\n")
    proc = await spawn(zygote, dirs, [sys.executable, "wait_eof.py"], mode="off")
    assert proc.stdout is not None and proc.stdin is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"up\n"
    assert zygote.pid is not None
    os.kill(zygote.pid, signal.SIGKILL)
    assert await _until(lambda: zygote.broken is not None)
    assert proc.returncode is None
    proc.stdin.close()  # the lifeline: it exits by itself
    assert await asyncio.wait_for(proc.wait(), 10) == UNKNOWN_EXIT


# ---------------------------------------------------------------- eligibility


@pytest.mark.parametrize(
    ("command", "env"),
    [
        (["node", "ext.js"], {}),
        ([sys.executable, "-u", "ext.py"], {}),
        ([sys.executable, "-c", "pass"], {}),
        (["/usr/bin/python3-other", "ext.py"], {}),
        ([sys.executable, "ext.py"], {"PYTHONPATH": "/x"}),
        ([sys.executable], {}),
        ([sys.executable, "ext.py"], {"LC_ALL": "a-locale-the-host-does-not-have"}),
    ],
)
def test_only_plain_python_module_and_script_commands_are_eligible(command: list[str], env: dict[str, str]) -> None:
    assert zygote_launch(command, {**base_env(), **env}) is None


def test_a_plain_script_command_with_the_host_locale_is_eligible() -> None:
    launch = zygote_launch([sys.executable, "ext.py", "--a"], {**base_env(), "HOOKWIRE_TOKEN": "t"})
    assert launch is not None
    assert (launch.kind, launch.target, launch.argv, launch.spec) == ("path", "ext.py", ["ext.py", "--a"], None)


def test_launcher_argv_is_unwrapped_into_its_spec_and_command() -> None:
    launch = zygote_launch([sys.executable, "-I", "-S", str(REPO / "host" / "sandbox" / "_launcher.py"), "--spec",
                            '{"extension": "e"}', "--", sys.executable, "-m", "pkg.mod", "--x"], base_env())
    assert launch is not None
    assert (launch.kind, launch.target, launch.argv, launch.spec) == ("module", "pkg.mod", ["-m", "--x"],
                                                                      {"extension": "e"})


def test_environment_switch_disables_the_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    from host.sandbox._zygote import zygote_enabled

    monkeypatch.setenv("HOOKWIRE_ZYGOTE", "0")
    assert not zygote_enabled()
    monkeypatch.setenv("HOOKWIRE_ZYGOTE", "1")
    assert zygote_enabled()


def test_zygote_main_imports_no_host_package() -> None:
    source = (REPO / "host" / "sandbox" / "_zygote_main.py").read_text()
    assert not re.search(r"^\s*(from|import)\s+host\b", source, re.M)
