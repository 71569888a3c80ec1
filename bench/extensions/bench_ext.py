"""Benchmark fixture extension: no-op handlers for the hooks named by --hooks, and an `add` tool with --tool.

    python bench/extensions/bench_ext.py --name b1 --hooks beforeToolCall,onChunk --tool
"""

from __future__ import annotations

import argparse
from typing import Any

from extension_sdk import Extension


def build(name: str, hooks: list[str], with_tool: bool) -> Extension:
    ext = Extension(name, "0.1.0", description="hookwire benchmark fixture")

    # async: the hooks measure the protocol and the host, like the async echo baseline. A sync handler adds a
    # worker-thread hop (~0.1 ms: the SDK runs sync handlers off the loop so a blocking one can't stall the others).
    async def noop(snapshot: dict[str, Any]) -> None:
        return None

    for hook in hooks:
        ext.hook(hook)(noop)
    if with_tool:

        @ext.tool(description="Adds two integers", parameters={
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]})
        async def add(args: dict[str, Any]) -> int:
            return int(args["a"]) + int(args["b"])

    return ext


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--hooks", default="")
    parser.add_argument("--tool", action="store_true")
    args, _ = parser.parse_known_args()
    hooks = [h for h in args.hooks.split(",") if h]
    build(args.name, hooks, args.tool).serve()


if __name__ == "__main__":
    main()
