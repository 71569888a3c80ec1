"""Pure logic of the samples: calculator, unit conversion, guard matcher, router rules, audit lines, meter."""

from __future__ import annotations

import json

import pytest

from host import load_manifest
from sample_extensions.audit_log._record import MAX_VALUE_CHARS, audit_line, audit_path
from sample_extensions.guard._matcher import ENV_ALLOW_TOOLS, ENV_EXTRA_WORDS, GuardPolicy, name_words
from sample_extensions.router._routing import CONTINUATION_MAX_STEPS, DEFAULT_MAX_STEPS, RoutingError, route
from sample_extensions.token_meter._meter import Meters, SessionMeter
from sample_extensions.tools._calc import CalculatorError, evaluate
from sample_extensions.tools._units import ConversionError, convert, input_schema

from ._harness import REPO

# -- calculator ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("2*(3+4)", 14), ("7 % 3", 1), ("2 ** 10", 1024), ("-3 + +2", -1), ("1/4", 0.25), ("4/2", 2), ("1.5e3", 1500)],
)
def test_calculator_evaluates_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "x + 1", "abs(-1)", "'a' * 3", "1 < 2", "[1, 2]", "(1).real", "True + 1", "1 if 1 else 2"],
)
def test_calculator_rejects_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError):
        evaluate(expression)


def test_calculator_reports_division_by_zero() -> None:
    with pytest.raises(CalculatorError, match="division by zero"):
        evaluate("1 / (2 - 2)")


def test_calculator_refuses_huge_exponents() -> None:
    with pytest.raises(CalculatorError, match="exponent"):
        evaluate("9 ** 9 ** 9")


def test_calculator_reports_syntax_errors() -> None:
    with pytest.raises(CalculatorError, match="not an arithmetic expression"):
        evaluate("2 *")


# -- unit conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "src", "dst", "quantity", "expected"),
    [
        (1, "km", "m", "length", 1000.0),
        (1, "mi", "km", "length", 1.609344),
        (12, "in", "ft", "length", 1.0),
        (1, "lb", "g", "mass", 453.59237),
        (100, "C", "F", "temperature", 212.0),
        (32, "F", "C", "temperature", 0.0),
        (0, "C", "K", "temperature", 273.15),
    ],
)
def test_convert_between_units(value: float, src: str, dst: str, quantity: str, expected: float) -> None:
    assert convert(value, src, dst, quantity) == pytest.approx(expected)


def test_convert_rejects_a_unit_of_another_quantity() -> None:
    with pytest.raises(ConversionError, match="unknown length unit 'kg'"):
        convert(1, "kg", "m", "length")


def test_convert_rejects_temperatures_below_absolute_zero() -> None:
    with pytest.raises(ConversionError, match="absolute zero"):
        convert(-300, "C", "F", "temperature")


def test_convert_schema_lists_units_and_quantities_as_enums() -> None:
    props = input_schema()["properties"]
    assert isinstance(props, dict)
    assert {"km", "lb", "F"} <= set(props["from"]["enum"])
    assert props["quantity"]["enum"] == ["length", "mass", "temperature"]


# -- guard matcher ------------------------------------------------------------------------------


def test_name_words_split_snake_kebab_and_camel_case() -> None:
    assert name_words("fs_deleteFile") == ["fs", "delete", "file"]
    assert name_words("rm-rf") == ["rm", "rf"]
    assert name_words("HTTPDelete") == ["http", "delete"]


@pytest.mark.parametrize("tool", ["delete_file", "fs_removeDir", "db_drop_table", "rm", "writeFile", "kill_process"])
def test_guard_blocks_destructive_names(tool: str) -> None:
    assert GuardPolicy.from_env({}).block_reason(tool) is not None


@pytest.mark.parametrize("tool", ["read_file", "tools_calculator", "confirm", "list_files", "format_text", "terminal_info"])
def test_guard_allows_names_that_only_contain_a_word_as_a_substring(tool: str) -> None:
    assert GuardPolicy.from_env({}).block_reason(tool) is None


def test_guard_reason_names_the_tool_and_the_word() -> None:
    reason = GuardPolicy.from_env({}).block_reason("fs_delete")
    assert reason is not None and "'fs_delete'" in reason and "'delete'" in reason


def test_guard_env_adds_words_and_allowed_tools() -> None:
    policy = GuardPolicy.from_env({"GUARD_DESTRUCTIVE_WORDS": "deploy, Publish", "GUARD_ALLOW_TOOLS": "scratch_write"})
    assert policy.matched_word("app_deploy") == "deploy"
    assert policy.matched_word("publish_post") == "publish"
    assert policy.matched_word("scratch_write") is None


def test_guard_body_read_only_false_disables_blocking() -> None:
    assert GuardPolicy().with_body({"readOnly": False}).block_reason("delete_file") is None


def test_guard_body_allow_list_lets_one_tool_through() -> None:
    policy = GuardPolicy().with_body({"guard": {"allow": ["delete_file"]}})
    assert policy.block_reason("delete_file") is None
    assert policy.block_reason("drop_table") is not None


# -- router -------------------------------------------------------------------------------------


def test_router_sets_default_steps_without_a_body() -> None:
    assert route({"system": "S", "continuation": False}) == {"maxSteps": DEFAULT_MAX_STEPS}


def test_router_gives_continuation_turns_fewer_steps() -> None:
    assert route({"continuation": True})["maxSteps"] == CONTINUATION_MAX_STEPS < DEFAULT_MAX_STEPS


@pytest.mark.parametrize(("mode", "temperature"), [("precise", 0.0), ("creative", 0.9), ("balanced", 0.5)])
def test_router_maps_mode_to_temperature(mode: str, temperature: float) -> None:
    assert route({"body": {"mode": mode}})["temperature"] == temperature


def test_router_appends_persona_to_system() -> None:
    assert route({"system": "Base.", "body": {"persona": "a pirate"}})["system"] == "Base.\n\nPersona for this turn: a pirate"


def test_router_rejects_an_unknown_mode_naming_the_choices() -> None:
    with pytest.raises(RoutingError, match="body.mode 'wild' is not one of precise, balanced, creative"):
        route({"body": {"mode": "wild"}})


# -- audit lines --------------------------------------------------------------------------------


def test_audit_path_makes_the_session_id_filename_safe() -> None:
    assert audit_path("s1") == "audit/s1.jsonl"
    assert audit_path("../../etc/passwd") == "audit/etc_passwd.jsonl"


def test_audit_line_is_one_json_object_with_event_and_session() -> None:
    line = audit_line("afterToolCall", "s1", {"toolName": "t", "output": 3}, now=1.0)
    assert line.endswith("\n") and line.count("\n") == 1
    assert json.loads(line) == {"ts": 1.0, "event": "afterToolCall", "session": "s1", "toolName": "t", "output": 3}


def test_audit_line_truncates_big_outputs() -> None:
    record = json.loads(audit_line("afterToolCall", "s1", {"output": "x" * (MAX_VALUE_CHARS * 2)}))
    assert record["output"]["truncated"] is True


# -- token meter --------------------------------------------------------------------------------


def test_meter_counts_only_text_delta_chunks_per_step() -> None:
    meter = SessionMeter()
    for chunk in ({"type": "text-delta", "text": "Hel"}, {"type": "reasoning-delta", "text": "zz"}, {"type": "text-delta", "text": "lo"}):
        meter.on_chunk(chunk)
    step = meter.on_step_finish({"stepNumber": 0, "usage": {"outputTokens": 2}})
    assert (step.chunks, step.chars, step.output_tokens) == (2, 5, 2)


def test_meter_resets_per_step_and_totals_across_steps() -> None:
    meter = SessionMeter()
    meter.on_chunk({"type": "text-delta", "text": "abc"})
    meter.on_step_finish({"stepNumber": 0})
    meter.on_chunk({"type": "text-delta", "text": "de"})
    meter.on_step_finish({"stepNumber": 1})
    report = meter.report()
    assert (report["steps"], report["chunks"], report["chars"]) == (2, 2, 5)
    assert report["lastStep"]["chars"] == 2


def test_meters_keep_sessions_apart() -> None:
    meters = Meters()
    meters.get("a").on_chunk({"type": "text-delta", "text": "abc"})
    assert meters.get("b").chars == 0
    assert meters.get("a").chars == 3


# -- manifests ----------------------------------------------------------------------------------

SAMPLE_NAMES = ["audit_log", "guard", "node_echo", "router", "token_meter", "tools"]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_manifest_is_valid_and_starts_its_own_package(name: str) -> None:
    manifest = load_manifest(REPO / "sample_extensions" / name / "manifest.yaml")
    assert manifest.name == name
    assert manifest.working_dir() == REPO
    expected = ["node", "sample_extensions/node_echo/index.js"] if name == "node_echo" else ["python", "-m", f"sample_extensions.{name}"]
    assert manifest.command == expected
    assert (REPO / "sample_extensions" / name / "README.md").is_file()


def test_guard_manifest_opts_into_decisions_and_fails_closed() -> None:
    policy = load_manifest(REPO / "sample_extensions" / "guard" / "manifest.yaml").hook_policy("beforeToolCall")
    assert policy.decisions and policy.failure == "closed"


def test_guard_manifest_allowlists_its_env_vars() -> None:
    manifest = load_manifest(REPO / "sample_extensions" / "guard" / "manifest.yaml")
    assert {ENV_ALLOW_TOOLS, ENV_EXTRA_WORDS} <= set(manifest.env)


@pytest.mark.parametrize(
    ("name", "grants_bridge"), [("audit_log", True), ("token_meter", True), ("guard", False), ("router", False), ("tools", False)]
)
def test_only_bridge_users_are_granted_bridge_permissions(name: str, grants_bridge: bool) -> None:
    manifest = load_manifest(REPO / "sample_extensions" / name / "manifest.yaml")
    assert manifest.permissions.grants_bridge() is grants_bridge
