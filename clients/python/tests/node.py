"""Starts a real node (bin/node serve) for the tests: a temp SQLite file, free ports.

The binary is $AGENTSTATE_NODE, else bin/node at the repository's root
(`make build`). Ports are chosen by the node (127.0.0.1:0) and read from its
"serving" log line, so parallel runs cannot collide on a port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 20.0


def node_binary() -> str:
    path = os.environ.get("AGENTSTATE_NODE") or str(REPO / "bin" / "node")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no node binary at {path}: run `make build` or set AGENTSTATE_NODE")
    return path


class Node:
    """A running node; stop() drains it (SIGTERM) and removes its files."""

    def __init__(
        self,
        token: Optional[str] = None,
        tls_cert: Optional[Path] = None,
        tls_key: Optional[Path] = None,
        grpc_addr: str = "127.0.0.1:0",
        dir: Optional[Path] = None,
        args: Optional[List[str]] = None,
    ) -> None:
        """Starts a node; dir (kept by stop(keep=True)) restarts one on its database; args are more serve flags."""
        self.dir = dir if dir is not None else Path(tempfile.mkdtemp(prefix="agentstate-py-"))
        extra = list(args or [])
        args = [
            node_binary(), "serve",
            "--data", str(self.dir / "agentstate.db"),
            "--grpc-addr", grpc_addr,
            "--http-addr", "127.0.0.1:0",
            "--log-format", "json",
        ]
        if token is not None:
            tok = self.dir / "token"
            tok.write_text(token + "\n")
            tok.chmod(0o600)
            args += ["--auth-token-file", str(tok)]
        if tls_cert is not None and tls_key is not None:
            args += ["--tls-cert", str(tls_cert), "--tls-key", str(tls_key)]
        args += extra
        self.log: List[str] = []
        self._serving = threading.Event()
        self.grpc_addr = ""
        self.http_addr = ""
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _drain(self) -> None:
        # Read every line, or the node blocks on a full pipe.
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if not self._serving.is_set():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "serving":
                    self.grpc_addr, self.http_addr = rec["grpc_addr"], rec["http_addr"]
                    self._serving.set()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        if not self._serving.wait(START_TIMEOUT):
            raise RuntimeError("node did not log its addresses:\n" + "".join(self.log))
        url = f"http://{self.http_addr}/readyz"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited with {self.proc.returncode}:\n" + "".join(self.log))
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("node not ready in time:\n" + "".join(self.log))
            time.sleep(0.05)  # polling /readyz with a deadline, not synchronization

    def stop(self, keep: bool = False, kill: bool = False) -> None:
        """Drains the node (SIGTERM), or kills it (SIGKILL, a crash); keep leaves its files."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drainer.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
