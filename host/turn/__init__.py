"""The turn engine: Think's chat-turn lifecycle on litellm. No gRPC here.

    _agent.py          Agent: the hooks users override, lifecycle, entry paths, submissions
    _turn_runner.py    one turn from request to result: lock, prepare, loop, persist, staged failures, recovery
    _plan.py           TurnConfig (host hook + extensions' patch) -> TurnPlan: litellm kwargs, deadline
    _hook_chain.py     the loop's hooks: the subclass first, then the extensions, for all five hooks
    _session_bridge.py the HostBridge services of one session (what an extension may ask the host for)
    _loop.py           TurnLoop: steps, streaming, tool calls (knows nothing of subclasses or extensions)
    _types.py          the contexts, configs and results the hooks see
    _preload.py        host.preload(): litellm imported and its first call set up before the app's loop serves
    _session.py _tools.py _ui_messages.py _chat_errors.py _store.py _scripted_model.py

The public names are re-exported by `host`.
"""
