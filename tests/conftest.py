"""Shared pytest set-up: litellm must not reach for the network at import."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def postgres():  # type: ignore[no-untyped-def]
    """A throwaway PostgreSQL server for the whole run (tests/fixtures/postgres.py); `postgres.new_url()` gives a
    fresh database. Missing server binaries skip with the reason, except under CI (CI=true), where they fail."""
    from fixtures.postgres import PostgresServer, missing_reason

    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
