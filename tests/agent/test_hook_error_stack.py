"""The error a failed tool call shows to afterToolCall extensions: its frames and exception line, built without reading
any source file (linecache I/O on the event loop stalled it on a busy disk: issue 19)."""

from __future__ import annotations

import linecache

from host.turn._hook_chain import _error_dict


def _raise_from_a_named_frame() -> None:
    raise ValueError("boom")


def test_tool_error_stack_names_the_frames_without_reading_source_files() -> None:
    try:
        _raise_from_a_named_frame()
    except ValueError as exc:
        caught = exc
    reads: list[str] = []
    saved = {name: getattr(linecache, name) for name in ("getline", "getlines", "checkcache", "lazycache")}
    for name in saved:
        setattr(linecache, name, lambda *args, _n=name, **_kw: reads.append(_n))
    try:
        error = _error_dict(caught)
    finally:
        for name, fn in saved.items():
            setattr(linecache, name, fn)
    assert reads == []
    assert (error["name"], error["message"]) == ("ValueError", "boom")
    assert error["stack"].startswith("Traceback (most recent call last):\n")
    assert f'File "{__file__}", line 12, in _raise_from_a_named_frame\n' in error["stack"]
    assert error["stack"].endswith("ValueError: boom\n")
