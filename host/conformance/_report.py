"""The conformance report: one row per clause (PASS, FAIL or SKIP, and what was seen), as text or JSON."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from .._terminal_text import terminal_safe
from ._clauses import CLAUSES, TITLES

Status = Literal["PASS", "FAIL", "SKIP"]
MAX_SEEN = 600  # characters of "what was seen" kept per row (extension output is untrusted and may be huge)


class ClauseResult(BaseModel):
    """The outcome of one clause of docs/protocol.md."""

    id: str
    title: str
    status: Status
    seen: str = ""


class ConformanceReport(BaseModel):
    """Every clause's outcome for one extension (`passed`: no FAIL)."""

    extension: str
    manifest: str
    target: str = ""
    results: list[ClauseResult] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.status != "FAIL" for r in self.results)

    def failed_ids(self) -> list[str]:
        return [r.id for r in self.results if r.status == "FAIL"]

    def status_of(self, clause_id: str) -> Status:
        return next(r.status for r in self.results if r.id == clause_id)

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["passed"] = self.passed
        return json.dumps(data, indent=2)

    def to_text(self) -> str:
        lines = [f"hookwire ext test: {self.extension} ({self.manifest})"]
        for r in self.results:
            lines.append(f"  {r.id:<4} {r.status:<4}  {r.title}")
            if r.seen:
                lines.append(f"             {r.seen}")
        counts = {s: sum(1 for r in self.results if r.status == s) for s in ("PASS", "FAIL", "SKIP")}
        lines.append(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
                     + ("" if self.passed else f" (failed: {', '.join(self.failed_ids())})"))
        return terminal_safe("\n".join(lines))


class Results:
    """The rows being filled in while the kit runs; a clause nobody reached stays SKIP."""

    def __init__(self) -> None:
        self._rows: dict[str, ClauseResult] = {
            c.id: ClauseResult(id=c.id, title=c.title, status="SKIP", seen="not reached") for c in CLAUSES
        }
        self._final: set[str] = set()

    def set(self, clause_id: str, status: Status, seen: str = "") -> None:
        """Record a clause's outcome. A FAIL is never overwritten by a later PASS or SKIP of the same clause."""
        if clause_id in self._final and self._rows[clause_id].status == "FAIL":
            if status != "FAIL":
                return
            seen = f"{self._rows[clause_id].seen}; {seen}"
        if len(seen) > MAX_SEEN:
            seen = seen[:MAX_SEEN] + "…"
        self._rows[clause_id] = ClauseResult(id=clause_id, title=TITLES[clause_id], status=status, seen=seen)
        self._final.add(clause_id)

    def passed(self, clause_id: str, seen: str = "") -> None:
        self.set(clause_id, "PASS", seen)

    def failed(self, clause_id: str, seen: str) -> None:
        self.set(clause_id, "FAIL", seen)

    def skipped(self, clause_id: str, seen: str) -> None:
        self.set(clause_id, "SKIP", seen)

    def skip_rest(self, seen: str) -> None:
        """Every clause not decided yet: SKIP with `seen` (e.g. the extension never started)."""
        for cid in list(self._rows):
            if cid not in self._final:
                self.skipped(cid, seen)

    def rows(self) -> list[ClauseResult]:
        return [self._rows[c.id] for c in CLAUSES]
