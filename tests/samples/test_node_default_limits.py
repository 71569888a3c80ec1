"""The Node.js sample starts and answers under the default limits, fully sandboxed: memory is limited as resident
memory (a memory cgroup, or RLIMIT_DATA without one), never as address space, which V8 reserves ~1 GB of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from host import ExtensionManager, Limits, load_manifest, sandbox_capabilities
import host.sandbox._plan as sandbox_module

from ._harness import REPO, node_missing_reason

MANIFEST = REPO / "sample_extensions" / "node_echo" / "manifest.yaml"

_reason = node_missing_reason()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"node_echo cannot run: {_reason}")


async def _echo_under(mgr: ExtensionManager) -> tuple[str, list[str]]:
    manifest = load_manifest(MANIFEST)
    assert manifest.limits == Limits()  # the sample sets no limit of its own: the defaults apply
    info = await mgr.load(manifest)
    result = await mgr.execute_tool("node_echo_echo", {"text": "hookwire"})
    return str(result), info.sandbox


async def test_node_sample_answers_under_default_limits_in_the_sandbox() -> None:
    if not sandbox_capabilities()["layers"]["rlimits"]["available"]:
        pytest.skip("no rlimits here")
    async with ExtensionManager(sandbox="auto") as mgr:
        output, layers = await _echo_under(mgr)
    assert output == "node: eriwkooh"
    assert "rlimits" in layers


async def test_node_sample_answers_under_default_limits_without_a_memory_cgroup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no memory cgroup can be made, memoryMb becomes RLIMIT_DATA per process: Node still starts."""
    caps = sandbox_capabilities()
    if not caps["layers"]["rlimits"]["available"]:
        pytest.skip("no rlimits here")
    layers: dict[str, Any] = {**caps["layers"], "memory_cgroup": {"available": False, "detail": "hidden by the test"}}
    monkeypatch.setattr(sandbox_module, "sandbox_capabilities", lambda: {**caps, "layers": layers})
    async with ExtensionManager(sandbox="auto") as mgr:
        output, enforced = await _echo_under(mgr)
    assert output == "node: eriwkooh"
    assert "memory_cgroup" not in enforced


def test_plan_limits_memory_per_process_only_without_a_memory_cgroup(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    caps = sandbox_capabilities()
    if not caps["layers"]["rlimits"]["available"]:
        pytest.skip("no rlimits here")
    manifest = load_manifest(MANIFEST)
    kwargs: dict[str, Any] = dict(command=["node", "x.js"], env={}, scratch_dir=tmp_path, runtime_dir=tmp_path,
                                  mode="auto")
    with_cgroup = {**caps["layers"], "memory_cgroup": {"available": True, "detail": "t", "base": str(tmp_path)}}
    monkeypatch.setattr(sandbox_module, "sandbox_capabilities", lambda: {**caps, "layers": with_cgroup})
    spec = json.loads(sandbox_module.plan_launch(manifest, **kwargs).argv[5])
    assert spec["rlimits"] == {"CPU": 300, "NOFILE": 256}
    assert spec["memory_cgroup"]["bytes"] == 512 * 1024 * 1024
    without = {**caps["layers"], "memory_cgroup": {"available": False, "detail": "t"}}
    monkeypatch.setattr(sandbox_module, "sandbox_capabilities", lambda: {**caps, "layers": without})
    spec = json.loads(sandbox_module.plan_launch(manifest, **kwargs).argv[5])
    assert spec["rlimits"] == {"CPU": 300, "NOFILE": 256, "DATA": 512 * 1024 * 1024}
    assert spec["memory_cgroup"] is None
