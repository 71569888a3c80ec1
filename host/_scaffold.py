"""`hookwire ext new NAME`: scaffold a working extension with its manifest and a passing test."""

from __future__ import annotations

from pathlib import Path

from .extensions._manifest import sanitize_name

_EXTENSION = '''\
"""{name}: a hookwire extension (scaffolded by `hookwire ext new`)."""

from extension_sdk import Extension

ext = Extension("{name}", "0.1.0", description="Describe what {name} does")


@ext.tool(
    description="Greets someone by name",
    parameters={{"type": "object", "properties": {{"name": {{"type": "string"}}}}, "required": ["name"]}},
)
def greet(args, host):
    return f"Hello, {{args['name']}}!"


@ext.hook("beforeTurn")
def before_turn(snapshot, host):
    # Return the TurnConfig fields to change (camelCase), or None to change nothing.
    return {{"system": snapshot["system"] + "\\nBe brief."}}


@ext.hook("afterToolCall")
def after_tool_call(snapshot, host):
    print(f"{{snapshot['toolName']}} took {{snapshot['durationMs']:.1f}} ms", flush=True)


if __name__ == "__main__":
    ext.serve()
'''

_MANIFEST = """\
name: {name}
version: 0.1.0
description: Describe what {name} does
command: [python, extension.py]     # run from this directory; `python` is the host's interpreter
permissions:
  workspace: none                   # none | read | read-write
  messages: none                    # none | read
  network: []                       # no network at all
hooks:
  beforeTurn: {{timeoutMs: 2000, failure: open}}
limits: {{memoryMb: 512, cpuSeconds: 60, openFiles: 256}}
env: []                             # host environment variables passed through by name
"""

_TEST = '''\
"""Tests for {name}: its real hooks and tools, served in-process by extension_sdk.testing (no host process).

The `extension_harness` fixture comes with the SDK (plain pytest, no plugin to add): it serves `ext` on a private
socket, calls it through a real gRPC client and gives its handlers a fake host (`h.host.files`, `.messages`, ...).
"""

from extension import ext


def test_greet_tool_greets_by_name(extension_harness):
    h = extension_harness(ext)
    assert h.call_tool("greet", {{"name": "World"}}) == "Hello, World!"


def test_before_turn_appends_to_the_system_prompt(extension_harness):
    h = extension_harness(ext)
    assert h.before_turn(system="You help.") == {{"system": "You help.\\nBe brief."}}
'''

_README = """\
# {name}

A hookwire extension. Try it:

    hookwire ext validate manifest.yaml
    hookwire ext list -e manifest.yaml
    hookwire run "/tool {prefix}_greet {{\\"name\\": \\"World\\"}}" -e manifest.yaml
    python -m pytest -q test_extension.py      # no host needed: extension_sdk.testing serves it in-process
"""


def scaffold_extension(name: str, directory: Path) -> list[Path]:
    """Write extension.py, manifest.yaml, test_extension.py and README.md into `directory`.

    Refuses to overwrite an existing non-empty directory.
    """
    prefix = sanitize_name(name)
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} exists and is not empty")
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "extension.py": _EXTENSION.format(name=name),
        "manifest.yaml": _MANIFEST.format(name=name),
        "test_extension.py": _TEST.format(name=name),
        "README.md": _README.format(name=name, prefix=prefix),
    }
    written = []
    for filename, text in files.items():
        path = directory / filename
        path.write_text(text)
        written.append(path)
    return written


def next_step_line(directory: Path) -> str:
    """What to run next, with this interpreter's path (so it works without an activated venv)."""
    import importlib.util
    import shlex
    import sys

    python = shlex.quote(sys.executable)
    run = f"cd {shlex.quote(str(directory))} && {python} -m pytest -q"
    if importlib.util.find_spec("pytest") is None:
        return f"next: {python} -m pip install pytest && {run}"
    return f"next: {run}"
