"""A TCP proxy a test controls: it forwards bytes between a client and one upstream, and drops
connections when told: all open ones at once (`cut_all`), or each response's connection as its
first bytes come back from the upstream (`drop_responses`), after the request reached it."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._drop_budget = 0
        self.dropped = 0
        """Responses dropped so far."""
        self.connections = 0
        """Client connections accepted so far."""
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop_responses(self, count: int) -> None:
        """The next `count` responses are not delivered: their connection is closed instead."""
        with self._lock:
            self._drop_budget = count

    def cut_all(self) -> int:
        """Close every open connection now; how many sockets were closed."""
        with self._lock:
            sockets, self._open = list(self._open), set()
        for s in sockets:
            _close(s)
        return len(sockets)

    def stop(self) -> None:
        self._stopped = True
        _close(self._listener)
        self.cut_all()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self.connections += 1
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drop_budget <= 0:
                return False
            self._drop_budget -= 1
            self.dropped += 1
            return True

    def _pump(self, source: socket.socket, sink: socket.socket, is_response: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data or (is_response and self._take_drop()):
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
            _close(source)
            _close(sink)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
