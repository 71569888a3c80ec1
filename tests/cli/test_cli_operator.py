"""Issue 14 §3, a CLI operators like: the real `hookwire` console script run as a user would (pipes and a pty).

Each `hookwire run`/`chat` here pays the litellm import, so there are few of them; the rest fail or finish before
litellm is needed.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from test_cli import HOOKWIRE, ROOT, ROUTER, TOOLS, hookwire

AUDIT = str(ROOT / "sample_extensions/audit_log/manifest.yaml")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Pty:
    """A command on a pseudo-terminal (stdin, stdout and stderr all the pty, as in a shell)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        master, slave = pty.openpty()
        os.set_blocking(master, False)
        full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "xterm-256color", "COLUMNS": "160",
                "LINES": "50", **(env or {})}
        full.pop("NO_COLOR", None)
        self.proc = subprocess.Popen([HOOKWIRE, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=full,
                                     close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = b""

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.raw += os.read(self.master, 65536)
            except OSError:  # EIO: the child closed the terminal
                pass

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def wait_for(self, needle: str, count: int = 1, timeout: float = 90) -> None:
        end = time.monotonic() + timeout
        while self.text.count(needle) < count:
            assert time.monotonic() < end, f"no {needle!r} (x{count}) in {self.text[-2000:]!r}"
            self._pump(0.05)

    def write(self, data: str) -> None:
        os.write(self.master, data.encode())

    def finish(self, timeout: float = 90) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < end, self.text[-2000:]
            self._pump(0.05)
        self._pump(0.1)
        os.close(self.master)
        return self.proc.returncode


# -- conventions: version, exit codes, --debug anywhere, pipes ---------------------------------------------


def test_version_prints_the_distribution_and_protocol_version() -> None:
    from importlib import metadata

    proc = hookwire("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"hookwire {metadata.version('hookwire')} (protocol v1)\n"


def test_usage_error_exits_2() -> None:
    proc = hookwire("run")
    assert proc.returncode == 2
    assert "the following arguments are required: prompt" in proc.stderr


def test_a_missing_manifest_exits_3_and_debug_after_the_subcommand_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    proc = hookwire("run", "hi", "-e", missing, "--store", str(tmp_path / "s.db"), "--debug")
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr and f"{missing}: no such file" in proc.stderr


def test_an_extension_that_cannot_start_exits_4(tmp_path: Path) -> None:
    manifest = tmp_path / "dies.yaml"
    manifest.write_text("name: dies\ncommand: [python, -c, 'import sys; sys.exit(3)']\n")
    proc = hookwire("run", "hi", "-e", str(manifest), "--sandbox", "off", "--store", str(tmp_path / "s.db"),
                    "--workspace", str(tmp_path / "ws"))
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith("hookwire: error: ") and "dies" in proc.stderr


def test_doctor_into_a_closed_pipe_leaves_quietly() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before doctor writes a byte, as `| head -0` would leave it
    try:
        proc = subprocess.run([HOOKWIRE, "doctor"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert proc.stderr == ""
    assert proc.returncode == 141  # what a shell reports for a command that met SIGPIPE


def test_doctor_piped_to_head_prints_its_first_line_and_nothing_on_stderr() -> None:
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {HOOKWIRE} doctor | head -1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout == "hookwire protocol   v1\n"
    assert proc.stderr == ""


# -- --json shapes ----------------------------------------------------------------------------------------


def test_doctor_json_shape() -> None:
    from host import sandbox_capabilities

    proc = hookwire("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert list(report) == ["protocol_version", "python", "executable", "packages", "platform", "euid",
                            "sandbox_layers"]
    assert report["protocol_version"] == 1
    assert report["executable"] == sys.executable
    assert list(report["packages"]) == ["hookwire", "grpcio", "protobuf", "pydantic", "litellm", "PyYAML"]
    assert report["packages"]["grpcio"] == "1.85.1"
    egress = sandbox_capabilities()["layers"]["egress_proxy"]
    assert report["sandbox_layers"]["egress_proxy"] == {"available": egress["available"], "detail": egress["detail"]}


def test_validate_json_lists_every_problem_with_did_you_mean_and_the_command_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncommand: [./run.sh]\npermisions: {}\nlimits: {memoryMb: lots}\n"
                   "hooks: {onChunck: {}}\n")
    proc = hookwire("ext", "validate", "--json", TOOLS, str(bad))
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    good, invalid = report["files"]
    assert good == {"file": TOOLS, "valid": True, "name": "tools", "version": "1.0.0",
                    "target": "python -m sample_extensions.tools", "problems": []}
    assert (invalid["file"], invalid["valid"], invalid["name"]) == (str(bad), False, "x")
    assert invalid["problems"] == [
        {"field": "hooks.onChunck", "did_you_mean": "onChunk",
         "message": "Input should be 'beforeTurn', 'beforeToolCall', 'afterToolCall', 'onStepFinish' or 'onChunk'"},
        {"field": "limits.memoryMb", "did_you_mean": None,
         "message": "Input should be a valid integer, unable to parse string as an integer"},
        {"field": "permisions", "did_you_mean": "permissions", "message": "Extra inputs are not permitted"},
        {"field": "command", "did_you_mean": None, "message": f"'./run.sh': no such file (in {tmp_path})"},
    ]


def test_validate_plain_names_each_problem_once_with_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "typo.yaml"
    bad.write_text("name: x\ncommand: [python, x.py]\ntimeout: {hookMs: 5}\npermissions: {workspac: read}\n")
    proc = hookwire("ext", "validate", str(bad))
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"invalid  {bad}: 3 problems",
        f"  {bad}: permissions.workspac: Extra inputs are not permitted (did you mean 'permissions.workspace'?)",
        f"  {bad}: timeout: Extra inputs are not permitted (did you mean 'timeouts'?)",
        f"  {bad}: command: script 'x.py': no such file (in {tmp_path})",
    ]


def test_validate_refuses_a_command_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "ext.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    manifest = tmp_path / "m.yaml"
    manifest.write_text("name: x\ncommand: [./ext.sh]\n")
    proc = hookwire("ext", "validate", str(manifest))
    assert proc.returncode == 3
    assert f"{manifest}: command: './ext.sh' is not executable (chmod +x)" in proc.stderr
    script.chmod(0o755)
    assert hookwire("ext", "validate", str(manifest)).returncode == 0


def test_schema_json_is_the_schema() -> None:
    from host.extensions._manifest import manifest_json_schema

    assert json.loads(hookwire("ext", "schema", "--json").stdout) == manifest_json_schema()


def test_run_json_shape_with_a_row_per_observed_hook(tmp_path: Path) -> None:
    proc = hookwire("run", '/tool tools_calculator {"expression": "6*7"}', "-e", TOOLS, "-e", AUDIT, "--json",
                    "--session", "j1", "--sandbox", "off", "--store", str(tmp_path / "s.db"),
                    "--workspace", str(tmp_path / "ws"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # the whole of stdout: the stream is not echoed with --json
    assert list(report) == ["status", "session_id", "request_id", "text", "error", "failed_open", "provenance",
                            "denied", "trace"]
    assert (report["status"], report["session_id"], report["text"]) == (
        "completed", "j1", "Tool results: tools_calculator -> 42.")
    assert report["request_id"].startswith("req_") and report["error"] is None and report["failed_open"] == []
    rows = [(r["hook"], r["extension"], r["outcome"], r["detail"]) for r in report["trace"]]
    assert rows == [
        ("tool:calculator", "tools", "ok", ""),
        ("afterToolCall", "audit_log", "ok", "1 observation(s) delivered in order"),
        ("onStepFinish", "audit_log", "ok", "2 observation(s) delivered in order"),
    ]


# -- a failed turn, and the terminal ----------------------------------------------------------------------


def test_a_failed_run_on_a_terminal_shows_progress_the_trace_table_and_its_error_once(tmp_path: Path) -> None:
    """One `hookwire run` on a pty (each pays the litellm import): a spinner says what is happening, the trace is a
    table with a row per hook, and the model's error is printed once, without litellm's banners; exit 5."""
    term = Pty("run", "hello", "-e", ROUTER, "--model", "nosuchprovider/x", "--sandbox", "off",
               "--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path / "ws"))
    assert term.finish() == 5, term.text
    plain = ANSI.sub("", term.text)
    assert "starting extensions: router · importing litellm" in plain
    assert ANSI.search(term.text)  # colour
    assert plain.count("LLM Provider NOT provided") == 1, plain
    assert "[turn error: litellm.BadRequestError: LLM Provider NOT provided" in plain
    assert "Give Feedback" not in plain and "Get Help" not in plain
    header = next(line for line in plain.splitlines() if "hook" in line and "extension" in line)
    assert header.split() == ["hook", "┃", "extension", "┃", "latency", "┃", "outcome", "┃", "detail"]
    row = next(line.split() for line in plain.splitlines() if line.lstrip().startswith("beforeTurn"))
    assert row[:4] == ["beforeTurn", "│", "router", "│"] and row[6:8] == ["│", "ok"]  # latency "N.NN ms" between


def test_chat_on_a_terminal_recalls_history_with_up_and_saves_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    common = ("--sandbox", "off", "--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path / "ws"),
              "--no-trace", "--session", "h")
    term = Pty("chat", *common, env={"XDG_STATE_HOME": str(state), "HOME": str(tmp_path)})
    term.wait_for("you> ")
    term.write("first line\r")
    term.wait_for("echo: first line")
    term.wait_for("you> ", count=2)
    term.write("\x1b[A\r")  # Up: the line before, sent again
    term.wait_for("echo: first line", count=2)
    term.wait_for("you> ", count=3)
    term.write("/help\r")
    term.wait_for("/quit, /exit")
    term.write("/quit\r")
    assert term.finish() == 0
    history = (state / "hookwire" / "chat_history").read_text().splitlines()
    assert history[-3:] == ["first line", "/help", "/quit"]  # readline keeps one of two equal lines in a row
