"""An awaited hook call runs inside its extension's egress attribution (connections it opens while it handles the call
are traced with the call's context) when that extension has an egress proxy and the call a context; otherwise it runs
without one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from extension_sdk.proto import extension_pb2 as pb
from host import CallContext
from host.extensions._dispatch import Reply, call_hook
from host.sandbox._egress_hosting import EgressProxies

from test_dispatch import extension

CTX = CallContext(session_id="s", request_id="r1")


class Proxy:
    def __init__(self) -> None:
        self.calls: list[Any] = []  # the context attributed while a connection would open

    @contextlib.contextmanager
    def during(self, call: Any) -> Iterator[None]:
        self.calls.append(call)
        try:
            yield
        finally:
            self.calls.remove(call)


class Conn:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.seen: list[list[Any]] = []

    async def call(self, frame: pb.HostFrame, timeout: float) -> pb.ExtensionFrame:
        self.seen.append(list(self.proxy.calls))
        return pb.ExtensionFrame(id=frame.id, before_tool_call=pb.BeforeToolCallResponse())


def setup(with_proxy: bool) -> tuple[Any, EgressProxies, Proxy, Conn]:
    ext = extension("net", {"beforeToolCall": {"decisions": True}})
    egress = EgressProxies(lambda *a, **k: None)
    proxy = Proxy()
    if with_proxy:
        egress._proxies["net"] = proxy  # noqa: SLF001 - what start() leaves for an extension with permissions.network
    conn = Conn(proxy)
    ext.conn = conn
    return ext, egress, proxy, conn


def frame() -> pb.HostFrame:
    return pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(want_decision=True))


async def test_a_call_with_a_context_is_attributed_to_it_while_it_runs() -> None:
    ext, egress, proxy, conn = setup(with_proxy=True)
    answer = await call_hook(ext, "beforeToolCall", frame(), CTX, None, egress)
    assert isinstance(answer, Reply)
    assert conn.seen == [[CTX]] and proxy.calls == []  # attributed during the call, not after


async def test_no_attribution_without_a_context_or_without_a_proxy() -> None:
    ext, egress, proxy, conn = setup(with_proxy=True)
    assert isinstance(await call_hook(ext, "beforeToolCall", frame(), None, None, egress), Reply)
    ext, egress, proxy2, conn2 = setup(with_proxy=False)
    assert isinstance(await call_hook(ext, "beforeToolCall", frame(), CTX, None, egress), Reply)
    assert conn.seen == [[]] and conn2.seen == [[]]
