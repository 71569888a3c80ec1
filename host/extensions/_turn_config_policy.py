"""The trust boundary of what an extension returns from beforeTurn: which TurnConfig fields it may set, and how
its `headers` and `providerOptions` reach the model request. Pure functions; no I/O, no hookwire imports.

Invariants (issue 10, item 1):
- An extension sets only the TurnConfig fields its manifest grants (`permissions.turnConfig`; default: the
  scalars). `messages`, `headers`, `providerOptions` only when listed; `model`, `tools`, `stopWhen` never.
  A field outside the grant is refused on its own (a `TurnConfigDenial`); the rest of the reply applies.
- Nothing from an extension changes **where or as whom** the host's model request goes. providerOptions are
  taken in Think's shape `{provider: {option: value}}` and mapped to litellm keyword arguments only for an
  allowlist of request-shaping options per provider (`PROVIDER_OPTION_ALLOWLIST`); every other key (endpoint,
  credential, client, callback, routing, logging, extra headers/body, mocks, ...) is refused with a reason.
  Headers naming credentials, cookies, the host, proxies, forwarding or message framing are refused.
- The host app wins: a header or litellm option the host set itself (its `model_options`, `api_base`,
  `api_key`, its own `before_turn`) is never replaced by an extension's (`merge_options(..., incoming_wins=False)`).
- One merge rule for the two map fields (`merge_options`): last extension wins among extensions, host wins over
  all extensions; headers compare case-insensitively; providerOptions merge one level below the provider, so
  one extension's `openai` options never wipe another's (or the host's).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# ---------------------------------------------------------------------------------------------- the grant

#: The TurnConfig fields granted when a manifest does not list `permissions.turnConfig` (the design card's scalars).
SCALAR_FIELDS: tuple[str, ...] = (
    "system", "activeTools", "toolChoice", "maxSteps", "sendReasoning", "maxOutputTokens", "temperature", "topP",
    "topK", "presencePenalty", "frequencyPenalty", "stopSequences", "seed", "maxRetries", "timeout",
)
#: Grantable only when the manifest lists them: they carry content (`messages`) or reach the request itself.
OPT_IN_FIELDS: tuple[str, ...] = ("messages", "headers", "providerOptions")
#: Every name `permissions.turnConfig` may list.
GRANTABLE_FIELDS: tuple[str, ...] = SCALAR_FIELDS + OPT_IN_FIELDS
#: Never taken from an extension, granted or not (Think parity: the host owns the model, the tools, stopWhen).
NEVER_GRANTABLE: frozenset[str] = frozenset({"model", "tools", "stopWhen", "stop_when", "prepareStep", "onFinish"})

# TurnPatch (snake_case) -> TurnConfig wire name (camelCase). Kept here so this module imports nothing of hookwire.
_CAMEL: dict[str, str] = {
    "system": "system", "messages": "messages", "active_tools": "activeTools", "tool_choice": "toolChoice",
    "max_steps": "maxSteps", "send_reasoning": "sendReasoning", "max_output_tokens": "maxOutputTokens",
    "temperature": "temperature", "top_p": "topP", "top_k": "topK", "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty", "stop_sequences": "stopSequences", "seed": "seed",
    "max_retries": "maxRetries", "timeout": "timeout", "headers": "headers", "provider_options": "providerOptions",
}
#: The two map fields, merged key by key rather than replaced (snake_case, as in TurnPatch).
MAP_FIELDS: tuple[str, ...] = ("headers", "provider_options")


def check_grant_names(names: Iterable[str]) -> list[str]:
    """Validate a manifest's `permissions.turnConfig` list; returns it (duplicates dropped, order kept).

    Raises ValueError naming the first bad entry: a field that can never be granted, or an unknown one.
    """
    out: list[str] = []
    for name in names:
        if name in NEVER_GRANTABLE:
            raise ValueError(
                f"{name!r} can never be granted to an extension: the host owns model, tools and stopWhen"
            )
        if name not in GRANTABLE_FIELDS:
            hint = f" (did you mean {_CAMEL[name]!r}?)" if name in _CAMEL and _CAMEL[name] != name else ""
            raise ValueError(f"unknown TurnConfig field {name!r}{hint}; grantable: {', '.join(GRANTABLE_FIELDS)}")
        if name not in out:
            out.append(name)
    return out


class TurnConfigDenial(BaseModel):
    """One part of an extension's beforeTurn reply that the host refused (and did not apply)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    extension: str
    hook: str = "beforeTurn"
    field: str = Field(description="camelCase path: `messages`, `headers.Authorization`, `providerOptions.openai.api_base`")
    reason: str


class _Problem(Protocol):
    field: str
    reason: str


@dataclass(frozen=True, slots=True)
class ScreenedReply:
    """What is left of one extension's reply after the policy: the values to merge, what was denied, and the
    remaining (non-policy) validation problems. (A dataclass: built once per extension per turn, kept cheap.)"""

    values: dict[str, Any]
    denied: list[TurnConfigDenial]
    problems: list[Any]


def screen_reply(extension: str, values: Mapping[str, Any], problems: Sequence[_Problem], grant: Iterable[str],
                 provider: str, *, hook: str = "beforeTurn") -> ScreenedReply:
    """Apply the grant and the request-option policy to one extension's validated reply.

    `values`: snake_case TurnPatch fields that passed validation; `problems`: the fields that did not (those naming
    a never-grantable field become denials); `grant`: the manifest's `permissions.turnConfig`; `provider`: the
    turn's litellm provider (`provider_of(model)`), used to place a flat providerOptions.
    """
    granted = grant if isinstance(grant, (frozenset, set)) else frozenset(grant)
    denied: list[TurnConfigDenial] = []
    kept_problems: list[Any] = []
    for p in problems:
        if p.field in NEVER_GRANTABLE:
            denied.append(TurnConfigDenial(extension=extension, hook=hook, field=p.field,
                                           reason="never settable by an extension (the host owns model, tools "
                                                  "and stopWhen)"))
        else:
            kept_problems.append(p)
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = _CAMEL.get(key, key)
        if name not in granted:
            denied.append(TurnConfigDenial(extension=extension, hook=hook, field=name,
                                           reason="not granted by the manifest's permissions.turnConfig"))
            continue
        if key == "headers":
            kept, refused = filter_headers(value)
        elif key == "provider_options":
            kept, refused = filter_provider_options(value, provider)
        else:
            out[key] = value
            continue
        denied.extend(TurnConfigDenial(extension=extension, hook=hook, field=f"{name}.{_printable(path)}", reason=why)
                      for path, why in refused)
        if kept:
            out[key] = kept
    return ScreenedReply(values=out, denied=denied, problems=kept_problems)


_PLAIN = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def _printable(key: str) -> str:
    """An untrusted key as it may appear in a log line or trace: as is when plain, else a bounded repr."""
    if _PLAIN.match(key):
        return key
    text = repr(key)
    return text if len(text) <= 130 else f"{text[:128]}…"


# ---------------------------------------------------------------------------------------------- headers

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")  # an RFC 9110 field name
_MAX_HEADER_VALUE = 8192
#: Exact names refused: credentials and identity, the target host, cookies, and message framing / hop-by-hop.
REFUSED_HEADERS: frozenset[str] = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "host", "api-key", "x-api-key",
    "forwarded", "x-real-ip", "via", "openai-organization", "openai-project", "x-goog-user-project",
    "content-length", "content-type", "content-encoding", "transfer-encoding", "connection", "keep-alive", "te",
    "trailer", "upgrade", "expect",
})
_REFUSED_PARTS = ("token", "secret", "auth", "password", "passwd", "credential", "cookie", "session")


def header_refusal(name: str, value: Any = "") -> str | None:
    """Why an extension may not send this header (None: it may). Case-insensitive."""
    if not _TOKEN.match(name):
        return "not a valid header name"
    low = name.lower()
    if low in REFUSED_HEADERS:
        if low in ("authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie"):
            return "a credential header: who the request goes as is the host's"
        if low in ("host", "forwarded", "x-real-ip", "via"):
            return "a routing header: where the request goes is the host's"
        if low in ("openai-organization", "openai-project", "x-goog-user-project"):
            return "an account header: who the request goes as is the host's"
        return "a message-framing header, set by the HTTP client"
    if low.endswith("-api-key") or low.endswith("-key") or any(part in low for part in _REFUSED_PARTS):
        return "looks like a credential header: who the request goes as is the host's"
    if low.startswith(("x-forwarded-", "proxy-")):
        return "a proxy/forwarding header: where the request goes is the host's"
    if not isinstance(value, str) or any(c in value for c in "\r\n\0") or len(value) > _MAX_HEADER_VALUE:
        return "value is not a single-line string (at most 8192 characters)"
    return None


def filter_headers(headers: Mapping[str, Any]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(headers an extension may send, [(name, reason) refused])."""
    kept: dict[str, str] = {}
    refused: list[tuple[str, str]] = []
    for name, value in headers.items():
        why = header_refusal(name, value)
        if why is None:
            kept[name] = value
        else:
            refused.append((name, why))
    return kept, refused


# ---------------------------------------------------------------------------------------------- providerOptions

# litellm option name -> the Python type(s) its value must have. Names are litellm's own keyword arguments
# (read from litellm's per-provider `get_supported_openai_params` and request transformations): each one
# shapes the request's content or decoding, none of them names an endpoint, an account or a client.
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "reasoning_effort": (str,),
    "response_format": (dict,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
    "logit_bias": (dict,),
    "parallel_tool_calls": (bool,),
    "prediction": (dict,),
    "thinking": (dict,),
    "cache_control": (dict,),
    "safety_settings": (list,),
}
_OPENAI_LIKE = frozenset({"reasoning_effort", "response_format", "logprobs", "top_logprobs", "logit_bias",
                          "parallel_tool_calls", "prediction"})
_GEMINI_LIKE = frozenset({"safety_settings", "thinking", "reasoning_effort", "response_format"})
#: Per litellm provider, the request-shaping options an extension may set through providerOptions.
#: Deliberately absent (refused even here): `user`, `safety_identifier`, `metadata` (identity, logging),
#: `store` (keeps the conversation at the provider), `service_tier` (billing class), `prompt_cache_key`
#: (cache routing), `n` (several answers: not one streamed message).
PROVIDER_OPTION_ALLOWLIST: dict[str, frozenset[str]] = {
    "openai": _OPENAI_LIKE,
    "azure": _OPENAI_LIKE,
    "anthropic": frozenset({"thinking", "reasoning_effort", "cache_control", "response_format",
                            "parallel_tool_calls"}),
    "gemini": _GEMINI_LIKE,
    "vertex_ai": _GEMINI_LIKE,
    "hookwire": frozenset({"reasoning_effort", "response_format", "parallel_tool_calls"}),  # the offline model
}
#: Think / AI SDK provider keys -> litellm provider names.
PROVIDER_ALIASES: dict[str, str] = {"google": "gemini", "vertex": "vertex_ai", "google-vertex": "vertex_ai"}

_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")

# Substrings of refused keys -> what kind of key it is (only for the reason text: the decision is the allowlist).
_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("key", "token", "secret", "password", "credential", "aws_", "azure_ad", "organization", "project",
      "account"), "a credential/account option: who the request goes as is the host's"),
    (("base", "url", "endpoint", "host", "version", "region", "location", "deployment", "custom_llm_provider",
      "proxy"), "an endpoint option: where the request goes is the host's"),
    (("header",), "headers go through `headers` (and the header policy), not providerOptions"),
    (("body", "query"), "raw request body/query additions are refused"),
    (("client", "session", "transport"), "a client option: the host's HTTP client is not replaceable"),
    (("callback", "logger", "hook"), "a callback option: the host's callbacks are not replaceable"),
    (("metadata", "user", "log", "tag", "trace", "identifier", "store"),
     "an identity/logging option: refused"),
    (("mock", "fallback", "router", "model", "retry", "retries", "timeout", "cache"),
     "a routing/retry option: refused (timeouts and retries are TurnConfig scalars)"),
)


def option_name(name: str) -> str:
    """An option name in litellm's spelling: AI SDK camelCase (`reasoningEffort`) -> `reasoning_effort`."""
    return _CAMEL_HUMP.sub(r"_\1", name).lower()


def _refusal(option: str, provider: str) -> str:
    low = option.lower()
    for parts, why in _KINDS:
        if any(p in low for p in parts):
            return why
    if provider not in PROVIDER_OPTION_ALLOWLIST:
        return f"provider {provider!r} has no options an extension may set"
    return f"not a request option an extension may set for provider {provider!r}"


def _option_value(option: str, value: Any) -> Any:
    """The value in litellm's shape, or raise ValueError."""
    if not isinstance(value, _OPTION_TYPES[option]) or (option == "top_logprobs" and isinstance(value, bool)):
        raise ValueError(f"expected {' or '.join(t.__name__ for t in _OPTION_TYPES[option])}")
    if option == "thinking":  # AI SDK: {type, budgetTokens}; litellm/Anthropic: {type, budget_tokens}
        return {option_name(k): v for k, v in value.items()}
    return value


def provider_of(model: str) -> str:
    """The litellm provider of a model id: its first path segment (`openai/gpt-4o` -> `openai`), else the provider
    litellm's model table gives it (`gpt-4o` -> `openai`) when litellm is already imported (never imported here:
    it costs ~2 s), else "" (no provider options apply)."""
    if "/" in model:
        return model.split("/", 1)[0]
    litellm = sys.modules.get("litellm")
    table = getattr(litellm, "model_cost", None) if litellm is not None else None
    entry = table.get(model) if isinstance(table, dict) else None
    return str(entry.get("litellm_provider") or "") if isinstance(entry, dict) else ""


def filter_provider_options(options: Mapping[str, Any], provider: str) -> tuple[dict[str, dict[str, Any]],
                                                                                 list[tuple[str, str]]]:
    """(allowlisted options nested by litellm provider, [(path, reason) refused]).

    Think's shape is `{provider: {option: value}}`; a provider key is a known provider name (or alias) whose value
    is an object. Anything else at the top level is a flat option, taken as one for the turn's `provider`.
    Option names are normalized to litellm's spelling, so `reasoningEffort` and `reasoning_effort` are one key.
    """
    kept: dict[str, dict[str, Any]] = {}
    refused: list[tuple[str, str]] = []

    def take(prov: str, option: str, value: Any, path: str) -> None:
        name = option_name(option)
        if name not in PROVIDER_OPTION_ALLOWLIST.get(prov, ()):
            refused.append((path, _refusal(name, prov)))
            return
        try:
            kept.setdefault(prov, {})[name] = _option_value(name, value)
        except ValueError as exc:
            refused.append((path, f"invalid value: {exc}"))

    for key, value in options.items():
        prov = PROVIDER_ALIASES.get(key, key)
        if isinstance(value, dict) and (prov in PROVIDER_OPTION_ALLOWLIST or _looks_like_provider(prov)):
            for option, inner in value.items():
                take(prov, str(option), inner, f"{key}.{option}")
        else:
            take(provider, str(key), value, str(key))
    return kept, refused


def _looks_like_provider(name: str) -> bool:
    """A key naming a litellm provider we have no allowlist for (its options are then all refused, by path)."""
    litellm = sys.modules.get("litellm")
    providers = getattr(litellm, "provider_list", None) if litellm is not None else None
    return bool(providers) and name in {str(getattr(p, "value", p)) for p in providers}  # type: ignore[union-attr]


def provider_kwargs(options: Mapping[str, Any] | None, provider: str) -> dict[str, Any]:
    """The litellm keyword arguments of screened providerOptions for the turn's provider (other providers' options
    do not apply to this request, as in Think)."""
    scoped = (options or {}).get(provider)
    return dict(scoped) if isinstance(scoped, dict) else {}


# ---------------------------------------------------------------------------------------------- the merge rule


class MergeResult(BaseModel):
    """`merged`: the result; `applied`: the incoming keys that took effect; `refused`: the incoming keys that did
    not because the base already had them and the base wins; `replaced`: base keys an incoming key replaced under a
    different spelling (headers). Keys are paths: `name` or `provider.option`."""

    merged: dict[str, Any]
    applied: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)
    replaced: list[str] = Field(default_factory=list)


def merge_options(base: Mapping[str, Any] | None, incoming: Mapping[str, Any] | None, *, incoming_wins: bool,
                  nested: bool = False, case_insensitive: bool = False) -> MergeResult:
    """The one merge rule of `headers` and `providerOptions`.

    Among extensions (load order) the later one wins: `incoming_wins=True`. Against the host app, the host wins:
    `incoming_wins=False`, and each incoming key the host already set is refused. `nested=True` merges one level
    down (providerOptions: per provider, option by option); `case_insensitive=True` compares names ignoring case
    (headers). Neither input is modified.
    """
    merged: dict[str, Any] = {k: (dict(v) if nested and isinstance(v, dict) else v) for k, v in (base or {}).items()}
    applied: list[str] = []
    refused: list[str] = []
    replaced: list[str] = []
    for key, value in (incoming or {}).items():
        if nested and isinstance(value, dict):
            inner = merge_options(merged.get(key) if isinstance(merged.get(key), dict) else {}, value,
                                  incoming_wins=incoming_wins)
            merged[key] = inner.merged
            applied.extend(f"{key}.{k}" for k in inner.applied)
            refused.extend(f"{key}.{k}" for k in inner.refused)
            continue
        existing = _find(merged, key, case_insensitive)
        if existing is not None and not incoming_wins:
            refused.append(key)
            continue
        if existing is not None and existing != key:
            del merged[existing]
            replaced.append(existing)
        merged[key] = value
        applied.append(key)
    return MergeResult.model_construct(merged=merged, applied=applied, refused=refused, replaced=replaced)


def _find(mapping: Mapping[str, Any], key: str, case_insensitive: bool) -> str | None:
    if key in mapping:
        return key
    if case_insensitive:
        low = key.lower()
        return next((k for k in mapping if k.lower() == low), None)
    return None


def apply_extension_options(settings: Mapping[str, Any], headers: Mapping[str, str] | None,
                            provider_options: Mapping[str, Any] | None,
                            provider: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Add the extensions' screened `headers` and `providerOptions` to the host's litellm kwargs, host winning.

    `settings`: the host's own litellm keyword arguments for the turn (its `extra_headers` are the host-set
    headers). Returns (new settings, [(camelCase path, reason) refused because the host set that key]).
    """
    out = dict(settings)
    refused: list[tuple[str, str]] = []
    if headers:
        host_headers = out.get("extra_headers") if isinstance(out.get("extra_headers"), dict) else {}
        res = merge_options(host_headers, headers, incoming_wins=False, case_insensitive=True)
        if res.merged:
            out["extra_headers"] = res.merged
        refused.extend((f"headers.{k}", "the host app set this header (host wins)") for k in res.refused)
    kwargs = provider_kwargs(provider_options, provider)
    if kwargs:
        res = merge_options(out, kwargs, incoming_wins=False)
        out = res.merged
        refused.extend((f"providerOptions.{provider}.{k}", "the host app set this option (host wins)")
                       for k in res.refused)
    return out, refused


__all__ = [
    "GRANTABLE_FIELDS", "MAP_FIELDS", "NEVER_GRANTABLE", "OPT_IN_FIELDS", "PROVIDER_OPTION_ALLOWLIST",
    "REFUSED_HEADERS", "SCALAR_FIELDS", "MergeResult", "ScreenedReply", "TurnConfigDenial",
    "apply_extension_options", "check_grant_names", "filter_headers", "filter_provider_options", "header_refusal",
    "merge_options", "option_name", "provider_kwargs", "provider_of", "screen_reply",
]
