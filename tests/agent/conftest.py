"""Shared set-up for the turn-engine tests: a clean record of scripted-model requests per test."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from host.turn import _scripted_model


@pytest.fixture(autouse=True)
def _clear_requests() -> None:
    _scripted_model.last_requests.clear()
