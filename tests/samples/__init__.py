"""Tests of the sample extensions."""
