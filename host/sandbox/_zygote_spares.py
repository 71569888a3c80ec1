"""The zygote's spares: children cloned into a sandbox's namespaces and cgroups before any request needs them.

STANDALONE (stdlib only; host/sandbox/_zygote_main.py loads it by path, like the launcher).

Of a sandboxed start's path from spawn request to the extension's first line, the longest part that is not the
extension's own start-up is a kernel wait: moving a task into a cgroup (cgroup v1 here, so no CLONE_INTO_CGROUP)
waits for an RCU grace period, 5-20 ms on this loaded 2-core VM. Like Android's pool of unspecialized app
processes, the zygote keeps spares: a spare is cloned into the namespaces a spec asks for (`clone_flags`), has
written its uid/gid maps and joined `<base>/hookwire/spare-<pid>` for each cgroup base (paying that wait while
idle), and then blocks on a private socket. A spawn request with the same flags and bases takes a spare: the
zygote hands it the request's four fds, the spare reads its config like any child, renames its cgroups to
`<extension id>-<pid>` (what the host expects) and sets their limits, then goes on as init (its private root,
the extension's fork): no limit is missing before the extension's code runs, and every layer is the same.

Sizing: per (flags, bases), as many spares as the largest burst of requests seen (requests less than BURST_S
apart), at most the host's `spares` limit (HOOKWIRE_ZYGOTE_SPARES, default 8; 0: none). Spares are refilled
only once the zygote has had no request for REFILL_IDLE_S, so a burst of requests is served first, and not while
the host says a start is still in flight (its `busy` and `idle` messages, host/sandbox/_zygote.py `Zygote.busy`):
a refill's clone, id maps and cgroup joins cost ~2 ms of CPU each, and five of them in the middle of five starts
competed with those starts for the same two cores. A host that stays busy for REFILL_BUSY_S (a start that
hangs) gets its spares anyway. A spare that dies is dropped and its cgroups removed; when the zygote stops it
kills its spares and removes theirs.
"""

from __future__ import annotations

import os
import signal
import socket
import time

BURST_S = 0.1
REFILL_IDLE_S = 0.01
REFILL_BUSY_S = 1.0  # the host said "busy" and no request since: refill anyway (a start may hang for seconds)
SPARE_NAME = "spare"  # the launcher's SPARE_NAME: a spare's groups are <base>/hookwire/spare-<pid>

Key = tuple[int, tuple[str, ...]]  # (clone flags, cgroup bases)


class Spare:
    """One idle spare: its pid, the zygote's end of its socket (fd), the read end of its status pipe.
    (A plain class: this module is loaded by path, outside sys.modules, where dataclasses can't resolve it.)"""

    def __init__(self, pid: int, sock: int, status_r: int, key: Key) -> None:
        self.pid = pid
        self.sock = sock
        self.status_r = status_r
        self.key = key
        self.groups: list[str] = []

    def fds(self) -> list[int]:
        return [self.sock, self.status_r]


def request_key(flags: int, cgroups: object) -> Key | None:
    """The pool a spawn request draws from, or None (not cloned into namespaces: no spare fits)."""
    if not flags:
        return None
    bases = tuple(str(b) for b in cgroups) if isinstance(cgroups, list) else ()
    return flags, bases


def spare_groups(bases: tuple[str, ...], pid: int) -> list[str]:
    return [os.path.join(base, "hookwire", f"{SPARE_NAME}-{pid}") for base in bases]


class SparePool:
    """The zygote's idle spares, per key; what to refill next. Not thread-safe (the zygote has one thread)."""

    def __init__(self) -> None:
        self.limit = 0
        self._spares: dict[Key, list[Spare]] = {}
        self._by_pid: dict[int, Spare] = {}
        self._target: dict[Key, int] = {}
        self._burst: dict[Key, tuple[int, float]] = {}  # key -> (requests in the current burst, last request)
        self._failed: set[Key] = set()
        self._taken: dict[int, list[str]] = {}  # pid of a spare a request took -> its spare cgroups
        self.host_busy = False  # the host has a start in flight (its "busy" message; "idle" ends it)
        self._busy_since = 0.0  # the host's "busy" message or its latest request since, whichever came last

    def host_says(self, busy: bool) -> None:
        """The host's `busy` / `idle` message."""
        self.host_busy = busy
        if busy:
            self._busy_since = time.monotonic()

    def refill_wait_s(self) -> float | None:
        """How long to wait for a message before refilling a spare (None: nothing to refill): REFILL_IDLE_S from
        the last message while the host is idle; while it is busy, what is left of REFILL_BUSY_S since it said so
        (or since its latest request)."""
        if self.wanted() is None:
            return None
        if not self.host_busy:
            return REFILL_IDLE_S
        return max(0.0, REFILL_BUSY_S - (time.monotonic() - self._busy_since))

    def __contains__(self, pid: int) -> bool:
        return pid in self._by_pid

    def __len__(self) -> int:
        return len(self._by_pid)

    def note_request(self, key: Key, limit: int) -> None:
        """A spawn request for `key`: grow the key's target to the burst it belongs to (at most `limit`)."""
        self.limit = max(0, limit)
        now = time.monotonic()
        self._busy_since = now
        count, last = self._burst.get(key, (0, 0.0))
        count = count + 1 if now - last < BURST_S else 1
        self._burst[key] = (count, now)
        self._target[key] = min(self.limit, max(self._target.get(key, 0), count))

    def take(self, key: Key) -> Spare | None:
        spares = self._spares.get(key)
        if not spares:
            return None
        spare = spares.pop(0)
        del self._by_pid[spare.pid]
        self._taken[spare.pid] = spare.groups
        return spare

    def exited(self, pid: int) -> None:
        """A taken spare exited: remove its spare cgroups if it died before renaming them (else: nothing there)."""
        groups = self._taken.pop(pid, None)
        if groups:
            _remove_groups(groups)

    def wanted(self) -> Key | None:
        """A key whose pool is below its target (refill it when idle), or None."""
        for key, target in self._target.items():
            if key not in self._failed and len(self._spares.get(key, ())) < min(target, self.limit):
                return key
        return None

    def add(self, spare: Spare) -> None:
        self._taken.pop(spare.pid, None)
        spare.groups = spare_groups(spare.key[1], spare.pid)
        self._spares.setdefault(spare.key, []).append(spare)
        self._by_pid[spare.pid] = spare

    def failed(self, key: Key) -> None:
        """Cloning a spare for `key` failed: requests for it clone as before, no more refills."""
        self._failed.add(key)

    def lost(self, pid: int) -> None:
        """A spare exited (the zygote reaped it): forget it, close its fds, remove its cgroups."""
        spare = self._by_pid.pop(pid, None)
        if spare is None:
            return
        self._spares[spare.key].remove(spare)
        _close(spare.fds())
        _remove_groups(spare.groups)

    def fds(self) -> list[int]:
        """Every fd the zygote holds for its spares (a new child must close them)."""
        return [fd for spare in self._by_pid.values() for fd in spare.fds()]

    def close(self) -> None:
        """Kill every spare, reap it and remove its cgroups (the zygote is stopping)."""
        spares = list(self._by_pid.values())
        self._by_pid.clear()
        self._spares.clear()
        for spare in spares:
            try:
                os.kill(spare.pid, signal.SIGKILL)
            except OSError:
                pass
        for spare in spares:
            try:
                os.waitpid(spare.pid, 0)
            except OSError:
                pass
            _close(spare.fds())
            _remove_groups(spare.groups)


def hand_over(spare: Spare, fds: list[int]) -> bool:
    """Send a request's four fds to `spare` (it then becomes the extension's init). False if it is gone."""
    sock = socket.socket(fileno=spare.sock)
    try:
        socket.send_fds(sock, [b"go"], fds)
        return True
    except OSError:
        return False
    finally:
        sock.detach()


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _remove_groups(groups: list[str]) -> None:
    """rmdir a dead spare's cgroups (briefly retried: a group stays busy until its last task is released)."""
    for group in groups:
        for _ in range(20):
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.005)
