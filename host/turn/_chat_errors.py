"""Turn errors: the default context-overflow classifier and the turn engine's own exceptions."""

from __future__ import annotations

import os
import re
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ._types import ChatErrorClassification, ChatErrorContext

_OVERFLOW_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded|context window|maximum context length|prompt is too long|"
    r"input is too long|too many tokens|exceeds the context|context_window_exceeded|"
    r"reduce the length of the messages|input token count.*exceeds|request too large for model",
    re.IGNORECASE,
)


class TurnAborted(Exception):
    """The turn was cancelled (cancel_chat or the abort signal)."""


def unwrap_error(error: Any) -> Any:
    """litellm wraps errors raised inside a stream in MidStreamFallbackError: reach the original."""
    seen = 0
    while seen < 5 and getattr(error, "original_exception", None) is not None:
        error = error.original_exception
        seen += 1
    return error


def default_context_overflow_classifier(
    error: Any, ctx: ChatErrorContext | None = None
) -> ChatErrorClassification | None:
    """"context_overflow" for the context-window errors of common providers (litellm's
    ContextWindowExceededError, also inside MidStreamFallbackError, and the providers' messages); else None."""
    import litellm

    for candidate in (error, unwrap_error(error)):
        if isinstance(candidate, litellm.ContextWindowExceededError):
            return "context_overflow"
        text = candidate if isinstance(candidate, str) else str(candidate) if candidate is not None else ""
        if text and _OVERFLOW_PATTERNS.search(text):
            return "context_overflow"
    return None


def error_message(error: Any) -> str:
    if isinstance(error, BaseException):
        text = str(error)
        return text or type(error).__name__
    return str(error)
