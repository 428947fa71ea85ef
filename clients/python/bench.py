"""Appends/s of the Python client's batched stream against a running node.

    bin/node serve --data DIR/agentstate.db --grpc-addr 127.0.0.1:7520 --http-addr "" &
    python3 clients/python/bench.py --addr 127.0.0.1:7520 --callers 64 --appends 65536
    bin/node bench --mode grpc --addr 127.0.0.1:7520 --sessions 64 --clients 1 --appends 65536

Each caller appends one message of --message-bytes at a time to its own
session (--sessions 64 with 64 callers), waiting for each outcome, as
`node bench` does; all share one client, so one AppendBatches stream. Then
every session is read back and checked: dense sequences 0..n-1, every
acknowledged message stored once at its acknowledged sequence. It is a
benchmark, not a test: it prints figures and fails only on a lost,
duplicated or misplaced message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from agentstate import AsyncClient, Client, new_message  # noqa: E402

Acks = Dict[str, List[Tuple[int, str]]]


def percentile(sorted_values: List[float], p: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def run_threads(addr: str, sessions: List[str], callers: int, per_caller: int, content: str, opts: Dict[str, Any]) -> Tuple[float, List[float], Acks]:
    acks: Acks = {s: [] for s in sessions}
    lats: List[float] = []
    lock = threading.Lock()
    start = threading.Barrier(callers + 1)
    with Client(addr, **opts) as c:
        # Warm the stream up outside the measurement.
        c.sessions.get(sessions[0])

        def caller(i: int) -> None:
            sid = sessions[i % len(sessions)]
            mine: List[Tuple[int, str]] = []
            my_lats: List[float] = []
            start.wait()
            for _ in range(per_caller):
                m = new_message("user", content)
                t0 = time.perf_counter()
                r = c.sessions.append(sid, [m])
                my_lats.append(time.perf_counter() - t0)
                mine.append((r.messages[0].sequence, m.message_id))
            with lock:
                acks[sid].extend(mine)
                lats.extend(my_lats)

        threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
    return elapsed, lats, acks


async def run_tasks(addr: str, sessions: List[str], callers: int, per_caller: int, content: str, opts: Dict[str, Any]) -> Tuple[float, List[float], Acks]:
    acks: Acks = {s: [] for s in sessions}
    lats: List[float] = []
    async with AsyncClient(addr, **opts) as c:
        await c.sessions.get(sessions[0])

        async def caller(i: int) -> None:
            sid = sessions[i % len(sessions)]
            for _ in range(per_caller):
                m = new_message("user", content)
                t0 = time.perf_counter()
                r = await c.sessions.append(sid, [m])
                lats.append(time.perf_counter() - t0)
                acks[sid].append((r.messages[0].sequence, m.message_id))

        t0 = time.perf_counter()
        await asyncio.gather(*(caller(i) for i in range(callers)))
        elapsed = time.perf_counter() - t0
    return elapsed, lats, acks


def verify(addr: str, acks: Acks) -> None:
    with Client(addr) as c:
        for sid, got in acks.items():
            stored = [(m.sequence, m.message_id) for m in c.sessions.iter_messages(sid)]
            if [s for s, _ in stored] != list(range(len(stored))):
                raise SystemExit(f"session {sid}: sequences not dense 0..{len(stored) - 1}")
            missing = set(got) - set(stored)
            if missing or len(got) != len(stored):
                raise SystemExit(f"session {sid}: {len(missing)} acknowledged messages not stored as acknowledged; "
                                 f"{len(got)} acknowledged, {len(stored)} stored")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", required=True, help="a running node's gRPC address")
    p.add_argument("--callers", type=int, default=64)
    p.add_argument("--sessions", type=int, default=0, help="sessions written to (default: one per caller)")
    p.add_argument("--appends", type=int, default=65536, help="total appends, spread over the callers")
    p.add_argument("--message-bytes", type=int, default=200)
    p.add_argument("--mode", choices=["threads", "asyncio"], default="threads")
    p.add_argument("--linger", type=float, default=None, help="the clients' append_linger in seconds (default: theirs)")
    p.add_argument("--transport", choices=["loop", "threads"], default=None,
                   help="--mode threads: the Client's append_transport (default: its default, loop)")
    a = p.parse_args()
    n_sessions = a.sessions or a.callers
    per_caller = max(1, a.appends // a.callers)
    with Client(a.addr) as c:
        sessions = [c.sessions.create("bench").session.session_id for _ in range(n_sessions)]
    content = "x" * a.message_bytes
    opts: Dict[str, Any] = {} if a.linger is None else {"append_linger": a.linger}
    if a.transport is not None:
        if a.mode != "threads":
            p.error("--transport is for --mode threads")
        opts["append_transport"] = a.transport
    cpu0 = time.process_time()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    if a.mode == "threads":
        elapsed, lats, acks = run_threads(a.addr, sessions, a.callers, per_caller, content, opts)
    else:
        elapsed, lats, acks = asyncio.run(run_tasks(a.addr, sessions, a.callers, per_caller, content, opts))
    cpu = time.process_time() - cpu0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    verify(a.addr, acks)
    total = per_caller * a.callers
    lats.sort()
    mode = a.mode if a.mode != "threads" else f"threads ({a.transport or 'loop'})"
    print(f"python {mode}: callers={a.callers} sessions={n_sessions} appends={total} "
          f"message_bytes={a.message_bytes}")
    print(f"appends/s {total / elapsed:.0f}  p50 {percentile(lats, 0.5) * 1e3:.1f}ms  "
          f"p99 {percentile(lats, 0.99) * 1e3:.1f}ms  client cpu {cpu * 1e6 / total:.0f}µs/append "
          f"(sys {(ru.ru_stime - ru0.ru_stime) * 1e6 / total:.0f})  "
          f"thread switches {(ru.ru_nvcsw - ru0.ru_nvcsw) / total:.1f}/append  verified")


if __name__ == "__main__":
    main()
