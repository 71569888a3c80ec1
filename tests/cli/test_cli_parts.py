"""The CLI's parts in process: the rich trace table, completion scripts, --debug anywhere, per-hook trace rows,
the litellm preload's import-lock premise."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from host._cli_exit import pop_debug, pop_log_format
from host.extensions._observation_tally import ObservationTally, hook_rows
from host.extensions._snapshots import TraceEvent


def test_debug_is_taken_from_anywhere_before_a_double_dash() -> None:
    assert pop_debug(["run", "hi", "--debug", "-e", "m.yaml"]) == (["run", "hi", "-e", "m.yaml"], True)
    assert pop_debug(["ext", "list", "-e", "m.yaml"]) == (["ext", "list", "-e", "m.yaml"], False)
    assert pop_debug(["run", "--", "--debug"]) == (["run", "--", "--debug"], False)  # a prompt "--debug"


def test_log_format_is_taken_from_anywhere_before_a_double_dash_in_both_spellings() -> None:
    assert pop_log_format(["ext", "list", "--log-format", "json", "-e", "m.yaml"]) == (["ext", "list", "-e", "m.yaml"],
                                                                                       "json")
    assert pop_log_format(["doctor", "--log-format=text"]) == (["doctor"], "text")
    assert pop_log_format(["run", "--", "--log-format", "json"]) == (["run", "--", "--log-format", "json"], None)
    assert pop_log_format(["doctor", "--log-format"]) == (["doctor", "--log-format"], None)  # the parser reports it


def test_the_rich_trace_table_prints_untrusted_text_literally() -> None:
    from rich.console import Console

    from host._cli_output import trace_table

    events = [TraceEvent(hook="beforeTurn", extension="[bold]evil[/bold]", outcome="denied", latency_ms=1.5,
                         detail="\x1b]0;pwned\x07 [link=http://x]click[/link]")]
    console = Console(record=True, force_terminal=True, width=200, color_system="truecolor")
    console.print(trace_table(events, {"temperature": "[red]router"}))
    text = console.export_text()
    row = next(line for line in text.splitlines() if "beforeTurn" in line)
    assert "[bold]evil[/bold]" in row  # markup shown, not applied
    assert "\\x1b]0;pwned\\x07 [link=http://x]click[/link]" in row  # the escape made visible, the link inert
    assert "denied" in row and "1.50 ms" in row
    assert any("temperature" in line and "[red]router" in line for line in text.splitlines())
    raw = console.export_text(styles=True)
    assert "\x1b]0;pwned" not in raw and "\x1b]8;" not in raw  # no OSC title or hyperlink reaches the terminal


def test_bash_accepts_the_completion_script_and_it_completes_subcommands() -> None:
    from host._cli_completion import completion_script
    from host.cli import _parser

    script = completion_script(_parser(), "bash")
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    probe = script + textwrap.dedent("""
        complete_line() {
            read -ra COMP_WORDS <<< "$1"
            [[ "$1" == *" " ]] && COMP_WORDS+=("")
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            _hookwire
            echo "${COMPREPLY[*]}"
        }
        complete_line "hookwire "
        complete_line "hookwire e"
        complete_line "hookwire ext v"
        complete_line "hookwire doctor --j"
        complete_line "hookwire completion "
    """)
    out = subprocess.run(["bash"], input=probe, text=True, capture_output=True, timeout=30).stdout.splitlines()
    assert out == ["run chat demo ext doctor journal replay completion", "ext", "validate", "--json", "bash zsh fish"]


def test_the_fish_script_offers_each_subcommand() -> None:
    from host._cli_completion import completion_script
    from host.cli import _parser

    script = completion_script(_parser(), "fish")
    assert "complete -c hookwire -f -n __fish_use_subcommand -a doctor" in script
    assert "complete -c hookwire -f -n '__fish_seen_subcommand_from ext && not __fish_seen_subcommand_from " \
           "validate list schema new test' -a validate" in script


def test_observations_are_counted_per_turn_and_hook_and_taken_once() -> None:
    class Ctx:
        def __init__(self, request_id: str) -> None:
            self.session_id, self.request_id = "s", request_id

    tally, one, two = ObservationTally(), Ctx("r1"), Ctx("r2")
    for ctx, hook in [(one, "onChunk"), (one, "onChunk"), (two, "onChunk"), (one, "afterToolCall"),
                      (one, "onStepFinish")]:
        tally.add(ctx, hook)
    assert tally.take(one) == {"onChunk": 2, "afterToolCall": 1, "onStepFinish": 1}
    assert tally.take(one) == {}
    assert tally.take(two) == {"onChunk": 1}


def test_hook_rows_are_in_turn_order_and_only_for_the_extensions_hooks() -> None:
    counts = {"onChunk": 10, "onStepFinish": 2, "afterToolCall": 1}
    assert hook_rows(counts, {"onStepFinish", "afterToolCall"}, 3, 0) == [
        ("afterToolCall", "1 observation(s) delivered in order"),
        ("onStepFinish", "2 observation(s) delivered in order"),
    ]
    assert hook_rows(counts, {"onChunk"}, 10, 4) == [
        ("onChunk", "10 observation(s) delivered in order, 4 oldest dropped (extension too slow)")]
    assert hook_rows(counts, {"onChunk"}, 12, 0) is None  # not accounted for: one merged `observe` row instead


def test_starting_extensions_imports_no_module_so_the_litellm_thread_imports_alone() -> None:
    """host/_cli_cold.py's import-lock premise: once host.extensions is imported, load_all imports nothing."""
    probe = textwrap.dedent("""
        import asyncio, json, sys
        from host.extensions._manager import ExtensionManager
        from host._cli_cold import start_extensions
        from host._cli_output import Progress
        before = set(sys.modules)
        async def main():
            async with ExtensionManager(sandbox="off") as mgr:
                await mgr.load_all(["sample_extensions/router/manifest.yaml"])
        asyncio.run(main())
        print(json.dumps(sorted(set(sys.modules) - before)))
    """)
    from test_cli import ROOT

    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
