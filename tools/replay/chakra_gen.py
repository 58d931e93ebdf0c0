#!/usr/bin/env python3
"""Writes small Chakra execution traces (.et) for tests and benchmarks.

The encoding is the one tools/replay/chakra.cpp reads (et_def.proto of
mlcommons/chakra, written from its field numbers): a varint32-delimited
stream, GlobalMetadata first, then Nodes.

  chakra_gen.py coll PREFIX --ranks N --type all_reduce --size BYTES
                [--iters K] [--involved 1,0] [--compute US] [--gzip] [--barrier]
                [--schema S]  (metadata with a `schema` attribute and no version)
  chakra_gen.py p2p PREFIX --ranks N --size BYTES
  chakra_gen.py unmatched PREFIX --ranks N     (rank 1 waits for a send that never comes)
  chakra_gen.py badtype PREFIX --ranks N       (rank 2 has a node of type 42)
  chakra_gen.py truncated PREFIX --ranks N     (rank 3's file ends inside a node)
  chakra_gen.py converted PREFIX --ranks N --size BYTES  (dangling, self and cyclic
                dependencies and CPU-side collectives, as converted PyTorch traces hold)
  chakra_gen.py mismatch PREFIX --ranks N      (the last rank has one all-reduce fewer)
  chakra_gen.py crossed PREFIX --ranks N       (ranks 0 and 1 each wait for the other first)
  chakra_gen.py groups PREFIX --ranks N --size BYTES --groups 0,2;1,3
                (collectives with pg_name; PREFIX.groups.json: ASTRA-sim's group file)
  chakra_gen.py custom_ring PREFIX --ranks N --size CHUNK  (a custom ring all-reduce,
                MSCCL-style sends, receives and reductions, CHUNK bytes a message)
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
    return ld(10, attr_body(name, value))  # Node.attr


def attr_body(name, value):
    """An AttributeProto."""
    body = ld(1, name.encode())
    if isinstance(value, bool):
        body += key(27, 0) + varint(int(value))
    elif isinstance(value, int):
        body += int_member(value)
    elif isinstance(value, str):
        body += ld(29, value.encode())
    elif isinstance(value, list):  # bool_list: repeated values = 1, packed
        body += ld(28, ld(1, b"".join(varint(int(v)) for v in value)))
    return body


def node(nid, name, ntype, deps=(), duration=0, attrs=(), ctrl=()):
    body = b""
    if nid:
        body += key(1, 0) + varint(nid)
    body += ld(2, name.encode()) + key(3, 0) + varint(ntype)
    if ctrl:
        body += ld(4, b"".join(varint(d) for d in ctrl))  # ctrl_deps, packed
    if deps:
        body += ld(5, b"".join(varint(d) for d in deps))  # data_deps, packed
    if duration:
        body += key(7, 0) + varint(duration)
    for k, v in attrs:
        body += attr(k, v)
    return body


META = [None]  # --schema: the metadata Chakra's converters write (None: a version)


def metadata():
    """GlobalMetadata: {version: "0.0.4"}, or as Chakra's converters write
    it, a `schema` attribute (and a few others) and no version; with
    --schema "", nothing at all."""
    if META[0] is None:
        return b"\x0a\x050.0.4"
    if META[0] == "":
        return b""
    body = b""
    for k, v in (("schema", META[0]), ("pid", 4242), ("time", "2026-01-01 00:00:00")):
        body += ld(2, attr_body(k, v))  # GlobalMetadata.attr
    return body


def stream(nodes):
    meta = metadata()
    out = varint(len(meta)) + meta
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


def converted_nodes(size):
    """What traces converted from PyTorch execution traces hold: a control
    dependency on a node the file does not have (999), one of a node on
    itself, a cycle of control dependencies (3 <-> 4), a cycle of data
    dependencies (6 <-> 7) and the CPU side of a collective (is_cpu_op, no
    comm_type); then one all-reduce of `size` bytes."""
    cpu = [("is_cpu_op", True)]
    return [
        node(1, "aten::mm", COMP, [], 50, cpu, ctrl=[999]),
        node(2, "record_param_comms", COLLN, [1], 10, cpu + [("comm_size", size)], ctrl=[2]),
        node(3, "step_a", COMP, [2], 5, cpu, ctrl=[4]),
        node(4, "step_b", COMP, [], 5, cpu, ctrl=[3]),
        node(6, "loop_a", COMP, [7], 5, cpu),
        node(7, "loop_b", COMP, [6], 5, cpu),
        node(5, "nccl:all_reduce", COLLN, [4, 7], 0,
             [("is_cpu_op", False), ("comm_type", COLL["all_reduce"]), ("comm_size", size)]),
    ]


def group_nodes(rank, groups, size):
    """An all-reduce over this rank's communicator group (pg_name), then a
    broadcast in it, then an all-reduce over all ranks."""
    gid = next(g for g, members in groups.items() if rank in members)
    a = lambda t: [("is_cpu_op", False), ("comm_type", COLL[t]), ("comm_size", size)]
    return [
        node(1, "group_all_reduce", COLLN, [], 0, a("all_reduce") + [("pg_name", gid)]),
        node(2, "group_broadcast", COLLN, [1], 0, a("broadcast") + [("pg_name", gid)]),
        node(3, "world_all_reduce", COLLN, [2], 0, a("all_reduce")),
    ]


def custom_ring_nodes(rank, n, chunk):
    """An MSCCL-style ring all-reduce as a custom implementation: n - 1
    steps of send right / receive left / reduce (the next send waits for the
    reduce), then n - 1 steps of send / receive (each send forwards the part
    just received). Each message is `chunk` bytes."""
    right, left = (rank + 1) % n, (rank - 1) % n
    nodes, nid, prev = [], 1, None
    for s in range(n - 1):
        send, recv, red = nid, nid + 1, nid + 2
        nodes.append(node(send, f"rs_send_{s}", SEND, [prev] if prev else [], 0,
                          [("comm_dst", right), ("comm_tag", s), ("comm_size", chunk)]))
        nodes.append(node(recv, f"rs_recv_{s}", RECV, [], 0, [("comm_src", left), ("comm_tag", s), ("comm_size", chunk)]))
        nodes.append(node(red, f"rs_reduce_{s}", COMP, [recv], 1))
        prev, nid = red, nid + 3
    for s in range(n - 1):
        send, recv = nid, nid + 1
        tag = n - 1 + s
        nodes.append(node(send, f"ag_send_{s}", SEND, [prev], 0,
                          [("comm_dst", right), ("comm_tag", tag), ("comm_size", chunk)]))
        nodes.append(node(recv, f"ag_recv_{s}", RECV, [], 0, [("comm_src", left), ("comm_tag", tag), ("comm_size", chunk)]))
        prev, nid = recv, nid + 2
    return nodes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["coll", "p2p", "unmatched", "unmatched_send", "badtype", "truncated", "converted",
                                    "mismatch", "crossed", "groups", "custom_ring"])
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
    p.add_argument("--groups", default="", help="groups: communicator groups, ';' between groups, ',' between ranks")
    p.add_argument("--schema", default=None,
                   help="metadata as Chakra's converters write it: this schema attribute, no version ('': no metadata)")
    a = p.parse_args()
    MIXED[0] = a.mixed_ints
    META[0] = a.schema
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
        elif a.kind == "converted":
            write(a.prefix, r, converted_nodes(a.size))
        elif a.kind == "mismatch":
            # The last rank's trace has one all-reduce fewer than the others'.
            a.type, a.compute, a.involved = "all_reduce", 0, ""
            a.iters = 1 if r == a.ranks - 1 else 2
            write(a.prefix, r, coll_nodes(r, a))
        elif a.kind == "crossed":
            # Ranks 0 and 1 each receive from the other before they send
            # (a true deadlock); the others compute for 1 s, then wait in an
            # all-reduce with them.
            sz = [("comm_size", 4096)]
            if r in (0, 1):
                peer = 1 - r
                nodes = [node(1, "recv_first", RECV, [], 0, [("comm_src", peer), ("comm_tag", 10 + r)] + sz),
                         node(2, "send_after", SEND, [1], 0, [("comm_dst", peer), ("comm_tag", 11 - r)] + sz)]
            else:
                nodes = [node(2, "compute", COMP, [], 1000000)]
            nodes.append(node(3, "all_reduce", COLLN, [2], 0,
                              [("comm_type", COLL["all_reduce"]), ("comm_size", 65536)]))
            write(a.prefix, r, nodes)
        elif a.kind == "groups":
            groups = {str(i + 1): [int(x) for x in g.split(",")] for i, g in enumerate(a.groups.split(";"))}
            write(a.prefix, r, group_nodes(r, groups, a.size))
            if r == 0:
                import json
                with open(f"{a.prefix}.groups.json", "w") as f:
                    json.dump(groups, f)
        elif a.kind == "custom_ring":
            write(a.prefix, r, custom_ring_nodes(r, a.ranks, a.size))
        elif a.kind == "truncated":
            a.type, a.iters, a.compute, a.involved = "all_reduce", 1, 0, ""
            write(a.prefix, r, coll_nodes(r, a), cut=5 if r == 3 else 0)


if __name__ == "__main__":
    main()
