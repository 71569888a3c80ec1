"""Runnable hookwire sample extensions; each subpackage is one extension with its own manifest.yaml.

    guard        read-only guard: blocks destructive tools (beforeToolCall decisions, fails closed)
    router       model-settings router: maxSteps / temperature / persona from the turn body (beforeTurn)
    audit_log    afterToolCall + onStepFinish as JSON lines in the workspace (HostBridge writeFile)
    token_meter  counts streamed text per step, reports into a context block (onChunk, onStepFinish)
    tools        calculator, convert_units and a streaming count_to (tool provider)
    node_echo    the same contract in Node.js, written against proto/ without the SDK

See sample_extensions/README.md.
"""
