#!/usr/bin/env python3
"""Write the seed corpora of the fuzz harnesses (tests/fuzz/corpus/NAME).

    make-seeds.py CAPTURE_DIR... 

Each CAPTURE_DIR is what a capture run left: out/ (capture.py's recording
of collie talking to a sheep), the sheeps' stores (s*/obj) and the local
driver's log (cl/log). Real bytes become seeds as they are; a few inputs
that no client sends (peer ops, bad headers) are built here from the wire
format. Seeds are named by content, so running it twice adds nothing.
"""
import glob
import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
OPNAMES = {0x01: "create-write-obj", 0x02: "read-obj", 0x03: "write-obj", 0x11: "new-vdi",
           0x12: "lock-vdi", 0x13: "release-vdi", 0x14: "get-vdi-info", 0x15: "read-vdis",
           0x16: "flush-vdi", 0x17: "del-vdi", 0x18: "get-cluster-default", 0x80: "make-fs",
           0x81: "stat-cluster", 0x82: "get-node-list", 0x83: "stat-sheep", 0x84: "shutdown",
           0x85: "stat-recovery", 0x86: "get-vdi-locks", 0xA0: "read-peer", 0xA1: "write-peer",
           0xA2: "create-write-peer", 0xA3: "remove-peer", 0xA4: "flush-peer",
           0xA5: "get-obj-list", 0xA6: "fetch-peer", 0xA7: "fetch-peer-now", 0xB0: "trace-start", 0xB1: "trace-stop",
           0xB2: "trace-status", 0xB3: "trace-read"}
INODE_HEADER_SIZE = 4664


def put(harness, label, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    h = hashlib.sha1(data).hexdigest()[:10]
    if any(f.endswith(h) for f in os.listdir(d)):
        return
    with open(os.path.join(d, "%s-%s" % (label, h)), "wb") as f:
        f.write(data)


def hdr(opcode, flags=0, epoch=0, id_=0, dlen=0, rest=b"", ver=None):
    if ver is None:
        ver = 0x80 if opcode >= 0x80 else 0x01
    rest = rest.ljust(32, b"\0")
    return struct.pack("<BBHIII", ver, opcode, flags, epoch, id_, dlen) + rest


def obj(oid, offset=0, cow=0, copies=1):
    return struct.pack("<QQBB6xQ", oid, cow, copies, 0, offset)


def crafted():
    data_oid = 0x00ed202b00000001
    inode_oid = 0x80ed202b00000000
    seeds = {
        "write-peer": hdr(0xA1, 1, dlen=512, rest=obj(data_oid, 4096)) + b"\xab" * 512,
        "create-write-peer": hdr(0xA2, 1, dlen=4096, rest=obj(data_oid)) + b"\x01" * 4096,
        "read-peer": hdr(0xA0, 0, dlen=4096, rest=obj(data_oid)),
        "remove-peer": hdr(0xA3, 0, rest=obj(data_oid)),
        "flush-peer": hdr(0xA4),
        "get-obj-list": hdr(0xA5, 0, dlen=65536),
        "get-obj-list-stale": hdr(0xA5, 0x8000, dlen=65536),
        "fetch-peer": hdr(0xA6, 0, dlen=4096, rest=obj(inode_oid)),
        "fetch-peer-now": hdr(0xA7, 0, epoch=1, dlen=4096, rest=obj(data_oid)),
        "peer-pipeline": hdr(0xA2, 1, id_=1, dlen=8, rest=obj(data_oid)) + b"12345678" +
        hdr(0xA0, 0, id_=2, dlen=8, rest=obj(data_oid)) + hdr(0xA3, 0, id_=3, rest=obj(data_oid)),
        "bad-version": hdr(0xA0, 0, dlen=8, rest=obj(data_oid), ver=1),
        "unknown-opcode": hdr(0x7f) + hdr(0xff, ver=0x80),
        "oversized": hdr(0x03, 1, dlen=0xffffffff, rest=obj(data_oid)),
        "short-payload": hdr(0x11, 1, dlen=256) + b"name\0",
        "half-header": hdr(0x18)[:20],
        "read-no-payload-flag": hdr(0xB0, 0, dlen=6),
    }
    # the harness's node is at epoch 1: peer ops of that epoch reach the store
    seeds["peer-epoch1"] = (hdr(0xA2, 1, epoch=1, id_=1, dlen=4096, rest=obj(data_oid)) +
                            b"\x02" * 4096 +
                            hdr(0xA1, 1, epoch=1, id_=2, dlen=16, rest=obj(data_oid, 64)) +
                            b"0123456789abcdef" +
                            hdr(0xA0, 0, epoch=1, id_=3, dlen=4096, rest=obj(data_oid)) +
                            hdr(0xA5, 0, epoch=1, id_=4, dlen=4096) +
                            hdr(0xA6, 0, epoch=1, id_=5, dlen=4096, rest=obj(data_oid)) +
                            hdr(0xA3, 0, epoch=1, id_=6, rest=obj(data_oid)))
    for label, data in seeds.items():
        put("request", label, data)
    # trace: header then payload
    for label, payload, extra in [("start-empty", b"", b""), ("start-patterns",
                                  b"graph\0gateway_*\0\0peer_*\0", b""),
                                  ("start-no-nul", b"graph\0abc", b""),
                                  ("start-depth", b"profile\0", struct.pack("<QI", 1 << 20, 4))]:
        put("trace", label, hdr(0xB0, 1, dlen=len(payload), rest=extra) + payload)
    put("trace", "status", hdr(0xB2, 0, dlen=64))


def from_capture(cap):
    session = b""
    for f in sorted(glob.glob(os.path.join(cap, "out", "conn-*"))):
        if f.endswith(".rsp"):
            continue
        data = open(f, "rb").read()
        # every connection of the run in one stream: a whole session
        # (format, create, write, read, snapshot, delete) on one connection
        if data[1:2] not in (b"\x84", b"\x80"):  # no shutdown, no re-format
            session += data
        if len(data) < 48:
            continue
        op = data[1]
        name = OPNAMES.get(op, "op%02x" % op)
        put("request", name, data)
        if op in (0xB0, 0xB2):
            put("trace", name, data)
        rsp = open(f + ".rsp", "rb").read() if os.path.exists(f + ".rsp") else b""
        if op == 0x81 and len(rsp) > 48:
            put("epoch", "stat-cluster-reply", rsp)
            # a joiner adopts only a history whose newest list matches its
            # own view (empty in the harness); and an unformatted cluster
            body = bytearray(rsp[48:])
            body[12:16] = struct.pack("<I", 0)
            put("epoch", "stat-cluster-reply-empty-view", rsp[:48] + bytes(body))
            put("epoch", "stat-cluster-unformatted", rsp[:20] + struct.pack("<I", 1) + rsp[24:48])
    if 0 < len(session) <= 256 * 1024:
        put("request", "session", session)
    for f in sorted(glob.glob(os.path.join(cap, "s*", "obj", "80*"))):
        put("inode", "inode", open(f, "rb").read()[:INODE_HEADER_SIZE])
    log = os.path.join(cap, "cl", "log")
    if os.path.exists(log):
        data = open(log, "rb").read()
        for sel in range(3):
            put("local", "log-self%d" % sel, bytes([0, sel]) + data)
        put("local", "log-torn", bytes([0, 0]) + data[:len(data) - 100])
        put("local", "log-fixup", bytes([1, 1]) + data)
        # the NOTIFY records' payloads: cluster messages as ordered.c gets them
        off = 0
        while off + 80 <= len(data):
            magic, typ, _, ln = struct.unpack_from("<IHHI", data, off)
            if magic != 0x4c434f4c:
                break
            if typ == 3:
                put("ordered", "msg-op%02x" % data[off + 80 + 40 + 1], data[off + 80:off + 80 + ln])
            off += 80 + ln


def static_seeds():
    for s in ["0", "1", "4096", "16M", "16MB", "16MiB", "1g", "3T", "17179869184T", "18446744073709551615",
              "18446744073709551616", "12b", "1K", "1kib", "-1", " 5", "5x", "0x10", ""]:
        for b in (0, 1, 3):
            put("size", "size", bytes([b]) + s.encode())
    lines = [
        ["cluster", "format", "-c", "2"], ["cluster", "info"], ["node", "list", "-r"],
        ["vdi", "create", "alpha", "16M", "-c", "3"], ["vdi", "list", "-a", "127.0.0.1", "-p", "7001"],
        ["vdi", "snapshot", "alpha", "-s", "snap1"], ["vdi", "read", "alpha", "0", "4096"],
        ["debug", "trace", "start", "--function", "gateway_*", "--depth", "4", "--buffer-size", "1M"],
        ["debug", "trace", "cat", "--format", "svg", "--title", "t"], ["--version"],
        ["vdi", "--help"], ["-p", "-1", "node", "list"], ["vdi", "create", "--", "-x", "1G"],
        ["debug", "trace", "start", "--tracer"], ["cluster", "shutdown", "--port=7000"],
        ["vdi", "clone", "a", "b", "-rs", "1"],
    ]
    for words in lines:
        put("opts", "-".join(w.strip("-") for w in words[:3]), b"\0".join(w.encode() for w in words))


def main():
    crafted()
    static_seeds()
    for cap in sys.argv[1:]:
        from_capture(cap)


if __name__ == "__main__":
    main()
