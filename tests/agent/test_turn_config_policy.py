"""The TurnConfig trust boundary's policy (host/extensions/_turn_config_policy.py): the manifest grant, the providerOptions
allowlist, the header policy and the one merge rule; and the host app's own endpoint, key and litellm options."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.openai_sse_server import OpenAISSEServer

from host import Agent, ManifestError, load_manifest, manifest_json_schema
from host.extensions._manifest import Permissions
from host.extensions._turn_config_policy import (
    GRANTABLE_FIELDS,
    SCALAR_FIELDS,
    apply_extension_options,
    filter_headers,
    filter_provider_options,
    merge_options,
    screen_reply,
)

ENDPOINT = "an endpoint option: where the request goes is the host's"
IDENTITY = "an identity/logging option: refused"


class _Problem:
    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason


def write(tmp_path: Path, turn_config: str) -> Path:
    path = tmp_path / "ext.yaml"
    path.write_text(f"name: ext\ncommand: [python, x.py]\npermissions:\n  turnConfig: {turn_config}\n")
    return path


# ---------------------------------------------------------------------------------------------- the grant


def test_default_grant_is_the_scalar_set() -> None:
    """A manifest without permissions.turnConfig grants exactly the design card's scalars."""
    assert Permissions().turn_config == [
        "system", "activeTools", "toolChoice", "maxSteps", "sendReasoning", "maxOutputTokens", "temperature", "topP",
        "topK", "presencePenalty", "frequencyPenalty", "stopSequences", "seed", "maxRetries", "timeout",
    ]


def test_manifest_refuses_granting_model(tmp_path: Path) -> None:
    """`model` in permissions.turnConfig is a manifest error naming the file and the field."""
    path = write(tmp_path, "[system, model]")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert (err.value.file, err.value.field) == (str(path.resolve()), "permissions.turnConfig")
    assert err.value.reason == "'model' can never be granted to an extension: the host owns model, tools and stopWhen"


def test_manifest_refuses_an_unknown_field_name(tmp_path: Path) -> None:
    """An unknown name is a manifest error that says which names exist (and the camelCase spelling)."""
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, "[provider_options]"))
    assert err.value.field == "permissions.turnConfig"
    assert err.value.reason.startswith("unknown TurnConfig field 'provider_options' (did you mean 'providerOptions'?)")


def test_schema_lists_the_grantable_names_and_the_default() -> None:
    """`hookwire ext schema` shows which names permissions.turnConfig accepts, and its default."""
    prop = manifest_json_schema()["$defs"]["Permissions"]["properties"]["turnConfig"]
    assert prop["items"]["enum"] == list(GRANTABLE_FIELDS)
    assert prop["default"] == list(SCALAR_FIELDS)


def test_screen_denies_ungranted_fields_and_keeps_the_granted_ones() -> None:
    """Each field outside the grant is one denial; model (a validation problem) becomes a denial too."""
    values = {"system": "s", "temperature": 0.1, "messages": [], "headers": {"x-a": "1"}}
    out = screen_reply("ext", values, [_Problem("model", "cannot be set"), _Problem("seed", "expected an integer")],
                       ["system", "temperature"], "openai")
    assert out.values == {"system": "s", "temperature": 0.1}
    assert [(d.field, d.reason) for d in out.denied] == [
        ("model", "never settable by an extension (the host owns model, tools and stopWhen)"),
        ("messages", "not granted by the manifest's permissions.turnConfig"),
        ("headers", "not granted by the manifest's permissions.turnConfig"),
    ]
    assert [p.field for p in out.problems] == ["seed"]


# ---------------------------------------------------------------------------------------------- providerOptions


def test_flat_provider_options_keep_only_allowlisted_options_of_the_turns_provider() -> None:
    """A flat providerOptions is taken for the turn's provider: allowlisted names pass (litellm spelling)."""
    kept, refused = filter_provider_options({"reasoningEffort": "low", "api_base": "http://x", "mock_response": "hi"},
                                            "openai")
    assert kept == {"openai": {"reasoning_effort": "low"}}
    assert refused == [("api_base", ENDPOINT),
                       ("mock_response", "a routing/retry option: refused (timeouts and retries are TurnConfig scalars)")]


def test_identity_and_billing_options_are_refused_for_openai() -> None:
    """user, metadata, store and service_tier are request options of OpenAI but not an extension's to set."""
    kept, refused = filter_provider_options(
        {"openai": {"user": "u", "metadata": {}, "store": True, "service_tier": "priority"}}, "openai")
    assert kept == {}
    assert refused == [("openai.user", IDENTITY), ("openai.metadata", IDENTITY), ("openai.store", IDENTITY),
                       ("openai.service_tier", "not a request option an extension may set for provider 'openai'")]


def test_think_provider_keys_map_to_litellm_providers() -> None:
    """Think's `google` options are litellm's `gemini` ones (safetySettings -> safety_settings)."""
    settings = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    kept, refused = filter_provider_options({"google": {"safetySettings": settings}}, "openai")
    assert (kept, refused) == ({"gemini": {"safety_settings": settings}}, [])


def test_anthropic_thinking_is_kept_in_litellm_spelling() -> None:
    """AI SDK's thinking {type, budgetTokens} becomes litellm's {type, budget_tokens}."""
    kept, _ = filter_provider_options({"anthropic": {"thinking": {"type": "enabled", "budgetTokens": 1024}}}, "x")
    assert kept == {"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}


def test_an_allowlisted_option_with_a_wrong_type_is_refused() -> None:
    """A value litellm could not use is refused with the type expected."""
    kept, refused = filter_provider_options({"openai": {"logprobs": "yes", "top_logprobs": True}}, "openai")
    assert kept == {}
    assert refused == [("openai.logprobs", "invalid value: expected bool"),
                       ("openai.top_logprobs", "invalid value: expected int")]


# ---------------------------------------------------------------------------------------------- headers


def test_credential_routing_and_framing_headers_are_refused_in_any_case() -> None:
    """Each header that could change where or as whom the request goes is refused; a harmless one passes."""
    names = ["AUTHORIZATION", "Proxy-Authorization", "Cookie", "Host", "api-key", "X-Api-Key", "x-goog-api-key",
             "X-Auth-Token", "X-Forwarded-For", "OpenAI-Organization", "Content-Length", "Transfer-Encoding"]
    kept, refused = filter_headers({**{n: "v" for n in names}, "X-Request-Note": "ok"})
    assert kept == {"X-Request-Note": "ok"}
    assert [n for n, _ in refused] == names


def test_a_header_value_with_a_line_break_is_refused() -> None:
    """No header injection through a value."""
    kept, refused = filter_headers({"X-Note": "a\r\nAuthorization: Bearer evil"})
    assert kept == {}
    assert refused == [("X-Note", "value is not a single-line string (at most 8192 characters)")]


# ---------------------------------------------------------------------------------------------- the merge rule


def test_later_extension_wins_a_header_under_another_spelling() -> None:
    """Among extensions, last wins, case-insensitively; the replaced spelling is reported."""
    res = merge_options({"X-Shared": "a", "x-a": "1"}, {"x-shared": "b"}, incoming_wins=True, case_insensitive=True)
    assert (res.merged, res.applied, res.replaced, res.refused) == ({"x-a": "1", "x-shared": "b"}, ["x-shared"],
                                                                    ["X-Shared"], [])


def test_provider_options_merge_option_by_option() -> None:
    """One extension's `openai` options never wipe another's: the merge goes one level below the provider."""
    res = merge_options({"openai": {"logprobs": True}}, {"openai": {"reasoning_effort": "high"}},
                        incoming_wins=True, nested=True)
    assert res.merged == {"openai": {"logprobs": True, "reasoning_effort": "high"}}
    assert res.applied == ["openai.reasoning_effort"]


def test_host_wins_refuses_keys_the_host_already_set() -> None:
    """Against the host, an extension only adds: a key the host set is refused, not replaced."""
    settings, refused = apply_extension_options(
        {"api_base": "http://a", "extra_headers": {"X-Team": "host"}, "response_format": {"type": "text"}},
        {"x-team": "evil", "X-Note": "n"}, {"openai": {"response_format": {"type": "json_object"}, "logprobs": True},
                                            "anthropic": {"thinking": {"type": "enabled"}}}, "openai")
    assert settings == {"api_base": "http://a", "extra_headers": {"X-Team": "host", "X-Note": "n"},
                        "response_format": {"type": "text"}, "logprobs": True}
    assert refused == [("headers.x-team", "the host app set this header (host wins)"),
                       ("providerOptions.openai.response_format", "the host app set this option (host wins)")]


# ---------------------------------------------------------------------------------------------- the host's own


async def test_agent_endpoint_key_and_model_options_reach_the_server() -> None:
    """Agent(api_base=, api_key=, model_options=) sends the request there, as that key, with those options."""
    server = OpenAISSEServer()
    async with server as url:
        async with Agent(model="openai/gpt-x", api_base=url, api_key="sk-host",
                         model_options={"extra_headers": {"X-Team": "host"}, "logprobs": True}) as agent:
            result = await agent.chat("hi")
    assert (result.status, result.message["content"]) == ("completed", "echo: hi")
    assert (server.headers[0]["authorization"], server.headers[0]["x-team"]) == ("Bearer sk-host", "host")
    assert server.requests[0]["logprobs"] is True
