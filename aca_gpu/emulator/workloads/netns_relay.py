"""Runs as a script inside a network namespace of its own (netns.py starts it under `unshare`):
brings the namespace's loopback up, starts the replica's command, and relays every connection made
to `DIR/PORT` (a Unix socket: a file, which every network namespace sees) to 127.0.0.1:PORT inside,
where the command listens. Exits with the command's exit code.

A standalone script of the standard library only: it starts in every replica, so it imports
nothing of acagpu (a second of import time per replica would be paid on every scale-out).

Usage: python netns_relay.py DIR PORT[,PORT...] -- COMMAND [ARG...]   (or --check)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
CONNECT_TIMEOUT_S = 5.0


def loopback_up() -> None:
    """`ip link set lo up`, without needing `ip`: a new network namespace's loopback starts down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def relay(conn: socket.socket, port: int) -> None:
    """One connection: to the command's port inside, or closed at once when nothing listens there
    (what a refused connection looks like through the relay)."""
    try:
        inner = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
    except OSError:
        conn.close()
        return
    inner.settimeout(None)
    back = threading.Thread(target=pump, args=(inner, conn), daemon=True)
    back.start()
    pump(conn, inner)
    back.join()
    conn.close()
    inner.close()


def listen(folder: str, port: int) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(folder, str(port))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server.bind(path)
    server.listen(128)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=relay, args=(conn, port), daemon=True).start()


def check() -> int:
    """`--check`: what a replica's relay needs works here (loopback up, a port to listen on)."""
    loopback_up()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        socket.create_connection(server.getsockname(), timeout=CONNECT_TIMEOUT_S).close()
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        return check()
    folder, ports, sep, *command = argv
    if sep != "--" or not command:
        print(__doc__, file=sys.stderr)
        return 2
    loopback_up()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    for port in {int(p) for p in ports.split(",") if p}:
        threading.Thread(target=listen, args=(folder, port), daemon=True).start()
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
