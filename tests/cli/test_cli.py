"""The `hookwire` command, run as a user would: a real subprocess of the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")
TOOLS = str(ROOT / "sample_extensions/tools/manifest.yaml")
ROUTER = str(ROOT / "sample_extensions/router/manifest.yaml")


def hookwire(*args: str, cwd: Path = ROOT, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [HOOKWIRE, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )


def test_validate_names_the_file_field_and_reason_and_exits_nonzero(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncommand: [python, x.py]\nlimits: {memoryMb: lots}\n")
    proc = hookwire("ext", "validate", TOOLS, str(bad))
    assert proc.returncode == 3  # a manifest error
    assert f"ok       {TOOLS}" in proc.stdout
    assert f"{bad}: limits.memoryMb: Input should be a valid integer" in proc.stderr


def test_validate_rejects_a_misspelt_field(tmp_path: Path) -> None:
    bad = tmp_path / "typo.json"
    bad.write_text(json.dumps({"name": "x", "command": ["x"], "permisions": {}}))
    proc = hookwire("ext", "validate", str(bad))
    assert proc.returncode == 3
    assert "permisions: Extra inputs are not permitted (did you mean 'permissions'?)" in proc.stderr


def test_schema_is_the_manifest_json_schema() -> None:
    schema = json.loads(hookwire("ext", "schema").stdout)
    assert schema["title"] == "hookwire extension manifest"
    assert {"name", "command", "endpoint", "permissions", "hooks", "limits", "env"} <= set(schema["properties"])


def test_an_error_is_one_line_without_a_traceback_unless_debug(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    proc = hookwire("run", "hi", "-e", missing, "--store", str(tmp_path / "s.db"))
    assert proc.returncode == 3  # a manifest error
    assert proc.stderr.strip().splitlines() == [f"hookwire: error: {missing}: no such file"]
    debug = hookwire("--debug", "run", "hi", "-e", missing, "--store", str(tmp_path / "s.db"))
    assert "Traceback" in debug.stderr


def test_list_shows_state_hooks_tools_and_permissions() -> None:
    proc = hookwire("ext", "list", "-e", TOOLS, "-e", ROUTER, "--json")
    assert proc.returncode == 0, proc.stderr
    infos = {i["name"]: i for i in json.loads(proc.stdout)}
    assert {"name", "version", "state", "pid", "hooks", "tools", "features", "sandbox", "sandbox_missing",
            "permissions", "restarts", "crashes", "manifest"} <= set(infos["tools"])  # docs/cli.md's shape
    assert infos["tools"]["state"] == "running"
    assert {t["name"] if isinstance(t, dict) else t for t in infos["tools"]["tools"]} >= {
        "tools_calculator",
        "tools_count_to",
    }
    assert infos["router"]["hooks"] == ["beforeTurn"]
    assert infos["router"]["permissions"]["workspace"] == "none"
    assert "net_namespace" in infos["router"]["sandbox"]


def test_run_streams_the_answer_and_prints_who_set_which_field(tmp_path: Path) -> None:
    proc = hookwire(
        "run", "hello", "-e", ROUTER, "--body", '{"mode": "creative"}',
        "--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path / "ws"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("echo: hello")
    assert "beforeTurn  router" in proc.stdout
    assert "temperature          <- router" in proc.stdout


def test_chat_keeps_history_in_the_store_across_runs(tmp_path: Path) -> None:
    store = str(tmp_path / "chat.db")
    first = hookwire("chat", "--store", store, "--session", "s", "--no-trace", stdin="one\ntwo\n/quit\n")
    assert first.returncode == 0, first.stderr
    assert "echo: one" in first.stdout and "echo: two" in first.stdout
    again = hookwire("chat", "--store", store, "--session", "s", "--no-trace", stdin="/help\nthree\n")
    assert "echo: three" in again.stdout
    assert "resuming session 's': 4 earlier messages (the model sees them)\n" in again.stdout
    assert "  /quit, /exit     leave the chat" in again.stdout
    assert "resuming" not in first.stdout
    assert len(_stored_roles(store, "s")) == 6  # three user messages, three answers


def test_doctor_reports_protocol_versions_and_sandbox_layers() -> None:
    proc = hookwire("doctor")
    assert proc.returncode == 0, proc.stderr
    assert "hookwire protocol   v1" in proc.stdout
    assert "grpcio" in proc.stdout and "litellm" in proc.stdout
    assert "sandbox layers this machine can enforce:" in proc.stdout
    assert "landlock_fs" in proc.stdout and "net_namespace" in proc.stdout


def test_ext_new_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    proc = hookwire("ext", "new", "x", "--dir", str(tmp_path / "taken"))
    assert proc.returncode == 1
    assert "exists and is not empty" in proc.stderr


def test_doctor_shows_the_egress_proxy_layer() -> None:
    """`hookwire doctor` has an egress_proxy row with its availability and detail."""
    from host import sandbox_capabilities

    state = sandbox_capabilities()["layers"]["egress_proxy"]
    proc = hookwire("doctor")
    assert proc.returncode == 0, proc.stderr
    mark = "yes" if state["available"] else "NO "
    assert f"  {mark}  egress_proxy       {state['detail']}\n" in proc.stdout


class _Chat:
    """`hookwire chat` as a live subprocess: write lines, wait for output, send signals."""

    def __init__(self, *args: str) -> None:
        import threading

        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.proc = subprocess.Popen([HOOKWIRE, "chat", "--no-trace", "--sandbox", "off", *args], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while ch := self.proc.stdout.read(1):
            self.out += ch

    def wait_for(self, text: str, count: int = 1, timeout: float = 60) -> None:
        import time

        end = time.monotonic() + timeout
        while self.out.count(text) < count:
            assert time.monotonic() < end, f"no {text!r} (x{count}) in {self.out!r}"
            time.sleep(0.05)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


def _stored_roles(store: str, session: str) -> list[tuple[str, str]]:
    """(role, content) of each message the store holds for `session`, read through MessageStore in this process
    (the CLI that wrote them has exited; a fresh interpreter only added its imports to the test's time)."""
    import asyncio

    from host import MessageStore

    async def read() -> list[tuple[str, str]]:
        opened = MessageStore(store)
        try:
            return [(m["role"], m["content"]) for m in await opened.messages(session)]
        finally:
            await opened.close()

    return asyncio.run(read())


def test_chat_ctrl_c_mid_turn_aborts_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    import signal
    import time

    store = str(tmp_path / "chat.db")
    chat = _Chat("--store", store, "--session", "s", "--workspace", str(tmp_path / "ws"))
    chat.wait_for("you> ")
    chat.send("/stall 30000")
    chat.wait_for("assistant> ")
    time.sleep(1.0)  # the turn is in the model's stall
    chat.proc.send_signal(signal.SIGINT)
    chat.wait_for("[turn aborted]", timeout=20)
    chat.wait_for("you> ", count=2)
    chat.send("after")
    chat.wait_for("echo: after")
    chat.send("/quit")
    assert chat.proc.wait(timeout=60) == 0
    stored = _stored_roles(store, "s")
    # the aborted turn keeps what had streamed when Ctrl-C came: nothing yet, or the scripted model's first token
    assert stored[1] in (("assistant", ""), ("assistant", "echo: "))
    assert stored[:1] + stored[2:] == [("user", "/stall 30000"), ("user", "after"), ("assistant", "echo: after")]


def test_chat_ctrl_c_at_the_idle_prompt_exits_at_once(tmp_path: Path) -> None:
    import signal
    import time

    chat = _Chat("--store", str(tmp_path / "chat.db"), "--workspace", str(tmp_path / "ws"))
    chat.wait_for("you> ")
    started = time.monotonic()
    chat.proc.send_signal(signal.SIGINT)  # stdin stays open: nothing but the signal ends the prompt
    assert chat.proc.wait(timeout=30) == 130
    assert time.monotonic() - started < 10


def test_run_is_one_shot_a_fresh_session_each_time_unless_session_is_given(tmp_path: Path) -> None:
    import sqlite3

    store = str(tmp_path / "s.db")
    common = ("--store", store, "--workspace", str(tmp_path / "ws"), "--sandbox", "off", "--no-trace")
    first = hookwire("run", "one", *common)
    assert first.returncode == 0, first.stderr
    # The next two at the same time (each pays the litellm import; the store takes several processes): the first
    # run's session is in the store before either starts, so a run that resumed the latest session would show.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [subprocess.Popen([HOOKWIRE, "run", *args, *common], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for args in (("two",), ("three", "--session", "kept"))]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with sqlite3.connect(store) as db:
        counts = dict(db.execute("SELECT session_id, count(*) FROM messages GROUP BY session_id").fetchall())
    assert counts.pop("kept") == 2
    assert sorted(counts.values()) == [2, 2] and all(sid.startswith("run") for sid in counts)
