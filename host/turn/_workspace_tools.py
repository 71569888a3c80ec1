"""Think's built-in workspace tools for the model: read, write, edit, list, find, grep, delete on the agent's workspace.

Offered on every turn when the agent has a workspace (`Agent.workspace_tools = False` turns them off; a tool of
the same name from get_tools() wins). Paths are relative to the workspace root ("/notes.txt" and "notes.txt" are
the same file); every file is opened beneath the root without a check-then-use race
(host/extensions/_workspace_fs.py), so `..`, absolute escapes and symlinks out are refused. Failures come back as
`{"error": ...}`, as Think's tools return them. The destructive ones are named `write`, `edit` and `delete`, so a
beforeToolCall guard (sample_extensions/guard) can block them by name.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..extensions._workspace_fs import PathEscapes, open_beneath
from ._tools import Tool, tool

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_LINES = 2000
MAX_LINE_LENGTH = 2000
MAX_RESULTS = 500


class _Refused(Exception):
    pass


def _relative(path: str) -> str:
    rel = path.strip().lstrip("/")
    if not rel or rel == ".":
        raise _Refused("a file path is required")
    return rel


def _open(root: Path, rel: str, flags: int) -> int:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_beneath(root_fd, rel, flags | os.O_NONBLOCK)
    except PathEscapes:
        raise _Refused(f"{rel!r} is outside the workspace") from None
    finally:
        os.close(root_fd)


def _read_text(root: Path, rel: str) -> str | None:
    try:
        fd = _open(root, rel, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise _Refused(f"{rel} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(f"{rel} is not a regular file")
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Refused(f"{rel} is larger than {MAX_FILE_BYTES} bytes")
    return data.decode("utf-8", "replace")


def _write_text(root: Path, rel: str, content: str) -> int:
    data = content.encode()
    if len(data) > MAX_FILE_BYTES:
        raise _Refused(f"{len(data)} bytes exceed the {MAX_FILE_BYTES}-byte cap")
    parts = rel.split("/")
    for i in range(1, len(parts)):  # parents, each made beneath the root
        prefix = "/".join(parts[:i])
        try:
            os.close(_open(root, prefix, os.O_RDONLY | os.O_DIRECTORY))
        except FileNotFoundError:
            parent_fd = _open(root, "/".join(parts[: i - 1]) or ".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.mkdir(parts[i - 1], dir_fd=parent_fd)
            except FileExistsError:
                pass
            finally:
                os.close(parent_fd)
    fd = _open(root, rel, os.O_WRONLY | os.O_CREAT)
    with os.fdopen(fd, "wb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise _Refused(f"{rel} is not a regular file")
        os.ftruncate(fh.fileno(), 0)
        fh.write(data)
    return len(data)


def _files(root: Path) -> list[str]:
    """Every regular file beneath the root (symlinks not followed), as sorted relative paths."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                out.append(full.relative_to(root).as_posix())
    return out


def _guarded(fn: Any) -> Any:
    async def run(args: dict[str, Any]) -> Any:
        try:
            return await asyncio.to_thread(fn, args)
        except _Refused as exc:
            return {"error": str(exc)}
        except OSError as exc:
            return {"error": f"{args.get('path', '')}: {exc.strerror or exc}"}
    return run


def workspace_tools(root: Path) -> dict[str, Tool]:
    """The built-in tools on the workspace at `root`."""

    def read(args: dict[str, Any]) -> dict[str, Any]:
        rel = _relative(args["path"])
        text = _read_text(root, rel)
        if text is None:
            return {"error": f"File not found: {args['path']}"}
        lines = text.split("\n")
        start = max(1, int(args.get("offset") or 1)) - 1
        limit = args.get("limit")
        chosen = lines[start: start + int(limit) if limit else None][:MAX_LINES]
        numbered = "\n".join(f"{start + i + 1}\t{line[:MAX_LINE_LENGTH]}" for i, line in enumerate(chosen))
        return {"path": args["path"], "content": numbered, "totalLines": len(lines)}

    def write(args: dict[str, Any]) -> dict[str, Any]:
        size = _write_text(root, _relative(args["path"]), args["content"])
        return {"path": args["path"], "bytesWritten": size, "lines": len(args["content"].split("\n"))}

    def edit(args: dict[str, Any]) -> dict[str, Any]:
        rel = _relative(args["path"])
        old, new = args["old_string"], args["new_string"]
        text = _read_text(root, rel)
        if old == "":
            if text is not None:
                return {"error": f"{args['path']} exists; an empty old_string only creates a new file"}
            _write_text(root, rel, new)
            return {"path": args["path"], "created": True}
        if text is None:
            return {"error": f"File not found: {args['path']}"}
        count = text.count(old)
        if count != 1:
            return {"error": f"old_string found {count} times in {args['path']}; it must match exactly once"}
        _write_text(root, rel, text.replace(old, new, 1))
        return {"path": args["path"], "replacements": 1}

    def list_(args: dict[str, Any]) -> dict[str, Any]:
        rel = (args.get("path") or "").strip().lstrip("/") or "."
        fd = _open(root, rel, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as it:
                entries = [{"name": e.name, "type": "directory" if e.is_dir(follow_symlinks=False) else "file",
                            "size": 0 if e.is_dir(follow_symlinks=False) else e.stat(follow_symlinks=False).st_size}
                           for e in sorted(it, key=lambda e: e.name)]
        finally:
            os.close(fd)
        return {"path": args.get("path") or "/", "entries": entries[:MAX_RESULTS]}

    def find(args: dict[str, Any]) -> dict[str, Any]:
        pattern = args["pattern"].lstrip("/")
        files = [f for f in _files(root) if fnmatch.fnmatch(f, pattern)]
        return {"pattern": args["pattern"], "files": files[:MAX_RESULTS]}

    def grep(args: dict[str, Any]) -> dict[str, Any]:
        try:
            regex = re.compile(args["pattern"])
        except re.error as exc:
            return {"error": f"invalid pattern: {exc}"}
        include = (args.get("include") or "*").lstrip("/")
        matches: list[dict[str, Any]] = []
        for rel in _files(root):
            if not fnmatch.fnmatch(rel, include):
                continue
            text = _read_text(root, rel) or ""
            for number, line in enumerate(text.split("\n"), 1):
                if regex.search(line):
                    matches.append({"path": rel, "line": number, "text": line[:MAX_LINE_LENGTH]})
                    if len(matches) >= MAX_RESULTS:
                        return {"matches": matches, "truncated": True}
        return {"matches": matches}

    def delete(args: dict[str, Any]) -> dict[str, Any]:
        rel = _relative(args["path"]).rstrip("/")
        parent, _, name = rel.rpartition("/")
        try:
            dir_fd = _open(root, parent or ".", os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return {"path": args["path"], "deleted": False}
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                return {"error": f"{args['path']} is a directory (only files can be deleted)"}
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return {"path": args["path"], "deleted": False}
        finally:
            os.close(dir_fd)
        return {"path": args["path"], "deleted": True}

    def schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required}

    s, i = {"type": "string"}, {"type": "integer", "minimum": 1}
    specs: list[tuple[str, Any, str, dict[str, Any]]] = [
        ("read", read, "Read a workspace file as line-numbered text (offset/limit for large files).",
         schema({"path": s, "offset": i, "limit": i}, ["path"])),
        ("write", write, "Write a workspace file (created, or overwritten); parent directories are created.",
         schema({"path": s, "content": s}, ["path", "content"])),
        ("edit", edit, "Replace the one exact occurrence of old_string with new_string in a workspace file "
         "(an empty old_string creates a new file).", schema({"path": s, "old_string": s, "new_string": s},
                                                             ["path", "old_string", "new_string"])),
        ("list", list_, "List a workspace directory (default: the root).", schema({"path": s}, [])),
        ("find", find, "Find workspace files whose path matches a glob pattern (e.g. **/*.py).",
         schema({"pattern": s}, ["pattern"])),
        ("grep", grep, "Search workspace files for lines matching a regular expression.",
         schema({"pattern": s, "include": s}, ["pattern"])),
        ("delete", delete, "Delete a workspace file.", schema({"path": s}, ["path"])),
    ]
    return {name: tool(_guarded(fn), name=name, description=desc, parameters=params)
            for name, fn, desc, params in specs}
