"""A plain TCP proxy in front of the API server, whose connections a test can cut.

Used to cut the operator's connections (its pod watch included) while the API server
itself keeps running: real sockets, real resets, nothing mocked. TLS passes through
untouched (the API server's certificate is for 127.0.0.1, which the proxy also is).

- ``TcpProxy(upstream_port).start()`` listens on a free port of 127.0.0.1 (``.port``);
- ``.cut(refuse_for)`` resets every open connection and refuses new ones for `refuse_for`
  seconds (the listener is closed, then opened again on the same port);
- ``.kubeconfig(path)`` writes a copy of the cluster's kubeconfig that goes through it;
- ``.stop()``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from pathlib import Path

import yaml

from tests.e2e import cluster


class TcpProxy:
    """See module docstring."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.port = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._stopped = False

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by cut() or stop()
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)

    def cut(self, refuse_for: float = 2.0) -> int:
        """Reset every open connection and refuse new ones for a while; returns how many."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept()
            self._listener.close()
        with self._lock:
            cut = list(self._open)
            self._open.clear()
        for sock in cut:
            with contextlib.suppress(OSError):
                # SO_LINGER 0: the close sends a reset, as a dropped connection would be seen.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                # Wakes the pump thread blocked in recv() (a close alone would not, and the
                # connection would hang open instead of being cut).
                sock.shutdown(socket.SHUT_RD)
            with contextlib.suppress(OSError):
                sock.close()
        self.cuts += 1
        time.sleep(refuse_for)
        if not self._stopped:
            self._listen()
        return len(cut) // 2

    def kubeconfig(self, path: Path) -> Path:
        config = yaml.safe_load(cluster.KUBECONFIG.read_text())
        for entry in config["clusters"]:
            entry["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path.write_text(yaml.safe_dump(config))
        return path

    def stop(self) -> None:
        self._stopped = True
        self.cut(refuse_for=0)
