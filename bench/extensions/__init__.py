"""Fixture extensions and baseline servers used by the benchmarks (run as scripts, not imported)."""
