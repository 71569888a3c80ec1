"""`hookwire ext validate`: every problem of each manifest at once, with did-you-mean, and a command that can run.

`load_manifest` stops at the first error (the host refuses a bad manifest either way); an author fixing one wants
the whole list. `validate_file` reads the file with the same bounded, alias-free loader, collects every pydantic
error (each names the field), suggests the nearest valid name for a misspelt field or value (difflib, from the
manifest JSON Schema), and for a valid manifest checks that its command exists and is executable (a bare name on
PATH; a path relative to the manifest's working directory; `python` is the host's interpreter) and that a script
file it names is there.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ._errors import ManifestError


class ManifestProblem(BaseModel):
    """One problem of a manifest file."""

    field: str | None = Field(description="dotted camelCase path of the field, None for the whole file")
    message: str
    did_you_mean: str | None = None


class ManifestReport(BaseModel):
    """What `ext validate` found in one file (`--json`: one of `files`)."""

    file: str
    valid: bool
    name: str | None = None
    version: str | None = None
    target: str | None = Field(default=None, description="the command line, or the endpoint")
    problems: list[ManifestProblem] = Field(default_factory=list)


class ValidateReport(BaseModel):
    """`hookwire ext validate --json`."""

    ok: bool
    files: list[ManifestReport]


def _schema_node(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    for key in ("anyOf", "oneOf"):
        for option in node.get(key, []):
            option = _schema_node(schema, option)
            if "properties" in option or "additionalProperties" in option:
                return option
    return node


def _allowed_names(schema: dict[str, Any], path: tuple[Any, ...]) -> list[str]:
    """The field names the schema allows at `path` (camelCase), [] when unknown."""
    node = _schema_node(schema, schema)
    for part in path:
        props = node.get("properties", {})
        if isinstance(part, str) and part in props:
            node = _schema_node(schema, props[part])
        elif isinstance(node.get("additionalProperties"), dict):
            node = _schema_node(schema, node["additionalProperties"])
        else:
            return []
    return list(node.get("properties", {}))


def _nearest(word: object, candidates: list[str]) -> str | None:
    if not isinstance(word, str) or not candidates:
        return None
    lowered = {c.lower(): c for c in candidates}
    if word.lower() in lowered:  # only the case differs
        return lowered[word.lower()]
    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


def _problems(exc: ValidationError, schema: dict[str, Any]) -> list[ManifestProblem]:
    out = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p.startswith("function-") or p == "[key]")))
        field = ".".join(str(p) for p in loc) or None
        message = err["msg"].removeprefix("Value error, ")
        suggestion = None
        if err["type"] == "extra_forbidden" and loc:
            suggestion = _nearest(loc[-1], _allowed_names(schema, loc[:-1]))
            if suggestion is not None:
                suggestion = ".".join([*map(str, loc[:-1]), suggestion])
        elif err["type"] == "literal_error":
            expected = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
            suggestion = _nearest(err.get("input"), expected)
        out.append(ManifestProblem(field=field, message=message, did_you_mean=suggestion))
    return out


def _command_problems(manifest: Any) -> list[ManifestProblem]:
    """Does the manifest's command exist and is it executable (as the host would run it)?"""
    if not manifest.command:
        return []
    cwd = manifest.working_dir()
    if not cwd.is_dir():
        return [ManifestProblem(field="cwd", message=f"working directory {cwd} does not exist")]
    first = manifest.command[0]
    problems = []
    if first not in ("python", "python3"):
        if "/" in first:
            path = cwd / first
            if not path.is_file():
                problems.append(ManifestProblem(field="command", message=f"{first!r}: no such file (in {cwd})"))
            elif not os.access(path, os.X_OK):
                problems.append(ManifestProblem(field="command", message=f"{first!r} is not executable (chmod +x)"))
        elif shutil.which(first) is None:
            problems.append(ManifestProblem(field="command", message=f"{first!r} not found on PATH"))
    for word in manifest.command[1:2]:  # `node ext.js`, `python ext.py`: the script must be there
        if not word.startswith("-") and Path(word).suffix in (".py", ".js", ".mjs", ".cjs", ".ts") \
                and not (cwd / word).is_file():
            problems.append(ManifestProblem(field="command", message=f"script {word!r}: no such file (in {cwd})"))
    return problems


class _CommandOnly:
    """The command and working directory of a manifest that is invalid elsewhere (so its command is checked too)."""

    def __init__(self, command: list[str] | None, cwd: Path) -> None:
        self.command, self._cwd = command, cwd

    @classmethod
    def of(cls, data: dict[str, Any], path: Path) -> "_CommandOnly":
        command = data.get("command")
        ok = isinstance(command, list) and command and all(isinstance(w, str) for w in command)
        cwd = data.get("cwd")
        base = path.resolve().parent
        return cls(command if ok else None, (base / cwd).resolve() if isinstance(cwd, str) else base)

    def working_dir(self) -> Path:
        return self._cwd


def validate_file(file: str) -> ManifestReport:
    """Every problem of the manifest `file` (none: it is valid and its command can run)."""
    from .extensions import _manifest as mf

    try:
        manifest = mf.load_manifest(file)
    except ManifestError as exc:
        if exc.field is None:  # unreadable, not YAML/JSON, not a mapping: nothing more to say
            return ManifestReport(file=file, valid=False, problems=[ManifestProblem(field=None, message=exc.reason)])
        path = Path(file)
        text = path.read_bytes().decode("utf-8")  # load_manifest read and parsed it: it is bounded and parses
        data = json.loads(text) if path.suffix == ".json" else mf.yaml.load(text, Loader=mf._NoAliasLoader)
        try:
            mf.Manifest.model_validate(data)
        except ValidationError as verr:
            problems = _problems(verr, mf.manifest_json_schema())
        else:  # a check outside the model (cannot happen today): keep what load_manifest said
            problems = [ManifestProblem(field=exc.field, message=exc.reason)]
        problems += _command_problems(_CommandOnly.of(data, path))
        return ManifestReport(file=file, valid=False, name=data.get("name") if isinstance(data.get("name"), str)
                              else None, problems=problems)
    target = " ".join(manifest.command) if manifest.command else manifest.endpoint
    problems = _command_problems(manifest)
    return ManifestReport(file=file, valid=not problems, name=manifest.name, version=manifest.version, target=target,
                          problems=problems)


def validate_files(files: list[str]) -> ValidateReport:
    reports = [validate_file(f) for f in files]
    return ValidateReport(ok=all(r.valid for r in reports), files=reports)


def problem_line(file: str, problem: ManifestProblem) -> str:
    """`FILE: FIELD: MESSAGE (did you mean X?)` — the plain form of one problem."""
    where = ": ".join(p for p in (file, problem.field) if p)
    hint = f" (did you mean {problem.did_you_mean!r}?)" if problem.did_you_mean else ""
    return f"{where}: {problem.message}{hint}"


def print_validate_report(report: ValidateReport) -> None:
    """The plain (piped) or rich (terminal) form: `ok` lines on stdout, every problem on stderr."""
    import sys

    from ._cli_output import _tty, console, safe_text
    from ._terminal_text import terminal_safe

    out_rich, err_rich = _tty(sys.stdout), _tty(sys.stderr)
    for r in report.files:
        if r.valid:
            line = f"ok       {r.file}: {r.name} {r.version} ({r.target})"
            console().print(safe_text(line, "green")) if out_rich else print(terminal_safe(line))
            continue
        head = f"invalid  {r.file}: {len(r.problems)} problem{'s' if len(r.problems) != 1 else ''}"
        lines = [f"  {problem_line(r.file, p)}" for p in r.problems]
        if err_rich:
            console(stderr=True).print(safe_text(head, "bold red"))
            for line in lines:
                console(stderr=True).print(safe_text(line))
        else:
            print(terminal_safe("\n".join([head, *lines])), file=sys.stderr)
