"""Where the soak test's fixture extension lives."""

from pathlib import Path

CHAOS = Path(__file__).parent / "fixtures" / "chaos_ext.py"
