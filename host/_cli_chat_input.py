"""The `hookwire chat` prompt: readline line editing and history on a terminal, `/help`, the resume notice.

On a terminal, lines are read with GNU readline (arrow keys, Ctrl-R, history recall with Up), the history kept in
`$XDG_STATE_HOME/hookwire/chat_history` (default `~/.local/state/hookwire/chat_history`, at most 1000 lines,
written when the chat ends). `input()` blocks its thread and can't be interrupted, so each line is read by a
daemon thread (as host._cli_interrupt.StdinLines does for pipes) and Ctrl-C at the prompt still leaves at once;
the terminal's modes, which readline changes while it reads, are saved first and restored when the chat ends.
When stdin is not a terminal (a pipe, a test), lines come from StdinLines and the prompt is printed as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

HELP = """\
  /help            this help
  /quit, /exit     leave the chat (also Ctrl-D; Ctrl-C at the prompt)
  Ctrl-C           during a turn: abort it (its partial answer is kept) and come back to the prompt
  Up / Down        recall earlier lines (history kept in {history})
  anything else    sent to the model as your message"""

HISTORY_LINES = 1000


def history_file() -> Path:
    """Where the chat's line history lives: the user's state directory (XDG), under hookwire/."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "hookwire" / "chat_history"


def help_text() -> str:
    return HELP.format(history=history_file())


def resume_notice(session: str, count: int) -> str | None:
    """The line shown when `hookwire chat` continues a session that already has messages."""
    if count <= 0:
        return None
    return f"resuming session {session!r}: {count} earlier message{'s' if count != 1 else ''} (the model sees them)"


class PromptLines:
    """`await read(prompt)`: the next line (None at end of input), with readline when stdin is a terminal."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self._loop = asyncio.get_running_loop()
        self._termios: Any = None
        self._pipe: Any = None
        self._readline: Any = None
        if not self.interactive:
            from ._cli_interrupt import StdinLines

            self._pipe = StdinLines()
            return
        with contextlib.suppress(Exception):
            import termios

            self._termios = termios.tcgetattr(sys.stdin.fileno())
        try:
            import readline
        except ImportError:  # a Python without readline: input() still works, without editing
            return
        self._readline = readline
        readline.set_history_length(HISTORY_LINES)
        with contextlib.suppress(OSError):
            readline.read_history_file(history_file())

    async def read(self, prompt: str) -> str | None:
        if self._pipe is not None:
            sys.stdout.write(prompt)
            sys.stdout.flush()
            return await self._pipe.readline()
        future: asyncio.Future[str | None] = self._loop.create_future()

        def ask() -> None:
            try:
                line: str | None = input(prompt)
            except (EOFError, OSError, ValueError):
                line = None
            with contextlib.suppress(RuntimeError):  # the loop closed: the chat is over
                self._loop.call_soon_threadsafe(lambda: future.done() or future.set_result(line))

        threading.Thread(target=ask, name="hookwire-prompt", daemon=True).start()
        return await future

    def close(self) -> None:
        """Save the history and give the terminal back its modes."""
        if self._readline is not None:
            path = history_file()
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # what a user typed is theirs alone
                self._readline.write_history_file(path)
        if self._termios is not None:
            with contextlib.suppress(Exception):
                import termios

                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._termios)
