"""The sandbox: what an extension process may run, read, reach and leave behind.

    _plan.py           the launch plan: which layers apply here and the launcher argv that applies them
    _launcher.py       the launcher script (run by path, stdlib only): contain() -> init -> the extension; for the
                       zygote, clone_into_namespaces() + contain_cloned() (its child is the extension, pid 1:
                       no waiter, no init; with an egress relay, init)
    _pid1.py           pid 1's duties for that extension: orphans reaped, default-fatal signals still fatal
    _zygote.py         a pre-imported Python that forks extensions fast; _zygote_main.py is its script
    _zygote_spares.py  the zygote's spares: children cloned into a sandbox's namespaces and cgroups ahead of requests
    _fs.py             the read-only root and private paths; _etc.py the shared /etc view; _fs_cleanup.py removes
                       trees safely
    _cgroups.py        the pids and memory cgroups of each extension process, removed when it exits
    _egress_*.py       permissions.network: per-extension egress proxy, its policy, the in-namespace relay

The public names are re-exported by `host`.
"""
