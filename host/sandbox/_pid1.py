"""pid 1's duties, for a Python extension that is the init of its own pid namespace (no separate init process).

STANDALONE (stdlib only; host/sandbox/_zygote_main.py loads it by path, like the launcher, and the zygote's cloned
child calls `install` right before the extension's code runs). See host/sandbox/_launcher.py `_become_pid1`.

The kernel treats pid 1 of a pid namespace specially, and an ordinary program does not expect it:

- **Orphans.** A process whose parent exits is re-parented to pid 1, and only pid 1 can reap it: a daemonized
  (`setsid()`) grandchild that exits stays a zombie, holding a pid of `limits.processes`, unless pid 1 waits for
  it. A SIGCHLD handler reaps every exited child that is NOT one the extension started itself: those are the
  extension's to wait for (subprocess, asyncio, os.waitpid). Which are its own is known by wrapping the ways
  Python starts a process (os.fork, os.forkpty, os.posix_spawn[p], _posixsubprocess.fork_exec: subprocess,
  asyncio, multiprocessing, pty, os.spawn*, os.popen) — a child forked by native code outside those may be reaped
  before its creator waits for it.
- **Signals.** The kernel drops a signal sent to pid 1 (from inside the namespace, or by the pid itself) whose
  disposition is the default, and drops it too when it comes from the host unless it is SIGKILL or SIGSTOP: SIGTERM
  would do nothing until the SDK installs its own handler. Each signal whose default is to end the process and
  that Python leaves at its default (SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGVTALRM,
  SIGPROF) gets a handler that ends the process the way the default would have: the wait status "killed by N"
  is written to the status pipe the zygote reads when it reaps the process (what the host then sees: -N), and
  the process exits at once. A Python-level handler runs between bytecodes: a signal that arrives while the
  main thread is inside a long native call acts when that call returns (the host's stop still ends in SIGKILL
  after its grace; RLIMIT_CPU's hard limit, one second after SIGXCPU, is a SIGKILL too). A handler the
  extension installs replaces these; a child the extension forks gets the default dispositions back.
- **Exit.** When pid 1 exits, the kernel kills everything left in the namespace: a `setsid()` grandchild dies
  with the extension, on unload, close or kill -9 of the host (PR_SET_PDEATHSIG ties pid 1 to the zygote).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

#: Signals whose default action ends a process and that Python leaves at SIG_DFL (SIGINT raises
#: KeyboardInterrupt: the zygote child's `_finish_signal` reports it; SIGPIPE and SIGXFSZ are ignored by Python).
TERMINATING = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGVTALRM", "SIGPROF")

_status_fd: int | None = None
_own: set[int] = set()  # pids of the children the extension started itself (never reaped here)
_forking = 0  # a wrapped fork in progress: reaping waits until its pid is known
_deferred = False
_installed: dict[int, Any] = {}  # signal -> the handler installed here
_lock = threading.Lock()  # the wrappers' count (never taken by the signal handler)


def active() -> bool:
    """True in the extension that is pid 1 (not in a process it forked)."""
    return _status_fd is not None and os.getpid() == 1


def install(status_fd: int) -> None:
    """Take on pid 1's duties (see the module docstring). Call once, in the main thread, before the extension's
    code runs."""
    global _status_fd
    _status_fd = status_fd
    _wrap_process_starts()
    for name in TERMINATING:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _die_by)
            _installed[sig] = _die_by
    signal.signal(signal.SIGCHLD, _on_sigchld)
    _installed[signal.SIGCHLD] = _on_sigchld
    os.register_at_fork(after_in_child=_in_forked_child)


def exit_by_signal(sig: int) -> None:
    """End pid 1 as if `sig` had killed it: the zygote reports -sig. Never returns."""
    fd = _status_fd
    try:
        if fd is not None:
            os.write(fd, str(int(sig) & 0x7F).encode())  # a wait status: killed by `sig`
    except OSError:
        pass
    os._exit(128 + int(sig))


def _die_by(sig: int, _frame: Any) -> None:
    if not active():  # a forked child that kept the handler: the default action, for real
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return
    exit_by_signal(sig)


def _in_forked_child() -> None:
    """In a child the extension forked (os.fork: no exec): it is not pid 1, so the defaults are right again."""
    global _status_fd, _lock, _forking, _deferred
    if _status_fd is None:
        return
    _status_fd = None
    _own.clear()
    _lock = threading.Lock()  # another thread may have held it at the fork
    _forking = 0
    _deferred = False
    for sig, handler in _installed.items():
        try:
            if signal.getsignal(sig) is handler:
                signal.signal(sig, signal.SIG_DFL)
        except ValueError:  # not the main thread (cannot happen after a fork; never fail the child over it)
            pass


# ---------------------------------------------------------------- orphans


def _on_sigchld(_sig: int, _frame: Any) -> None:
    global _deferred
    if _forking:
        _deferred = True  # a fork's pid is not recorded yet: reap once it is
        return
    reap_orphans()


def reap_orphans() -> int:
    """Reap every exited child that the extension did not start itself; returns how many."""
    if not active():
        return 0
    try:
        if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return 0  # nothing has exited
    except ChildProcessError:
        return 0
    global _deferred
    reaped = 0
    for pid in _zombie_children():
        if _forking:  # a process start began since: its pid may be among these, unrecorded yet
            _deferred = True
            break
        if pid in _own:
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
        except ChildProcessError:
            pass
    return reaped


def _zombie_children() -> list[int]:
    """Exited children of pid 1, from this pid namespace's own /proc (a handful of entries)."""
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z" and fields[1] == b"1":
            out.append(int(name))
    return out


def _record(pid: int) -> None:
    if pid > 0 and active():
        _own.add(pid)
        _forget_reaped()


def _forget_reaped() -> None:
    """Drop pids that no longer exist (their creator waited for them), so the set stays small."""
    if len(_own) > 64:
        for pid in list(_own):
            if not os.path.exists(f"/proc/{pid}"):
                _own.discard(pid)


def _tracked(start: Callable[..., Any], pid_of: Callable[[Any], int]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _forking, _deferred
        with _lock:
            _forking += 1
        try:
            result = start(*args, **kwargs)
            if pid_of(result) != 0:  # 0: in a forked child
                _record(pid_of(result))
            return result
        finally:
            with _lock:
                _forking -= 1
                reap = _forking == 0 and _deferred
                if reap:
                    _deferred = False
            if reap:
                reap_orphans()

    wrapper.__wrapped__ = start  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(start, "__name__", "wrapper")
    wrapper.__doc__ = getattr(start, "__doc__", None)
    return wrapper


def _wrap_process_starts() -> None:
    import _posixsubprocess

    os.fork = _tracked(os.fork, lambda pid: pid)
    if hasattr(os, "forkpty"):
        os.forkpty = _tracked(os.forkpty, lambda result: result[0])
    for name in ("posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, _tracked(getattr(os, name), lambda pid: pid))
    _posixsubprocess.fork_exec = _tracked(_posixsubprocess.fork_exec, lambda pid: pid)
    try:
        import subprocess

        if hasattr(subprocess, "_fork_exec"):  # Python >= 3.12 binds it at import
            subprocess._fork_exec = _posixsubprocess.fork_exec
    except ImportError:
        pass
