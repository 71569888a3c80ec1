"""Helpers for the fault-injection suite: manifests for the misbehaving fixtures, a host agent on a SQLite store,
and the check every scenario ends with (the session's persisted messages are intact and the next turn works)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fixtures.manifests import fixture_manifest
from fixtures.processes import group_gone, group_members, process_gone, wait_until  # noqa: F401 - re-exported for the tests

from host import Agent, ChatResponseResult, tool

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "fault"


@tool(description="Echoes a message back", parameters={"type": "object", "properties": {"msg": {"type": "string"}}})
def echo(msg: str = "") -> str:
    return f"pong: {msg}"


class FaultHost(Agent):
    """The host under test: one local tool (`echo`); extension tools come from the manager."""

    def get_tools(self) -> dict[str, Any]:
        return {"echo": echo}


def manifest(tmp_path: Path, script: str, *args: str, name: str = "misbehave", **fields: Any) -> Path:
    """A manifest for a fixture script, with extra manifest fields merged in (dicts merged one level)."""
    return fixture_manifest(tmp_path, FIXTURES, name, script, *args, start_ms=20000, **fields)


def mode(tmp_path: Path, mode_name: str, *args: str, **fields: Any) -> Path:
    """A manifest for misbehave_ext.py in one mode."""
    return manifest(tmp_path, "misbehave_ext.py", "--mode", mode_name, *args, **fields)


def raw(tmp_path: Path, mode_name: str, *args: str, **fields: Any) -> Path:
    """A manifest for raw_ext.py (no SDK) in one mode."""
    return manifest(tmp_path, "raw_ext.py", "--mode", mode_name, *args, name="raw", **fields)


@asynccontextmanager
async def host(tmp_path: Path, *manifests: Path, sandbox: str = "off", workspace: Path | None = None,
               cls: type[FaultHost] = FaultHost) -> AsyncIterator[FaultHost]:
    """A started host agent with a SQLite store file in tmp_path, loading the given extensions."""
    agent = cls(session_id=SESSION, store=tmp_path / "store.db", extensions=list(manifests), sandbox=sandbox,
                workspace=workspace)
    async with agent:
        yield agent


def ext_pid(agent: Agent) -> int:
    pid = agent.manager.extensions()[0].pid
    assert pid is not None
    return pid


async def persisted_and_next_turn_works(tmp_path: Path, result: ChatResponseResult | None,
                                        sent: str | None = None) -> list[dict[str, Any]]:
    """Reopen the store with a fresh host (no extensions): the turn's messages are persisted intact, the
    next turn completes. Returns the persisted messages (before the next turn)."""
    async with FaultHost(session_id=SESSION, store=tmp_path / "store.db") as agent:
        messages = await agent.store.messages()
        roles = [m["role"] for m in messages]
        assert roles and roles[0] == "user", roles
        if sent is not None:
            assert messages[0]["content"] == sent
        if result is not None:
            stored = next(m for m in messages if m["id"] == result.message["id"])
            assert stored["parts"] == result.message["parts"]
            assert stored.get("content") == result.message.get("content")
        nxt = await agent.chat("next turn")
        assert nxt.status == "completed", nxt.error
        assert nxt.message["content"] == "echo: next turn"
        after = await agent.store.messages()
        assert after[: len(messages)] == messages
        assert [m["role"] for m in after[len(messages):]] == ["user", "assistant"]
    return messages


def tool_output(result: ChatResponseResult, tool_name: str) -> Any:
    part = next(p for p in result.message["parts"] if p.get("toolName") == tool_name)
    return part.get("output", part.get("errorText"))


def scratch_dir(agent: Agent) -> Path:
    """The first extension's scratch dir (HOOKWIRE_SCRATCH_DIR)."""
    ext = next(iter(agent.manager._registry.exts.values()))  # noqa: SLF001 - the test needs the runtime path
    assert ext.scratch_dir is not None
    return Path(ext.scratch_dir)
