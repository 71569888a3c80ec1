"""From a turn's TurnConfig to its TurnPlan: the litellm keyword arguments, the limits, the stall watchdog.

Precedence, lowest first: the host app's `model_options`; the TurnConfig fields (the Agent's own before_turn,
then the scalars extensions were granted, already applied to the config); the Agent's `api_base`/`api_key`; and
last the extensions' headers/providerOptions, which only ever add keys (host/extensions/_turn_config_policy.py
`apply_extension_options`: a key the host set wins, and the extension's value comes back as refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..extensions._turn_config_policy import apply_extension_options, provider_of
from ._loop import TurnPlan
from ._tools import Tool
from ._types import TurnConfig, TurnContext


@dataclass(frozen=True)
class HostSettings:
    """The Agent's own defaults for every turn (its attributes and constructor options)."""

    model_options: dict[str, Any] | None
    api_base: str | None
    api_key: str | None
    max_steps: int
    stall_timeout_ms: float | None  # the session's, else the agent's chat_stream_stall_timeout_ms
    send_reasoning: bool = True  # the agent's send_reasoning (Think's instance setting); TurnConfig overrides
    litellm_bookkeeping: bool | None = None  # the agent's; None: HOOKWIRE_LITELLM_BOOKKEEPING (host/turn/_litellm_work.py)


def coerce(model: type[BaseModel], value: Any, hook: str) -> Any:
    """A hook's return value as `model`: the model itself, a dict validated into it, or None."""
    if value is None or isinstance(value, model):
        return value
    if isinstance(value, dict):
        return model.model_validate(value)
    raise TypeError(f"{hook}() must return a {model.__name__}, a dict or None, got {type(value).__name__}")


def turn_deadline(timeout: Any, started: float) -> float | None:
    """Loop time at which a turn with TurnConfig.timeout (ms, or {totalMs}) ends; None without a total."""
    total = timeout.get("totalMs", timeout.get("total_ms")) if isinstance(timeout, dict) else timeout
    return started + float(total) / 1000.0 if isinstance(total, (int, float)) and total > 0 else None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value else []


def plan_turn(ctx: TurnContext, cfg: TurnConfig, tools: dict[str, Tool], host: HostSettings,
              ext_maps: dict[str, Any] | None = None) -> tuple[TurnPlan, list[tuple[str, str]]]:
    """The TurnPlan, and the (field path, reason) of each extension header/option the host's own settings refused."""
    settings: dict[str, Any] = dict(host.model_options or {})
    host_headers = {**(settings.get("extra_headers") or {}), **(cfg.headers or {})}
    direct = {
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "top_k": cfg.top_k,
        "presence_penalty": cfg.presence_penalty,
        "frequency_penalty": cfg.frequency_penalty,
        "seed": cfg.seed,
        "max_tokens": cfg.max_output_tokens,
        "stop": cfg.stop_sequences,
        "num_retries": cfg.max_retries,
        "extra_headers": host_headers or None,
    }
    settings.update({k: v for k, v in direct.items() if v is not None})
    chunk_ms: float | None = None
    if isinstance(cfg.timeout, dict):
        total = cfg.timeout.get("totalMs", cfg.timeout.get("total_ms"))
        chunk_ms = cfg.timeout.get("chunkMs", cfg.timeout.get("chunk_ms"))
        if total is not None:
            settings["timeout"] = float(total) / 1000.0
    elif cfg.timeout is not None:
        settings["timeout"] = float(cfg.timeout) / 1000.0
    model = cfg.model or ctx.model
    if cfg.provider_options:  # the host app's own before_turn: trusted, taken as given
        provider = model.split("/", 1)[0] if "/" in model else ""
        scoped = cfg.provider_options.get(provider)
        settings.update(scoped if isinstance(scoped, dict) else cfg.provider_options)
    if cfg.output is not None:
        if isinstance(cfg.output, dict):
            settings["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": cfg.output}}
        else:
            settings["response_format"] = cfg.output
    if host.api_base is not None:
        settings["api_base"] = host.api_base
    if host.api_key is not None:
        settings["api_key"] = host.api_key
    refused: list[tuple[str, str]] = []
    if ext_maps:
        settings, refused = apply_extension_options(settings, ext_maps.get("headers"),
                                                    ext_maps.get("provider_options"), provider_of(model))
    if cfg.chat_stream_stall_timeout_ms is not None:
        stall_ms: float | None = cfg.chat_stream_stall_timeout_ms
    elif chunk_ms is not None:
        stall_ms = chunk_ms
    else:
        stall_ms = host.stall_timeout_ms
    plan = TurnPlan(
        model=model,
        system=cfg.system if cfg.system is not None else ctx.system,
        messages=cfg.messages if cfg.messages is not None else ctx.messages,
        tools=tools,
        active_tools=cfg.active_tools,
        tool_choice=cfg.tool_choice,
        max_steps=cfg.max_steps if cfg.max_steps is not None else host.max_steps,
        stop_when=_as_list(cfg.stop_when),
        send_reasoning=cfg.send_reasoning if cfg.send_reasoning is not None else host.send_reasoning,
        settings=settings,
        stall_timeout_s=(stall_ms / 1000.0) if stall_ms else None,
        transforms=_as_list(cfg.experimental_transform),
        repair_tool_call=cfg.repair_tool_call,
        litellm_bookkeeping=host.litellm_bookkeeping,
    )
    return plan, list(refused)
