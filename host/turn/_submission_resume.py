"""Resuming a durable submission exactly once: was it already answered before its host died?

A host can die after the turn wrote its answer but before the submission was marked finished (a few milliseconds at
the end of a turn). The host that resumes it (after claiming it: host/turn/_pg_store.py, or after a restart on SQLite)
checks the transcript first: when the submission's last message is there, followed at once by an assistant message,
that message is the answer, and the turn is not run again.

A submission's turn interrupted in this process (`agent.close()` cancels it mid-turn) is not answered: the turn ends as
an abort and keeps what streamed, which would read as the answer on resume (an empty or cut-off message, status
completed). `withdraw_interrupted` removes that partial message when the turn did not finish, so the submission
stays unanswered and the next start runs it again.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("hookwire.agent")


def earlier_answer(transcript: list[dict[str, Any]], submitted: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The assistant message that answered `submitted` (the submission's messages), or None if it was never answered."""
    ids = [m.get("id") for m in submitted if isinstance(m, dict) and m.get("id")]
    if not ids:
        return None
    last = ids[-1]
    for i, message in enumerate(transcript):
        if message.get("id") == last:
            following = transcript[i + 1] if i + 1 < len(transcript) else None
            if following is not None and following.get("role") == "assistant":
                return following
            return None
    return None


async def withdraw_interrupted(store: Any, submitted: list[dict[str, Any]]) -> None:
    """The submission's turn was cancelled before it finished: delete the partial assistant message its abort kept
    after the submission's messages (`store`: the agent's SessionStore), so resuming runs the turn again."""
    partial = earlier_answer(await store.messages(), submitted)
    if partial is None:
        return
    try:
        await store.raw.delete_messages(store.sid, [partial["id"]])
    except Exception:
        logger.exception("could not withdraw the interrupted answer %s of a submission (session %s)",
                         partial.get("id"), store.sid)
