"""`make demo` / `hookwire demo`: real turns on the embedded model with the sample extensions loaded.

Each scene prints what the user would type, the streamed answer, and the turn's hook trace, so the
tour shows every hook, the beforeTurn merge with provenance, extension tools (Python and Node.js),
a streaming tool, a guard's decision, and an audit log written through the HostBridge.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._cli_cold import LitellmImport
from ._terminal_text import terminal_safe
from ._trace_format import format_trace, render_chunk
from .extensions._manager import ExtensionManager
from .turn._agent import Agent
from .turn._tools import tool

SAMPLES = Path(__file__).resolve().parent.parent / "sample_extensions"
DEMO_EXTENSIONS = ["router", "guard", "tools", "audit_log", "token_meter", "node_echo"]


@tool(
    description="Delete a file from the notes folder",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
def delete_file(args: dict[str, Any]) -> str:
    return f"deleted {args['path']}"


class DemoAgent(Agent):
    """The host app of the demo: one destructive host tool, and it prints the stream as it comes."""

    def get_system_prompt(self) -> str:
        return "You are the hookwire demo assistant."

    def get_tools(self) -> dict[str, Any]:
        return {"delete_file": delete_file}

    def on_chunk(self, ctx: Any) -> None:
        sys.stdout.write(render_chunk(ctx.chunk))
        sys.stdout.flush()


SCENES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("A plain turn; the router sets temperature and a persona from the request body",
     "Hello there", {"mode": "precise", "persona": "a terse ship's navigator"}),
    ("Two extension tools in parallel: calculator and unit converter (Python)",
     '/tool tools_calculator {"expression": "2*(3+4)**2"}\n'
     '/tool tools_convert_units {"value": 10, "from": "km", "to": "mi", "quantity": "length"}', None),
    ("A streaming tool: preliminary results before the final one",
     '/tool tools_count_to {"n": 3}', None),
    ("A tool served by the Node.js extension (written against proto/, no SDK)",
     '/tool node_echo_echo {"text": "language-neutral"}', None),
    ("The guard extension blocks a destructive host tool (fail-closed decision)",
     '/tool delete_file {"path": "notes.txt"}', None),
]


async def run_demo(sandbox: str = "auto") -> int:
    manifests = [SAMPLES / name / "manifest.yaml" for name in DEMO_EXTENSIONS]
    available = [m for m in manifests if m.exists()]
    if shutil.which("node") is None or not (SAMPLES / "node_echo" / "node_modules").exists():
        available = [m for m in available if m.parent.name != "node_echo"]
        print("(node or its modules are missing: the Node.js extension sits this demo out — run `make node-deps`)")
    workdir = Path(tempfile.mkdtemp(prefix="hookwire-demo-"))
    print(f"hookwire demo — model hookwire/scripted (offline), sandbox {sandbox}, workspace {workdir / 'workspace'}")
    async with ExtensionManager(sandbox=sandbox) as mgr:  # type: ignore[arg-type]
        # litellm is imported (and its first call set up) in a thread while the extensions start, as `hookwire run`
        # does: the main thread imports nothing meanwhile (host/_cli_cold.py explains why that matters)
        litellm_import = LitellmImport()
        infos = await mgr.load_all(available)
        print("\nloaded extensions:")
        for info in infos:
            hooks = ", ".join(info.hooks) or "-"
            tools = ", ".join(t.name for t in mgr.tools() if t.extension == info.name) or "-"
            print(terminal_safe(f"  {info.name:<12} hooks: {hooks:<48} tools: {tools}"))
        await litellm_import.wait()
        async with DemoAgent(
            session_id="demo", store=str(workdir / "demo.db"), workspace=workdir / "workspace", manager=mgr
        ) as agent:
            for n, (title, prompt, body) in enumerate(SCENES, 1):
                print(f"\n=== {n}. {title}")
                shown = prompt.replace("\n", "\n      ")
                print(f"user> {shown}" + (f"   (body: {json.dumps(body)})" if body else ""))
                sys.stdout.write("assistant> ")
                result = await agent.chat(prompt, body=body)
                print(f"\n[status: {result.status}]")
                print(format_trace(result.trace, result.provenance))
            audit = sorted((workdir / "workspace").rglob("*.jsonl"))
            print("\n=== What the audit_log extension wrote through the HostBridge:")
            for path in audit:
                lines = path.read_text().splitlines()
                last = lines[-1][:160] if lines else ""
                print(terminal_safe(f"  {path.relative_to(workdir)}: {len(lines)} lines; last: {last}"))
            usage = await agent.get_context("token_meter.usage")
            print(terminal_safe(f"\n=== The token_meter extension's context block: {usage}"))
            print(f"\n=== Transcript persisted in SQLite: {len(await agent.messages())} messages")
    return 0
