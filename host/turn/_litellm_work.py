"""litellm's own per-call bookkeeping, switched off for the host's model calls when nobody asked for it (issue 16 §2).

Every `litellm.acompletion` call prices its response twice (once on the stream object, once for the success
loggers: model-info lookups, a cost map walk, a zero-cost diagnostic) and, after the stream ends, builds the
standard logging payload (copying the messages to truncate base64, counting tokens) for the success callbacks. On
the embedded scripted model that is ~60% of litellm's CPU per call (bench/litellm_floor.py, `litellm_call_cpu_ms`).
The host itself reads none of it: it takes the usage from the stream's last chunk.

So for the host's own model calls (the turn loop's `acompletion` and the stream it iterates, nothing else in the
process) the cost calculator returns None and the success dispatch returns at once, unless someone asked:

- the host app registered a litellm callback (`litellm.callbacks`, `success_callback`, `input_callback`, ...), or
  passed one per call in `model_options` (`callbacks`, `success_callback`), or set `litellm.max_budget`: then
  everything runs as litellm does it, and those callbacks fire with the cost;
- `Agent.litellm_bookkeeping = True` (or `Agent(litellm_bookkeeping=True)`), or `HOOKWIRE_LITELLM_BOOKKEEPING=1`
  in the environment when the agent leaves it at None.

Mechanism: litellm 1.110 has no setting for either, so `install()` wraps two methods of litellm's `Logging` class
once per process; the wrappers only differ from litellm's own while `quiet_context()`'s context variable is set,
which only the tasks running the host's model calls see. Calls the host app makes itself are never touched.

The end of a quiet stream (host/turn/_litellm_stream_end.py): litellm assembles the complete response from the
chunks at each of the stream's last two steps (the usage chunk, then the end), each time in a worker thread, and
deep-copies it each time for a cache nobody configured; a quiet stream assembles it once, on the loop when it has a
few chunks, and skips the copy and the (already silenced) success task. Only for the litellm versions whose
internals it was written against; any other version keeps litellm's own stream end.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Mapping
from typing import Any

ENV = "HOOKWIRE_LITELLM_BOOKKEEPING"

#: True in the tasks that run a model call litellm need not do its bookkeeping for.
_quiet: contextvars.ContextVar[bool] = contextvars.ContextVar("hookwire_litellm_quiet", default=False)
#: The same flag, for the turn loop: it sets it around each chunk litellm produces (host/turn/_loop.py `_chunks`).
quiet_flag = _quiet

#: litellm's module-level callback lists: anything in one of them means the host app wants litellm's logging.
_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "service_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)
#: Per-call keyword arguments that ask litellm for callbacks.
_CALLBACK_KWARGS = ("callbacks", "success_callback", "failure_callback", "input_callback")

_installed = False
_install_lock = threading.Lock()


def bookkeeping_wanted(setting: bool | None) -> bool:
    """The agent's choice: its `litellm_bookkeeping` if set, else the environment (off unless `=1`/true/on/yes)."""
    if setting is not None:
        return bool(setting)
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "on", "yes")


def callbacks_registered(request: Mapping[str, Any] | None = None) -> bool:
    """Whether the host app asked litellm for callbacks or a budget, globally or in this call's keyword arguments."""
    import litellm

    if any(getattr(litellm, name, None) for name in _CALLBACK_LISTS):
        return True
    if getattr(litellm, "max_budget", 0):  # the budget check reads the costs the success handler adds up
        return True
    return request is not None and any(request.get(name) for name in _CALLBACK_KWARGS)


def quiet_context(setting: bool | None, request: Mapping[str, Any] | None = None) -> contextvars.Context | None:
    """A context to run one model call in with litellm's bookkeeping off, or None when it stays on (asked for)."""
    if bookkeeping_wanted(setting) or callbacks_registered(request):
        return None
    install()
    ctx = contextvars.copy_context()
    ctx.run(_quiet.set, True)
    return ctx


def install() -> None:
    """Wrap litellm's `Logging.response_cost_calculator` and `Logging.dispatch_success_handlers` (once per process):
    unchanged outside a quiet context; inside one, no cost (None) and no success dispatch."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from litellm.litellm_core_utils.litellm_logging import Logging

        cost = Logging.response_cost_calculator
        dispatch = Logging.dispatch_success_handlers

        def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _quiet.get():
                return None
            return cost(self, *args, **kwargs)

        async def dispatch_success_handlers(self: Any, *args: Any, **kwargs: Any) -> None:
            if _quiet.get():
                return None
            return await dispatch(self, *args, **kwargs)

        response_cost_calculator.__wrapped__ = cost  # type: ignore[attr-defined]
        dispatch_success_handlers.__wrapped__ = dispatch  # type: ignore[attr-defined]
        Logging.response_cost_calculator = response_cost_calculator  # type: ignore[method-assign]
        Logging._response_cost_calculator = response_cost_calculator  # type: ignore[attr-defined]
        Logging.dispatch_success_handlers = dispatch_success_handlers  # type: ignore[method-assign]
        from . import _litellm_stream_end

        _litellm_stream_end.install(_quiet)
        _installed = True
