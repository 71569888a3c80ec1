"""`hookwire completion bash|zsh|fish`: a shell completion script, made from the argparse parser itself.

The script is generated from the parser at the time it is printed, so a subcommand a module registers (journal,
replay, ...) completes too with no change here. It completes subcommands at every level and each command's
options; where a command expects a value or a file (a prompt, -e MANIFEST) it falls back to the shell's file
completion. bash: `eval "$(hookwire completion bash)"` (or save it under bash-completion's completions dir);
zsh: the same through bashcompinit; fish: `hookwire completion fish | source`.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

SHELLS = ("bash", "zsh", "fish")


_Level = tuple[list[str], list[str], dict[str, str], list[str]]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], _Level]:
    """path -> (subcommand names, option strings, help of each subcommand, choices of a positional argument)
    for every command level."""
    subs: dict[str, argparse.ArgumentParser] = {}
    helps: dict[str, str] = {}
    options: list[str] = []
    values: list[str] = []
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for choice in action._choices_actions:  # noqa: SLF001
                helps[choice.dest] = choice.help or ""
            subs.update(action.choices)
        elif not action.option_strings and action.choices:
            values.extend(str(c) for c in action.choices)
        else:
            options.extend(s for s in action.option_strings if s.startswith("--") or len(action.option_strings) == 1)
    if not path:
        options.append("--debug")
    out = {path: (list(subs), sorted(set(options)), helps, values)}
    for name, sub in subs.items():
        out.update(_commands(sub, (*path, name)))
    return out


def _bash(parser: argparse.ArgumentParser) -> str:
    table = _commands(parser)
    moves = []
    words = []
    for path, (subs, opts, _, values) in table.items():
        key = " ".join(path)
        for sub in subs:
            moves.append(f'            {shlex.quote(key + ":" + sub)}) path={shlex.quote(" ".join((*path, sub)))} ;;')
        words.append(f'        {shlex.quote(key)}) subs={shlex.quote(" ".join(subs or values))}; opts={shlex.quote(" ".join(opts))} ;;')
    return "\n".join([
        "# hookwire completion for bash (hookwire completion bash)",
        "_hookwire() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" path="" w i subs="" opts=""',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        w="${COMP_WORDS[i]}"',
        '        case "$path:$w" in',
        *moves,
        "        esac",
        "    done",
        '    case "$path" in',
        *words,
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        '    elif [[ -n "$subs" ]]; then',
        '        COMPREPLY=($(compgen -W "$subs" -- "$cur"))',
        "    else",
        "        COMPREPLY=()  # a value or a file: the shell's default completion",
        "    fi",
        "}",
        "complete -o default -F _hookwire hookwire",
        "",
    ])


def _zsh(parser: argparse.ArgumentParser) -> str:
    return "\n".join([
        "#compdef hookwire",
        "# hookwire completion for zsh (hookwire completion zsh): the bash completion through bashcompinit",
        "autoload -U +X bashcompinit && bashcompinit",
        _bash(parser),
    ])


def _fish(parser: argparse.ArgumentParser) -> str:
    table = _commands(parser)
    lines = ["# hookwire completion for fish (hookwire completion fish | source)"]
    for path, (subs, opts, helps, values) in table.items():
        if not path:
            cond = "__fish_use_subcommand"
        else:
            cond = " && ".join(f"__fish_seen_subcommand_from {shlex.quote(p)}" for p in path)
            if subs:
                cond += " && not __fish_seen_subcommand_from " + " ".join(shlex.quote(s) for s in subs)
        for sub in subs:
            lines.append(f"complete -c hookwire -f -n {shlex.quote(cond)} -a {shlex.quote(sub)} "
                         f"-d {shlex.quote(helps.get(sub, '')[:60])}")
        for value in values:
            lines.append(f"complete -c hookwire -f -n {shlex.quote(cond)} -a {shlex.quote(value)}")
        for opt in opts:
            if opt.startswith("--"):
                lines.append(f"complete -c hookwire -n {shlex.quote(cond)} -l {shlex.quote(opt[2:])}")
    return "\n".join(lines) + "\n"


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell` (one of SHELLS)."""
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](parser)


def register(subparsers: Any) -> None:
    """Add `hookwire completion SHELL` (called by host/cli.py: the example of a subcommand module)."""
    p = subparsers.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                              description='bash: eval "$(hookwire completion bash)"; zsh: the same in ~/.zshrc; '
                                          "fish: hookwire completion fish | source")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(handler=_cmd_completion)


def _cmd_completion(args: argparse.Namespace) -> int:
    from .cli import _parser

    print(completion_script(_parser(), args.shell), end="")
    return 0
