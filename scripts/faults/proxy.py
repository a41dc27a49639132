"""A TCP proxy the harness controls, to partition one process from Postgres or Redis.

`Proxy(upstream)` listens on a loopback port and relays each connection to `upstream` (a
`(host, port)` pair, or the path of a Unix socket). `cut()` is a network partition: nothing
is relayed any more in either direction and new connections are accepted but not connected
upstream, so both sides simply wait, as across a dropped link (no reset, no error, until
their own timeouts fire). `heal()` lets everything through again: bytes that waited are
delivered, as TCP retransmission would after a short partition. `reset()` instead closes every
relayed connection (a firewall's RST).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path


class Proxy:
    def __init__(self, upstream: tuple[str, int] | Path) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stopped = False
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()

    @property
    def is_cut(self) -> bool:
        return not self._open.is_set()

    def cut(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    def reset(self) -> None:
        with self._lock:
            socks, self._socks = list(self._socks), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._stopped = True
        self._open.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset()

    def _connect(self) -> socket.socket:
        if isinstance(self.upstream, Path):
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(str(self.upstream))
            return up
        return socket.create_connection(self.upstream)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._open.wait()  # a partition: the connection is accepted, then nothing
        try:
            up = self._connect()
        except OSError:
            client.close()
            return
        with self._lock:
            self._socks |= {client, up}
        for a, b in ((client, up), (up, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._open.wait()  # held while cut; delivered once healed
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._socks.discard(src)
                self._socks.discard(dst)
