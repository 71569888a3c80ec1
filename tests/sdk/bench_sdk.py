"""Ad-hoc SDK benchmark (not collected by pytest): cold start, Connect observation throughput, unary latency.

    .venv/bin/python tests/sdk/bench_sdk.py
"""
import os, sys, time, statistics, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_processes import start, make_env, read_line, spawn, wait_exit
from pathlib import Path
from extension_sdk.proto import extension_pb2 as pb
times = []
for i in range(10):
    d = Path(tempfile.mkdtemp(prefix="hw-b-"))
    t0 = time.perf_counter()
    p = start("greeter", make_env(d, "greeter", "tok"))
    line = read_line(p, 15)
    times.append((time.perf_counter() - t0) * 1000)
    p.stdin.close(); wait_exit(p); p.stdout.close(); p.stderr.close()
print("cold start ms: median %.1f min %.1f max %.1f" % (statistics.median(times), min(times), max(times)))
ext = spawn("mathx")
batch = pb.ObservationBatch(items=[pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="tok%d" % i)) for i in range(500)])
def frames(n):
    for i in range(n):
        yield pb.HostFrame(id=i + 1, observations=batch)
t0 = time.perf_counter()
out = list(ext.stub.Connect(frames(40), metadata=ext.md, timeout=60))
dt = time.perf_counter() - t0
print("connect: %d observations in %.3fs -> %.0f obs/s" % (40 * 500, dt, 40 * 500 / dt))
req = pb.BeforeTurnRequest(snapshot=pb.TurnSnapshot(system="x"))
g = spawn("greeter")
lat = []
for i in range(300):
    t0 = time.perf_counter(); g.stub.BeforeTurn(req, metadata=g.md); lat.append((time.perf_counter()-t0)*1e6)
print("unary BeforeTurn p50 %.0f us" % statistics.median(lat[50:]))
ext.stop(); g.stop()
