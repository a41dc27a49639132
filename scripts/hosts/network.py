"""Hosts as Linux network namespaces on a private bridge, made and removed by this module.

`Network()` makes a namespace for the bridge (`<prefix>net`, with `br0` at `SUBNET.1`) and
one per host (`<prefix><host>`, `eth0` at `SUBNET.<n>`, linked to the bridge by a veth pair).
Nothing is added to the machine's own network namespace: the bridge, the links and the
addresses exist only inside these namespaces, so the hosts reach each other and nothing else.
The harness itself (in the machine's namespace) reaches them through `Forward`: a listener on
loopback whose connections are opened from inside the bridge's namespace.

`partition(host)` takes the host's link down (packets are dropped, as with a pulled cable:
connections hang, nothing is reset), `heal(host)` brings it back, `pids(host)` / `power_off`
kill every process of a host at once, `add_host` adds one while the rest runs. `close()` removes
everything, and runs at exit and on SIGINT/SIGTERM too; `remove_stale()` removes namespaces of
earlier runs whose process is gone (names carry the owner's pid). Needs root and `ip netns`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

PREFIX = "cxh-"
SUBNET = "10.77.0"
"""A private range that exists only inside the namespaces (the machine never routes it)."""
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"

_libc = ctypes.CDLL(None, use_errno=True)


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can): not root, no `ip`, or the
    kernel refuses (a container without CAP_SYS_ADMIN)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` program (iproute2) is not installed"
    name = f"{PREFIX}{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, timeout=30)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.decode(errors='replace').strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return None


def _ip(*args: str, check: bool = True) -> str:
    out = subprocess.run(["ip", *args], capture_output=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout.decode()


def enter(namespace: str) -> None:
    """Move the calling thread (or a child before exec) into `namespace`'s network."""
    fd = os.open(f"{NETNS_DIR}/{namespace}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {namespace}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete namespaces of this harness whose owner process is gone; their names."""
    removed = []
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            _kill_all(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    return removed


def _pids_of(namespace: str) -> list[int]:
    return [int(p) for p in _ip("netns", "pids", namespace, check=False).split() if p.isdigit()]


def _kill_all(namespace: str) -> list[int]:
    pids = _pids_of(namespace)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    link: str
    """The bridge's end of the host's veth pair (in the bridge's namespace)."""
    up: bool = True


@dataclass
class Network:
    """The bridge and its hosts; see the module docstring."""

    hosts: dict[str, Host] = field(default_factory=dict)
    prefix: str = ""
    bridge_ns: str = ""
    _closed: bool = False
    _next: int = 10

    def __post_init__(self) -> None:
        remove_stale()
        self.prefix = f"{PREFIX}{os.getpid()}-"
        self.bridge_ns = f"{self.prefix}net"
        _register(self)
        try:
            _ip("netns", "add", self.bridge_ns)
            _ip("-n", self.bridge_ns, "link", "set", "lo", "up")
            _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_ns, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
            _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    def add_host(self, name: str) -> Host:
        """A new host on the bridge, reachable at once."""
        if name in self.hosts or len(name) > 12 or not name.isalnum():
            raise ValueError(f"host name {name!r}: new, alphanumeric, at most 12 characters")
        host = Host(name, f"{self.prefix}{name}", f"{SUBNET}.{self._next}", f"v-{name}")
        self._next += 1
        self.hosts[name] = host
        _ip("netns", "add", host.namespace)
        _ip("-n", host.namespace, "link", "set", "lo", "up")
        _ip("-n", self.bridge_ns, "link", "add", host.link, "type", "veth",
            "peer", "name", "eth0", "netns", host.namespace)  # fmt: skip
        _ip("-n", self.bridge_ns, "link", "set", host.link, "master", "br0", "up")
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.namespace, "link", "set", "eth0", "up")
        return host

    def partition(self, name: str) -> None:
        """Cut the host's link: its packets are dropped both ways until `heal`."""
        host = self.hosts[name]
        _ip("-n", self.bridge_ns, "link", "set", host.link, "down")
        host.up = False

    def heal(self, name: str) -> None:
        host = self.hosts[name]
        _ip("-n", self.bridge_ns, "link", "set", host.link, "up")
        host.up = True

    def pids(self, name: str) -> list[int]:
        """Every process running in the host's namespace."""
        return _pids_of(self.hosts[name].namespace)

    def power_off(self, name: str) -> list[int]:
        """SIGKILL every process of the host at once (a power loss); the pids killed."""
        return _kill_all(self.hosts[name].namespace)

    def preexec(self, name: str, then: Callable[[], None] | None = None) -> Callable[[], None]:
        """A `preexec_fn` that puts the child into the host's network (then runs `then`,
        e.g. dropping privileges, which must come after)."""
        namespace = self.hosts[name].namespace

        def run() -> None:
            enter(namespace)
            if then is not None:
                then()

        return run

    def close(self) -> None:
        """Kill every process in the namespaces and delete them; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        names = [h.namespace for h in self.hosts.values()] + [self.bridge_ns]
        for ns in names:
            _kill_all(ns)
        for ns in names:
            _ip("netns", "del", ns, check=False)
        _unregister(self)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Maker:
    """A thread inside a namespace that makes sockets there for other threads (a socket
    belongs to the namespace of the thread that created it)."""

    def __init__(self, namespace: str) -> None:
        self._jobs: queue.Queue[queue.Queue[Any] | None] = queue.Queue()
        ready: queue.Queue[BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(namespace, ready), daemon=True)
        self._thread.start()
        error = ready.get(timeout=30)
        if error is not None:
            raise error

    def _run(self, namespace: str, ready: queue.Queue[BaseException | None]) -> None:
        try:
            enter(namespace)
        except BaseException as exc:
            ready.put(exc)
            return
        ready.put(None)
        while (reply := self._jobs.get()) is not None:
            reply.put(socket.socket(socket.AF_INET, socket.SOCK_STREAM))

    def socket(self) -> socket.socket:
        reply: queue.Queue[socket.socket] = queue.Queue()
        self._jobs.put(reply)
        return reply.get(timeout=30)

    def close(self) -> None:
        self._jobs.put(None)


@dataclass
class Forward:
    """A loopback listener in the machine's namespace that relays each connection to one of
    `targets` (address, port) inside the network, round robin, skipping for `down_s` a target
    that did not accept within `connect_timeout_s` (as a Service skips a failing endpoint).
    `served[target]` counts the connections each target took."""

    network: Network
    targets: list[tuple[str, int]]
    connect_timeout_s: float = 2.0
    down_s: float = 5.0
    port: int = 0
    served: dict[tuple[str, int], int] = field(default_factory=dict)
    _down_until: dict[tuple[str, int], float] = field(default_factory=dict)
    _turn: int = 0

    def __post_init__(self) -> None:
        self._maker = _Maker(self.network.bridge_ns)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(256)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"forward-{self.port}").start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _order(self) -> list[tuple[str, int]]:
        with self._lock:
            self._turn += 1
            n = len(self.targets)
            ordered = [self.targets[(self._turn + i) % n] for i in range(n)]
        now = time.monotonic()
        return sorted(ordered, key=lambda t: self._down_until.get(t, 0.0) > now)

    def _connect(self) -> tuple[socket.socket, tuple[str, int]] | None:
        for target in self._order():
            upstream = self._maker.socket()
            upstream.settimeout(self.connect_timeout_s)
            try:
                upstream.connect(target)
            except OSError:
                upstream.close()
                self._down_until[target] = time.monotonic() + self.down_s
                continue
            upstream.settimeout(None)
            with self._lock:
                self.served[target] = self.served.get(target, 0) + 1
            return upstream, target
        return None

    def _relay(self, client: socket.socket) -> None:
        connected = self._connect()
        if connected is None:
            client.close()
            return
        upstream, _ = connected
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                done.set()
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)
        done.wait(1)
        client.close()
        upstream.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self._maker.close()


_OPEN: list[Network] = []
_previous: dict[int, Any] = {}


def _close_all(*_: object) -> None:
    for net in list(_OPEN):
        net.close()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _close_all()
    handler = _previous.get(signum)
    if callable(handler):
        handler(signum, frame)
    else:
        raise SystemExit(128 + signum)


def _register(net: Network) -> None:
    if not _OPEN and not _previous:
        atexit.register(_close_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                _previous[sig] = signal.signal(sig, _on_signal)
    _OPEN.append(net)


def _unregister(net: Network) -> None:
    with contextlib.suppress(ValueError):
        _OPEN.remove(net)
