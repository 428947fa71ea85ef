"""The background event loop of the blocking clients' append streams ("agentstate-io"): one per process while any is open.

See :mod:`agentstate.loop_batch` for why the loop exists and the caveat of
mixing it with a program's own grpc.aio loops.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Dict, Optional


def ignore_poller_race(loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
    # grpc.aio's poller wakes every loop bound to it; the losers' reads of
    # its notification socket fail with EAGAIN (grpc/grpc issue 25364),
    # harmless and otherwise logged on every event.
    if isinstance(context.get("exception"), BlockingIOError) and "_handle_events" in repr(context.get("handle")):
        return
    loop.default_exception_handler(context)


class IOLoop:
    """The background event loop of the blocking clients' streams: one per process while any is open.

    Held by each appender from its first append to its close; the last
    release stops and closes it, so that a process that has stopped
    appending leaves no loop bound to grpc.aio's poller (see the mixing
    caveat above).
    """

    _lock = threading.Lock()
    _loop: Optional[asyncio.AbstractEventLoop] = None
    _thread: Optional[threading.Thread] = None
    _holders = 0

    @classmethod
    def acquire(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_exception_handler(ignore_poller_race)
                started = threading.Event()

                def run() -> None:
                    # grpc.aio finds this loop as the running one: its
                    # channels are made by coroutines on it (_make_channel).
                    loop.call_soon(started.set)
                    loop.run_forever()

                # A daemon: it must not keep a program that forgot close()
                # from exiting; what it still carries then is lost.
                cls._thread = threading.Thread(target=run, name="agentstate-io", daemon=True)
                cls._thread.start()
                started.wait()
                cls._loop = loop
            cls._holders += 1
            return cls._loop

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._holders -= 1
            if cls._holders > 0 or cls._loop is None:
                return
            loop, thread = cls._loop, cls._thread
            cls._loop = cls._thread = None
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()

    @classmethod
    def _after_fork(cls) -> None:
        # A forked child has the loop object but not its thread.
        cls._lock = threading.Lock()
        cls._loop = cls._thread = None
        cls._holders = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=IOLoop._after_fork)
