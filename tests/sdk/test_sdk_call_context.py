"""`extension_sdk.current_call()` names the session and request of the call in progress."""

from __future__ import annotations

from pathlib import Path

from host import CallContext, ExtensionManager, TurnSnapshot, parse_manifest

FIXTURE = '''
from extension_sdk import Extension, current_call

ext = Extension("caller", "1.0.0")
seen = {}

@ext.hook("beforeTurn")
def before_turn(snapshot):
    seen["hook"] = current_call()
    return {"system": f"{current_call().session_id}/{current_call().request_id}"}

@ext.tool(description="the call context of a sync tool, run in a worker thread")
def whoami(args):
    return list(current_call())

@ext.tool(description="the call context of an async tool")
async def whoami_async(args):
    return list(current_call())

if __name__ == "__main__":
    ext.serve()
'''


async def _manager_with_fixture(tmp_path: Path) -> ExtensionManager:
    (tmp_path / "caller.py").write_text(FIXTURE)
    mgr = ExtensionManager(sandbox="off")
    await mgr.__aenter__()
    manifest = parse_manifest({"name": "caller", "command": ["python", "caller.py"]}, str(tmp_path / "m.yaml"))
    await mgr.load(manifest)
    return mgr


async def test_a_hook_sees_the_session_and_request_of_its_turn(tmp_path: Path) -> None:
    mgr = await _manager_with_fixture(tmp_path)
    try:
        merged = await mgr.before_turn(TurnSnapshot(system=""), CallContext(session_id="s1", request_id="r1"))
        assert merged.patch.system == "s1/r1"
    finally:
        await mgr.close()


async def test_sync_and_async_tools_see_the_call_context(tmp_path: Path) -> None:
    mgr = await _manager_with_fixture(tmp_path)
    try:
        ctx = CallContext(session_id="s2", request_id="r2")
        assert await mgr.execute_tool("caller_whoami", {}, context=ctx) == ["s2", "r2"]
        assert await mgr.execute_tool("caller_whoami_async", {}, context=ctx) == ["s2", "r2"]
    finally:
        await mgr.close()
