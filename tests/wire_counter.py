"""Loopback proxies that count what crosses the wire to Postgres and to Redis.

A process whose `DATABASE_URL` names a `PostgresCounter`'s port reaches Postgres through it;
every `ReadyForQuery` the server sends ends one round trip (a simple query, or an extended-
protocol exchange up to its Sync: a statement, a BEGIN, a COMMIT, a pre-ping), and is counted
under the connection's `application_name` (from its startup packet). The first one of each
connection ends its start-up and is counted apart. A `RedisCounter` counts the commands
clients send (every RESP array, pipelined or not). The counts are read between turns, so a test
sees exactly what each turn cost, per process.

Connections must not negotiate TLS (`sslmode=disable`, `gssencmode=disable`): the proxy reads
the plain protocol.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104


class _Proxy(ABC):
    """A TCP proxy on 127.0.0.1: one upstream connection per client connection, a thread per
    direction, and a hook that sees the bytes of each direction."""

    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self.upstream = upstream
        """`(host, port)`, or the path of a Unix socket."""
        self.lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = _connect(self.upstream)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self._sockets += [client, server]
            feed_up, feed_down = self.connection()
            threading.Thread(target=_pump, args=(client, server, feed_up), daemon=True).start()
            threading.Thread(target=_pump, args=(server, client, feed_down), daemon=True).start()

    @abstractmethod
    def connection(self) -> tuple[Callable[[bytes], None], Callable[[bytes], None]]:
        """The hooks of one new connection: client → server bytes, server → client bytes."""

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self.lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


def _connect(upstream: tuple[str, int] | str) -> socket.socket:
    if isinstance(upstream, str):
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.connect(upstream)
        return unix
    return socket.create_connection(upstream, timeout=10)


def _pump(source: socket.socket, sink: socket.socket, feed: Callable[[bytes], None]) -> None:
    try:
        while data := source.recv(65536):
            feed(data)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class PostgresCounter(_Proxy):
    """Round trips per application name (see the module's doc)."""

    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self.round_trips: Counter[str] = Counter()
        self.connections: Counter[str] = Counter()
        self.statements: list[tuple[str, str]] = []
        """(application name, the start of each statement sent), for a failure's message."""
        super().__init__(upstream)

    def connection(self) -> tuple[Callable[[bytes], None], Callable[[bytes], None]]:
        state = {"app": "?", "started": False}
        up = bytearray()
        down = bytearray()

        def client_bytes(data: bytes) -> None:
            up.extend(data)
            if state["started"]:
                self._statements(str(state["app"]), up)
                return
            while len(up) >= 8:
                (length,) = struct.unpack("!i", up[:4])
                if len(up) < length:
                    return
                (code,) = struct.unpack("!i", up[4:8])
                packet = bytes(up[8:length])
                del up[:length]
                if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                    raise RuntimeError(
                        "the counting proxy needs sslmode=disable, gssencmode=disable"
                    )
                state["app"] = _application_name(packet)
                state["started"] = True
                self._statements(str(state["app"]), up)
                return

        def server_bytes(data: bytes) -> None:
            down.extend(data)
            while len(down) >= 5:
                (length,) = struct.unpack("!i", down[1:5])
                if len(down) < 1 + length:
                    return
                kind = down[0]
                del down[: 1 + length]
                if kind != ord("Z"):
                    continue
                with self.lock:
                    app = str(state["app"])
                    if state.get("ready"):
                        self.round_trips[app] += 1
                    else:
                        state["ready"] = True
                        self.connections[app] += 1

        return client_bytes, server_bytes

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.round_trips)

    def _statements(self, app: str, up: bytearray) -> None:
        """Note the text of each simple query and parsed statement the client sent."""
        while len(up) >= 5:
            (length,) = struct.unpack("!i", up[1:5])
            if len(up) < 1 + length:
                return
            kind, body = up[0], bytes(up[5 : 1 + length])
            del up[: 1 + length]
            if kind == ord("Q"):
                text = body.split(b"\0", 1)[0]
            elif kind == ord("P"):
                text = body.split(b"\0", 2)[1]
            else:
                continue
            with self.lock:
                self.statements.append((app, " ".join(text.decode(errors="replace").split())[:90]))


def _application_name(startup: bytes) -> str:
    parts = startup.split(b"\0")
    pairs = dict(zip(parts[0::2], parts[1::2], strict=False))
    return pairs.get(b"application_name", b"?").decode() or "?"


class RedisCounter(_Proxy):
    """Commands clients send, in all (see the module's doc)."""

    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self.commands: Counter[str] = Counter()
        super().__init__(upstream)

    def connection(self) -> tuple[Callable[[bytes], None], Callable[[bytes], None]]:
        parser = _RespCommands()

        def client_bytes(data: bytes) -> None:
            names = parser.feed(data)
            if names:
                with self.lock:
                    self.commands.update(names)

        return client_bytes, lambda data: None

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.commands)


class _RespCommands:
    """Splits a client's RESP stream into commands, keeping each command's name."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[str]:
        self.buffer.extend(data)
        names: list[str] = []
        while True:
            parsed = self._command()
            if parsed is None:
                return names
            names.append(parsed)

    def _command(self) -> str | None:
        buf = self.buffer
        end = buf.find(b"\r\n")
        if end < 0:
            return None
        if buf[:1] != b"*":  # an inline command
            line = bytes(buf[:end])
            del buf[: end + 2]
            return line.split(b" ", 1)[0].decode(errors="replace").lower()
        count = int(buf[1:end])
        pos = end + 2
        name = ""
        for i in range(count):
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(buf[pos + 1 : line_end])
            start = line_end + 2
            if len(buf) < start + size + 2:
                return None
            if i == 0:
                name = bytes(buf[start : start + size]).decode(errors="replace").lower()
            pos = start + size + 2
        del buf[:pos]
        return name
