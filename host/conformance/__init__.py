"""The conformance kit: `hookwire ext test MANIFEST` runs any extension (any language) through the contract of
docs/protocol.md over real gRPC and reports one row per numbered clause (PASS, FAIL or SKIP, and what was seen).

    report = await run_conformance("sample_extensions/tools/manifest.yaml")
    print(report.to_text()); report.passed
"""

from ._clauses import CLAUSE_IDS, CLAUSES, Clause
from ._report import ClauseResult, ConformanceReport
from ._runner import run_conformance

__all__ = ["CLAUSES", "CLAUSE_IDS", "Clause", "ClauseResult", "ConformanceReport", "run_conformance"]
