"""The extension host: load extensions from manifests, supervise their processes, dispatch hooks and tools.

Files pair with the SDK across the wire (go-plugin style):

    host/extensions/                       extension_sdk/
    _extension_client.py   <-- Connect -->  _extension_server.py
    _bridge_server.py      <-- HostBridge -> _bridge_client.py
    _process.py            <-- handshake -> _process.py
    _convert.py            <-- protobuf --> _convert.py

    _manager.py        ExtensionManager: the facade (load, unload, close, introspection)
    _launch.py         runtime dir, env scrub, sandbox plan, spawn or endpoint, Describe, adopt
    _supervisor.py     crash policy, exit watch, lost connections, restart with backoff, quarantine, health
    _dispatch.py       one function per hook kind: merge (beforeTurn), decide (beforeToolCall), broadcast, flush
    _tool_call.py      execute_tool, and the one map from gRPC errors to hookwire errors
    _trace.py          trace events and their listeners
    _registry.py       the loaded extensions, their hook subscribers and tool index
    _observation_acks.py _grants.py
    _state.py _manifest.py _snapshots.py _frames.py _health.py _observer_ledger.py _reply_bounds.py
    _turn_config_policy.py _tool_names.py _workspace_fs.py _rate_limit.py

The public names are re-exported by `host`.
"""
