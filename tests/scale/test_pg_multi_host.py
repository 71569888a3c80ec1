"""Several host processes on one PostgreSQL database: one turn at a time per session across them, a lease that dies
with its holder, durable submissions run exactly once (claimed with FOR UPDATE SKIP LOCKED), and two Agents serving
one session without losing or duplicating a message. A real PostgreSQL server (tests/fixtures/postgres.py)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import host
from host import Agent, PostgresMessageStore
from host.turn import _scripted_model

HOST_DIR = Path(host.__file__).parent
REPO = HOST_DIR.parent
# Load the store modules alone (a bare package over host/): importing the whole host package costs seconds.
STORE_ONLY = (  # another host process, with just the store (`import host` does not import litellm)
    "import asyncio, sys\n"
    "from host import open_store\n"
)


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    # stderr joins stdout: the reader skips log lines, and a full stderr pipe can never block the child
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)


def _wait_line(proc: subprocess.Popen[str], want: str, timeout: float = 60) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"child exited before {want!r} (exit {proc.wait()})")
        if line.strip() == want:
            return
    raise AssertionError(f"no {want!r} from the child within {timeout}s")


async def _acquired(store: PostgresMessageStore, session: str, within: float) -> bool:
    async def take() -> None:
        async with store.turn_lease(session):
            pass

    try:
        await asyncio.wait_for(take(), within)
        return True
    except TimeoutError:
        return False


# --------------------------------------------------------------------------- the turn lease


async def test_turn_lease_admits_one_holder_per_session_across_stores(postgres: Any) -> None:
    url = postgres.new_url()
    async with PostgresMessageStore(url) as a, PostgresMessageStore(url) as b:
        async with a.turn_lease("s1"):
            assert not await _acquired(b, "s1", 0.3)
            assert await _acquired(b, "s2", 5)  # another session is not held up
        assert await _acquired(b, "s1", 5)


async def test_turn_lease_of_a_killed_host_process_is_released(postgres: Any) -> None:
    url = postgres.new_url()
    code = STORE_ONLY + (
        "async def main():\n"
        "    async with open_store(sys.argv[1]) as s:\n"
        "        async with s.turn_lease('s1'):\n"
        "            print('held', flush=True)\n"
        "            await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    child = _child(code, url, str(HOST_DIR))
    try:
        _wait_line(child, "held")
        async with PostgresMessageStore(url) as b:
            assert not await _acquired(b, "s1", 0.3)
            child.send_signal(signal.SIGKILL)
            assert await _acquired(b, "s1", 10)
    finally:
        child.kill()
        child.wait(10)


# --------------------------------------------------------------------------- submissions


async def test_claimed_submission_is_not_claimable_by_another_host(postgres: Any) -> None:
    url = postgres.new_url()
    async with PostgresMessageStore(url) as a, PostgresMessageStore(url) as b:
        await a.record_submission("s1", "sub-1", {"messages": []})
        assert await a.claim_submission("sub-1")
        assert not await b.claim_submission("sub-1")
        await a.set_submission_status("sub-1", "running")
        assert [p["submission_id"] for p in await b.pending_submissions("s1")] == ["sub-1"]
        await a.set_submission_status("sub-1", "completed")
        assert not await b.claim_submission("sub-1")  # finished: nobody runs it again
        assert await b.pending_submissions("s1") == []


async def test_submission_of_a_host_that_died_is_claimable_again(postgres: Any) -> None:
    url = postgres.new_url()
    async with PostgresMessageStore(url) as b:
        a = PostgresMessageStore(url)
        await a.record_submission("s1", "sub-1", {"messages": []})
        assert await a.claim_submission("sub-1")
        await a.set_submission_status("sub-1", "running")
        await a.close()  # its connection goes, as when the process dies: the claim's transaction rolls back
        assert await b.claim_submission("sub-1")
        assert [p["status"] for p in await b.pending_submissions("s1")] == ["pending"]


# --------------------------------------------------------------------------- two Agents, one session


async def test_two_agents_on_one_database_serve_one_session_turn_by_turn(postgres: Any) -> None:
    url = postgres.new_url()
    _scripted_model.last_requests.clear()
    async with Agent(session_id="shared", store=url) as a, Agent(session_id="shared", store=url) as b:

        async def talk(agent: Agent, tag: str) -> None:
            for i in range(5):
                result = await agent.chat(f"/stall 20\n{tag}{i}")
                assert result.status == "completed"

        await asyncio.gather(talk(a, "a"), talk(b, "b"))
    async with PostgresMessageStore(url) as store:
        messages = await store.messages("shared")
    assert [m["role"] for m in messages] == ["user", "assistant"] * 10  # turns never overlapped
    assert len({m["id"] for m in messages}) == 20
    for question, answer in zip(messages[::2], messages[1::2]):  # each answer follows its own question
        assert answer["content"] == "echo: " + question["content"].split("\n", 1)[1]
    assert sorted(m["content"] for m in messages[::2]) == sorted(f"/stall 20\n{t}{i}" for t in "ab" for i in range(5))
    # each turn's model request saw every earlier turn, whichever Agent ran it
    seen = [len(r["messages"]) for r in _scripted_model.last_requests if r["model"].endswith("scripted")]
    assert [n - (seen[0] - 1) for n in seen] == [1 + 2 * k for k in range(10)]


async def test_submission_of_a_killed_host_is_resumed_once_by_another(postgres: Any, tmp_path: Path) -> None:
    url = postgres.new_url()
    code = (
        "import asyncio, sys\n"
        "from host import Agent\n"
        "class Slow(Agent):\n"
        "    async def before_turn(self, ctx):\n"
        "        print('in turn', flush=True)\n"
        "        await asyncio.sleep(600)  # killed in the middle of the turn\n"
        "async def main():\n"
        "    async with Slow(session_id='s1', store=sys.argv[1]) as a:\n"
        "        await a.submit_messages('slow one', submission_id='sub-1')\n"
        "        await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    child = _child(code, url)
    try:
        _wait_line(child, "in turn", timeout=90)
        async with PostgresMessageStore(url) as probe:
            assert not await probe.claim_submission("sub-1")  # the child holds it
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        async with Agent(session_id="s1", store=url) as b:
            result = await b.wait_for_submission("sub-1")
        assert result.status == "completed"
    finally:
        child.kill()
        child.wait(10)
    async with PostgresMessageStore(url) as store:
        messages = await store.messages("s1")
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "slow one"), ("assistant", "echo: slow one")]
        assert await store.pending_submissions("s1") == []


def test_cli_store_flag_takes_a_postgresql_url(postgres: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from host.cli import main

    url = postgres.new_url()
    monkeypatch.chdir(tmp_path)
    assert main(["run", "hello there", "--store", url, "--session", "cli-pg", "--workspace", str(tmp_path / "ws"),
                 "--no-trace", "--sandbox", "off"]) == 0

    async def transcript() -> list[str]:
        async with PostgresMessageStore(url) as store:
            return [m["content"] for m in await store.messages("cli-pg")]

    assert asyncio.run(transcript()) == ["hello there", "echo: hello there"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_submission_answered_before_its_host_died_is_not_run_again(backend: str, request: pytest.FixtureRequest,
                                                                         tmp_path: Path) -> None:
    from host import open_store

    url = str(tmp_path / "s.db") if backend == "sqlite" else request.getfixturevalue("postgres").new_url()
    question = {"id": "q1", "role": "user", "parts": [{"type": "text", "text": "hi"}], "content": "hi"}
    answer = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "echo: hi"}], "content": "echo: hi"}
    async with open_store(url) as store:  # what a host left when it died between the answer and the status
        await store.record_submission("s1", "sub-1", {"messages": [question], "body": None})
        await store.set_submission_status("sub-1", "running")
        await store.append("s1", question)
        await store.append("s1", answer)
    async with Agent(session_id="s1", store=url) as agent:
        result = await agent.wait_for_submission("sub-1")
        assert result.status == "completed" and result.message == answer
        assert [m["id"] for m in await agent.store.messages()] == ["q1", "a1"]
        assert await agent.store.pending_submissions() == []


async def test_resume_pending_takes_up_what_a_dead_host_left(postgres: Any) -> None:
    url = postgres.new_url()
    async with Agent(session_id="s1", store=url) as agent:
        async with PostgresMessageStore(url) as other:  # another host recorded it, claimed it, and died
            await other.record_submission("s1", "sub-9", {"messages": [{"id": "q9", "role": "user", "content": "x",
                                                                        "parts": [{"type": "text", "text": "x"}]}]})
            assert await other.claim_submission("sub-9")
            assert await agent.resume_pending() == ["sub-9"]
            assert (await agent.wait_for_submission("sub-9")).status == "skipped"  # still held by the live host
        # its connection went, so the server rolls the claim back: once it has seen the connection end (a moment
        # under load), the submission is taken up and run
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            assert await agent.resume_pending() == ["sub-9"]
            result = await agent.wait_for_submission("sub-9")
            if result.status != "skipped" or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert result.status == "completed" and result.message["content"] == "echo: x"
