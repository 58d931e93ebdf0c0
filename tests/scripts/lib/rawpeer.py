"""A hostile peer for the hardening test (tests/scripts/hardening_test.sh):
speaks Genie's frame format (dataplane/frame.hpp) and the few control
messages it needs (proto/genie.proto), encoded by hand, with raw sockets."""
import socket
import struct
import zlib

MAGIC = 0x45494E47
HELLO, CHALLENGE, AUTH_RESPONSE, WELCOME, ERROR_REPLY = 1, 2, 3, 4, 6
SERVER_INFO_REQUEST, HEARTBEAT, HEARTBEAT_REPLY = 30, 52, 53
PROTOCOL_VERSION, ABI_VERSION = 3, 1


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint((num << 3) | 2) + varint(len(data)) + data


def header(mtype, msg, rid=1, msg_len=None, payload_len=0):
    """The 40 header bytes of a frame carrying `msg`; msg_len may claim
    another length (the CRC then covers `msg` as sent)."""
    n = len(msg) if msg_len is None else msg_len
    h = struct.pack("<IHHIIQQII", MAGIC, 1, mtype, 0, n, rid, payload_len, 0, 0)
    crc = zlib.crc32(h + msg) & 0xFFFFFFFF
    return h[:32] + struct.pack("<I", crc) + h[36:]


def frame(mtype, msg, rid=1):
    return header(mtype, msg, rid) + msg


def hello(node_id, role=0):
    return frame(HELLO, field_varint(1, PROTOCOL_VERSION) + field_varint(2, ABI_VERSION) +
                 field_bytes(3, node_id) + field_varint(4, role))


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def read_frame(s):
    """(type, message bytes); EOFError when the server closed first."""
    h = recv_exact(s, 40)
    magic, _v, mtype, _f, msg_len, _rid, payload_len, _crc, _r = struct.unpack("<IHHIIQQII", h)
    assert magic == MAGIC, "bad magic from the server"
    msg = recv_exact(s, msg_len)
    if payload_len:
        recv_exact(s, payload_len)
    return mtype, msg


def closed_by_server(s, timeout):
    """True when the server closes `s` (EOF or reset) within `timeout` s,
    reading and dropping whatever it sends first."""
    s.settimeout(timeout)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def session(port, node_id, role=0):
    """A connection through its handshake with a server without a token."""
    s = connect(port)
    s.sendall(hello(node_id, role))
    mtype, msg = read_frame(s)
    if mtype != WELCOME:
        raise RuntimeError("no Welcome for %s: type %d %r" % (node_id, mtype, msg[:200]))
    return s


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)
