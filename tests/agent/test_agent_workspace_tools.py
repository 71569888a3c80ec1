"""Think's built-in workspace tools, offered to the model when the agent has a workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_helpers import Recorder, requests

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "sample_extensions" / "guard" / "manifest.yaml"


def outputs(result: Any) -> list[Any]:
    return [p.get("output", p.get("errorText")) for p in result.message["parts"] if p.get("toolCallId")]


async def test_workspace_tools_are_offered_and_write_read_edit_delete_work_through_turns(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    async with Recorder(workspace=ws) as agent:
        wrote = await agent.chat('/tool write {"path": "/notes/todo.txt", "content": "buy milk\\ncall bob"}')
        edited = await agent.chat('/tool edit {"path": "notes/todo.txt", "old_string": "bob", "new_string": "ann"}')
        read = await agent.chat('/tool read {"path": "notes/todo.txt"}')
        found = await agent.chat('/tool find {"pattern": "**/*.txt"}\n/tool grep {"pattern": "milk"}')
        deleted = await agent.chat('/tool delete {"path": "notes/todo.txt"}\n/next\n'
                                   '/tool delete {"path": "notes/todo.txt"}')
    offered = [t["function"]["name"] for t in requests()[0]["tools"]]
    assert offered == ["read", "write", "edit", "list", "find", "grep", "delete", "echo"]
    assert outputs(wrote) == [{"path": "/notes/todo.txt", "bytesWritten": 17, "lines": 2}]
    assert outputs(edited) == [{"path": "notes/todo.txt", "replacements": 1}]
    assert outputs(read) == [{"path": "notes/todo.txt", "content": "1\tbuy milk\n2\tcall ann", "totalLines": 2}]
    assert outputs(found) == [{"pattern": "**/*.txt", "files": ["notes/todo.txt"]},
                              {"matches": [{"path": "notes/todo.txt", "line": 1, "text": "buy milk"}]}]
    assert outputs(deleted) == [{"path": "notes/todo.txt", "deleted": True}, {"path": "notes/todo.txt", "deleted": False}]
    assert not (ws / "notes" / "todo.txt").exists()


async def test_workspace_tools_refuse_paths_out_of_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    async with Recorder(workspace=tmp_path / "ws") as agent:
        result = await agent.chat('/tool read {"path": "../secret.txt"}')
    assert outputs(result) == [{"error": "'../secret.txt' is outside the workspace"}]


async def test_workspace_tools_off_with_one_attribute_and_absent_without_a_workspace(tmp_path: Path) -> None:
    class NoBuiltins(Recorder):
        workspace_tools = False

    async with NoBuiltins(workspace=tmp_path / "ws") as agent:
        await agent.chat("hi")
    async with Recorder() as agent:
        await agent.chat("hi")
    assert [[t["function"]["name"] for t in r["tools"]] for r in requests()] == [["echo"], ["echo"]]


async def test_the_guard_sample_blocks_the_destructive_workspace_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("precious")
    async with Recorder(workspace=ws, extensions=[GUARD], sandbox="off") as agent:
        result = await agent.chat('/tool delete {"path": "keep.txt"}\n/tool write {"path": "keep.txt", "content": "x"}\n'
                                  '/tool edit {"path": "keep.txt", "old_string": "p", "new_string": "q"}\n'
                                  '/tool read {"path": "keep.txt"}')
    out = outputs(result)
    assert all("guard" in o and "read-only" in o for o in out[:3]), out
    assert out[3] == {"path": "keep.txt", "content": "1\tprecious", "totalLines": 1}
    assert (ws / "keep.txt").read_text() == "precious"
