#!/usr/bin/env python3
"""Writes small Chakra execution traces (.et) for tests and benchmarks.

The encoding is the one tools/replay/chakra.cpp reads (et_def.proto of
mlcommons/chakra, written from its field numbers): a varint32-delimited
stream, GlobalMetadata first, then Nodes.

  chakra_gen.py coll PREFIX --ranks N --type all_reduce --size BYTES
                [--iters K] [--involved 1,0] [--compute US] [--gzip] [--barrier]
  chakra_gen.py p2p PREFIX --ranks N --size BYTES
  chakra_gen.py unmatched PREFIX --ranks N     (rank 1 waits for a send that never comes)
  chakra_gen.py badtype PREFIX --ranks N       (rank 2 has a node of type 42)
  chakra_gen.py truncated PREFIX --ranks N     (rank 3's file ends inside a node)
"""
import argparse
import gzip
import struct

COLL = {"all_reduce": 0, "reduce": 1, "all_gather": 2, "gather": 3, "scatter": 4, "broadcast": 5,
        "all_to_all": 6, "reduce_scatter": 7, "reduce_scatter_block": 8, "barrier": 9}
COMP, SEND, RECV, COLLN = 4, 5, 6, 7


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


MIXED = [False]  # --mixed-ints: integers cycle through the oneof's members
_turn = [0]


def int_member(value):
    """An integer as int64_val, or with --mixed-ints as the next of the other
    integer members: int32, uint32, uint64, sint32, sint64, fixed32, fixed64,
    sfixed32, sfixed64."""
    if not MIXED[0]:
        return key(9, 0) + varint(value & 0xFFFFFFFFFFFFFFFF)
    _turn[0] += 1
    kind = _turn[0] % 9
    if kind == 0:
        return key(7, 0) + varint(value & 0xFFFFFFFFFFFFFFFF)
    if kind == 1:
        return key(11, 0) + varint(value)
    if kind == 2:
        return key(13, 0) + varint(value)
    if kind in (3, 4):
        return key(15 if kind == 3 else 17, 0) + varint((value << 1) ^ (value >> 63))
    if kind in (5, 7):
        return key(19 if kind == 5 else 23, 5) + struct.pack("<I", value)
    return key(21 if kind == 6 else 25, 1) + struct.pack("<Q", value)


def attr(name, value):
    body = ld(1, name.encode())
    if isinstance(value, bool):
        body += key(27, 0) + varint(int(value))
    elif isinstance(value, int):
        body += int_member(value)
    elif isinstance(value, str):
        body += ld(29, value.encode())
    elif isinstance(value, list):  # bool_list: repeated values = 1, packed
        body += ld(28, ld(1, b"".join(varint(int(v)) for v in value)))
    return ld(10, body)


def node(nid, name, ntype, deps=(), duration=0, attrs=()):
    body = b""
    if nid:
        body += key(1, 0) + varint(nid)
    body += ld(2, name.encode()) + key(3, 0) + varint(ntype)
    if deps:
        body += ld(5, b"".join(varint(d) for d in deps))  # data_deps, packed
    if duration:
        body += key(7, 0) + varint(duration)
    for k, v in attrs:
        body += attr(k, v)
    return body


def stream(nodes):
    out = varint(7) + b"\x0a\x050.0.4"  # GlobalMetadata {version: "0.0.4"}
    for n in nodes:
        out += varint(len(n)) + n
    return out


def write(prefix, rank, nodes, gz=False, cut=0):
    data = stream(nodes)
    if cut:
        data = data[:-cut]
    if gz:
        data = gzip.compress(data)
    with open(f"{prefix}.{rank}.et", "wb") as f:
        f.write(data)


def coll_nodes(rank, a):
    nodes, prev, nid = [], None, 1
    for i in range(a.iters):
        if a.compute:
            cattrs = [("is_cpu_op", False)] + ([("num_ops", a.num_ops)] if a.num_ops else [])
            nodes.append(node(nid, f"compute_{i}", COMP, [prev] if prev else [], a.compute, cattrs))
            prev, nid = nid, nid + 1
        if a.barrier:  # lines the ranks up, as a benchmark's barrier does
            bid = nid + 1000 * rank
            nodes.append(node(bid, f"barrier_{i}", COLLN, [prev] if prev else [], 0, [("comm_type", COLL["barrier"])]))
            prev, nid = bid, nid + 1
        if a.independent:  # every collective ready at once
            prev = None
        attrs = [("is_cpu_op", False), ("comm_type", COLL[a.type]), ("comm_size", a.size)]
        if a.involved:
            attrs.append(("involved_dim", [bool(int(x)) for x in a.involved.split(",")]))
        # Ids differ between ranks on purpose: collectives match by issue order.
        cid = nid + 1000 * rank
        nodes.append(node(cid, f"{a.type}_{i}", COLLN, [prev] if prev else [], 0, attrs))
        prev, nid = cid, nid + 1
    return nodes


def p2p_nodes(rank, n, size):
    right, left = (rank + 1) % n, (rank - 1) % n
    # Two messages with the same tag each way (matched in order), a compute
    # node between them, and a message with another tag.
    sz = [("comm_size", size)]
    return [
        node(1, "send_a", SEND, [], 0, [("comm_dst", right), ("comm_tag", 7)] + sz),
        node(2, "recv_a", RECV, [], 0, [("comm_src", left), ("comm_tag", 7)] + sz),
        node(3, "compute", COMP, [2], 200),
        node(4, "send_b", SEND, [3], 0, [("comm_dst", right), ("comm_tag", 7)] + [("comm_size", size // 2 + 3)]),
        node(5, "recv_b", RECV, [3], 0, [("comm_src", left), ("comm_tag", 7)] + [("comm_size", size // 2 + 3)]),
        node(6, "send_c", SEND, [1], 0, [("comm_dst", left), ("comm_tag", 9)] + sz),
        node(7, "recv_c", RECV, [], 0, [("comm_src", right), ("comm_tag", 9)] + sz),
    ]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["coll", "p2p", "unmatched", "unmatched_send", "badtype", "truncated"])
    p.add_argument("prefix")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--type", default="all_reduce", choices=sorted(COLL))
    p.add_argument("--size", type=int, default=1 << 16)
    p.add_argument("--iters", type=int, default=1)
    p.add_argument("--involved", default="")
    p.add_argument("--compute", type=int, default=0)
    p.add_argument("--num-ops", type=int, default=0, help="num_ops of each compute node")
    p.add_argument("--gzip", action="store_true")
    p.add_argument("--barrier", action="store_true", help="a barrier before each collective")
    p.add_argument("--independent", action="store_true", help="collectives that depend on nothing")
    p.add_argument("--mixed-ints", action="store_true", help="integer attributes in every member of the oneof")
    a = p.parse_args()
    MIXED[0] = a.mixed_ints
    for r in range(a.ranks):
        if a.kind == "coll":
            write(a.prefix, r, coll_nodes(r, a), a.gzip)
        elif a.kind == "p2p":
            write(a.prefix, r, p2p_nodes(r, a.ranks, a.size), a.gzip)
        elif a.kind == "unmatched":
            nodes = [node(1, "compute", COMP, [], 100)]
            if r == 1:
                nodes.append(node(2, "lonely_recv", RECV, [1], 0, [("comm_src", 0), ("comm_tag", 99), ("comm_size", 64)]))
            write(a.prefix, r, nodes)
        elif a.kind == "unmatched_send":
            # Rank 2 sends to rank 3 under a tag rank 3 never receives; the
            # ranks also exchange one matched message.
            nodes = [node(1, "compute", COMP, [], 100)]
            if r == 2:
                nodes.append(node(2, "stray_send", SEND, [1], 0, [("comm_dst", 3), ("comm_tag", 5), ("comm_size", 4096)]))
                nodes.append(node(3, "good_send", SEND, [1], 0, [("comm_dst", 3), ("comm_tag", 6), ("comm_size", 64)]))
            if r == 3:
                nodes.append(node(2, "good_recv", RECV, [1], 0, [("comm_src", 2), ("comm_tag", 6), ("comm_size", 64)]))
            write(a.prefix, r, nodes)
        elif a.kind == "badtype":
            nodes = [node(1, "compute", COMP, [], 100)]
            if r == 2:
                nodes.append(node(2, "mystery", 42, [1]))
            write(a.prefix, r, nodes)
        elif a.kind == "truncated":
            a.type, a.iters, a.compute, a.involved = "all_reduce", 1, 0, ""
            write(a.prefix, r, coll_nodes(r, a), cut=5 if r == 3 else 0)


if __name__ == "__main__":
    main()
