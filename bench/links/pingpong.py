#!/usr/bin/env python3
"""TCP ping-pong across a link: 64-byte messages, TCP_NODELAY, one at a time.

  pingpong.py serve HOST PORT        answers one connection, then exits
  pingpong.py HOST PORT [COUNT]      COUNT round trips (default 200, 20 warm-up
                                     first); prints p50/p99/min round-trip time

Bounded: the server gives up after 60 s without a connection, and both
sides time out a silent socket after 10 s.
"""
import socket
import sys
import time

MSG = 64


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise ConnectionError("peer closed")
        buf += part
    return buf


def serve(host, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(1)
    ls.settimeout(60)
    c, _ = ls.accept()
    c.settimeout(10)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            c.sendall(recv_exact(c, MSG))
    except (ConnectionError, socket.timeout):
        pass


def client(host, port, count):
    s = None
    for _ in range(100):  # the server may still be starting
        try:
            s = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            time.sleep(0.05)
    if s is None:
        sys.exit("pingpong: cannot connect to %s:%d" % (host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * MSG
    rtts = []
    for i in range(count + 20):
        t0 = time.perf_counter()
        s.sendall(msg)
        recv_exact(s, MSG)
        if i >= 20:
            rtts.append((time.perf_counter() - t0) * 1e6)
    s.close()
    rtts.sort()
    p = lambda q: rtts[min(len(rtts) - 1, int(q * len(rtts)))]
    print("ping-pong %d B x %d: rtt p50 %.1f us, p99 %.1f us, min %.1f us" % (MSG, count, p(0.5), p(0.99), rtts[0]))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) >= 3:
        client(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 200)
    else:
        sys.exit(__doc__)
