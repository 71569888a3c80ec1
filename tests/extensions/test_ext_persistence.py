"""ExtensionManager persistence: what `load` loads is remembered in the store and `restore()` brings it back."""

from __future__ import annotations

from pathlib import Path

from ext_helpers import write_manifest

from host import Agent, ExtensionManager, MessageStore


async def test_restore_after_a_restart_loads_what_was_loaded_once_and_is_idempotent(
        tmp_path: Path, tools_manifest: Path) -> None:
    store = MessageStore(str(tmp_path / "s.db"))
    try:
        async with ExtensionManager(sandbox="off", store=store) as first:
            await first.load(tools_manifest)
        async with ExtensionManager(sandbox="off", store=store) as second:
            restored = await second.restore()
            again = await second.restore()
            assert [i.name for i in restored] == ["test-tools"] and again == []
            assert [i.name for i in second.extensions()] == ["test-tools"]
            assert "test_tools_add" in second.tool_names()
    finally:
        await store.close()


async def test_an_unloaded_extension_is_not_restored(tmp_path: Path, tools_manifest: Path) -> None:
    store = MessageStore(str(tmp_path / "s.db"))
    try:
        async with ExtensionManager(sandbox="off", store=store) as first:
            await first.load(tools_manifest)
            hooks = write_manifest(tmp_path, "hooks-ok", "hooks_ext.py", "--mode", "ok", "--name", "hooks-ok")
            await first.load(hooks)
            assert await first.unload("test-tools") is True
        async with ExtensionManager(sandbox="off", store=store) as second:
            assert [i.name for i in await second.restore()] == ["hooks-ok"]
    finally:
        await store.close()


async def test_an_agent_restores_an_extension_loaded_at_runtime_from_its_store(
        tmp_path: Path, tools_manifest: Path) -> None:
    hooks = write_manifest(tmp_path, "hooks-ok", "hooks_ext.py", "--mode", "ok", "--name", "hooks-ok")
    db = str(tmp_path / "agent.db")
    async with Agent(store=db, extensions=[hooks], sandbox="off") as agent:
        assert agent.manager is not None
        await agent.manager.load(tools_manifest)
    async with Agent(store=db, extensions=[hooks], sandbox="off") as agent:
        assert agent.manager is not None
        assert [i.name for i in agent.manager.extensions()] == ["hooks-ok", "test-tools"]
    async with Agent(store=db, session_id="other", extensions=[hooks], sandbox="off") as agent:
        assert agent.manager is not None  # another session of the same store restores nothing of this one's
        assert [i.name for i in agent.manager.extensions()] == ["hooks-ok"]
