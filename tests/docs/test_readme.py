"""Every command and example in README.md runs as written (real processes, real turns)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _commands() -> list[str]:
    cmds = []
    for block in _blocks("console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                cmds.append(re.sub(r"\s+#.*$", "", line[2:]).strip())
    return cmds


def _run(cmd: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_readme_names_the_two_setup_commands() -> None:
    assert {"make demo", "make test"} <= set(_commands())


HOOKWIRE_COMMANDS = [c for c in _commands() if c.startswith(".venv/bin/hookwire") and " ext new " not in c]
#: `hookwire run` pays the litellm import: its one run is test_readme_run_command_succeeds_answers_and_prints_the_trace.
OTHER_HOOKWIRE_COMMANDS = [c for c in HOOKWIRE_COMMANDS if " run " not in c]


@pytest.mark.parametrize("command", OTHER_HOOKWIRE_COMMANDS)
def test_readme_hookwire_command_succeeds(command: str) -> None:
    proc = _run(command.replace(".venv/bin/hookwire", HOOKWIRE, 1), ROOT)
    assert proc.returncode == 0, f"{command}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.strip(), f"{command} printed nothing"


def test_readme_run_command_succeeds_answers_and_prints_the_trace(tmp_path: Path) -> None:
    (cmd,) = [c for c in HOOKWIRE_COMMANDS if " run " in c]
    # the transcript and the workspace kept out of the checkout
    cmd = cmd.replace(".venv/bin/hookwire", HOOKWIRE, 1) + f" --store {tmp_path / 's.db'} --workspace {tmp_path / 'ws'}"
    proc = _run(cmd, ROOT)
    assert proc.returncode == 0, f"{cmd}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "tools_calculator -> 42" in proc.stdout, proc.stdout + proc.stderr
    assert "hook trace:" in proc.stdout


def test_readme_ext_new_scaffolds_an_extension_whose_test_passes(tmp_path: Path) -> None:
    (cmd,) = [c for c in _commands() if " ext new " in c]
    target = tmp_path / "my-ext"
    proc = _run(cmd.replace(".venv/bin/hookwire", HOOKWIRE, 1).replace("/tmp/my-ext", str(target)), ROOT)
    assert proc.returncode == 0, proc.stderr
    tests = _run(f"{sys.executable} -m pytest -q -p no:cacheprovider", target)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout


def test_readme_make_demo_runs_the_tour() -> None:
    proc = _run("make -s demo", ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "tools_calculator -> 98" in proc.stdout
    assert "DENIED" in proc.stdout  # the guard blocked the destructive tool


def test_readme_extension_example_serves_its_tools_and_hooks(tmp_path: Path) -> None:
    (code,) = [b for b in _blocks("python") if "ext.serve()" in b]
    (manifest,) = [b for b in _blocks("yaml") if "greeter.py" in b]
    (tmp_path / "greeter.py").write_text(code)
    (tmp_path / "manifest.yaml").write_text(manifest)
    script = f"""
import asyncio
from host import ExtensionManager, TurnSnapshot
async def main():
    async with ExtensionManager() as mgr:
        await mgr.load({str(tmp_path / "manifest.yaml")!r})
        print(await mgr.execute_tool("greeter_greet", {{"name": "World"}}))
        seen = []
        print(await mgr.execute_tool("greeter_count_to", {{"n": 3}}, on_preliminary=seen.append), seen)
        merged = await mgr.before_turn(TurnSnapshot(system="S"))
        print(merged.patch.max_steps, repr(merged.patch.system))
asyncio.run(main())
"""
    (tmp_path / "drive.py").write_text(script)
    proc = _run(f"{sys.executable} drive.py", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["Hello, World!", "3 [1, 2]", "4 'S\\nBe brief.'"]


def test_readme_harness_example_passes_with_plain_pytest(tmp_path: Path) -> None:
    (code,) = [b for b in _blocks("python") if "extension_harness" in b]
    (tmp_path / "test_notes.py").write_text(code)
    proc = _run(f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:asyncio test_notes.py", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_readme_host_app_example_runs_a_turn(tmp_path: Path) -> None:
    (code,) = [b for b in _blocks("python") if "class MyAgent" in b]
    code = code.replace("sample_extensions/guard/manifest.yaml", str(ROOT / "sample_extensions/guard/manifest.yaml"))
    (tmp_path / "app.py").write_text(code)
    proc = _run(f"{sys.executable} app.py", tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the tool's real output ("hi"), then the status line: a tool that failed would print its error instead
    assert re.fullmatch(r"Tool results: echo -> hi\.completed req_[0-9a-f]+ \['beforeTurn', 'beforeToolCall'\]\n",
                        proc.stdout), proc.stdout
