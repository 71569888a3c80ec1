"""The host's start-up heap kept out of the cyclic garbage collector (issue 19 item 4).

Importing litellm leaves ~400K long-lived objects that every full collection walks again: one full collect took
~0.5 s, stalling the event loop (and every session on it). After the first Agent has started, everything that
exists is start-up state (modules, litellm's tables, the first manager), so it is moved to the permanent
generation (`gc.freeze()`), once per process; full collections then walk only what turns create.
`HOOKWIRE_GC_FREEZE=0` turns it off. Measured in bench/history.py (`loop_lag_p99_ms`, `loop_lag_max_ms`).
"""

from __future__ import annotations

import gc
import logging
import os

log = logging.getLogger("hookwire")

_frozen = False


def freeze_startup_heap() -> bool:
    """Freeze the heap as it is now, the first time this is called in the process (True when it did)."""
    global _frozen
    if _frozen or os.environ.get("HOOKWIRE_GC_FREEZE", "1") == "0":
        return False
    _frozen = True
    gc.freeze()
    if log.isEnabledFor(logging.DEBUG):  # get_freeze_count() walks the frozen list: ~40 ms for litellm's heap
        log.debug("gc: %d start-up objects frozen out of the cyclic collector", gc.get_freeze_count())
    return True
