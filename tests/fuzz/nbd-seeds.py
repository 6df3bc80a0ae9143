#!/usr/bin/env python3
"""Seeds of the NBD harnesses from recorded connections (capture-nbd.sh).

    nbd-seeds.py [OUTDIR]

OUTDIR holds capture.py's conn-NNNN files: what each client sent. Each
becomes an nbd-opt seed as it is. One that reached the transmission phase
(an EXPORT_NAME or GO followed by a request) also gives an nbd-req seed:
a mode byte (bit 0: structured replies negotiated, bit 1: base:allocation
selected, bit 2: a snapshot) and the bytes after the handshake. A few
crafted inputs (old style, refusals, the limits) are added to both. Seeds
are named by content.
"""
import glob
import importlib.util
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
IHAVEOPT = 0x49484156454F5054
REQUEST_MAGIC = 0x25609513
OPT_EXPORT_NAME, OPT_GO, OPT_STRUCTURED_REPLY, OPT_SET_META = 1, 7, 8, 10


def _make_seeds():
    """make-seeds.py (its name has a dash: loaded by path), for its put()"""
    spec = importlib.util.spec_from_file_location("make_seeds", os.path.join(HERE, "make-seeds.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


put = _make_seeds().put


def split(data):
    """(mode, transmission bytes or None, option names) of a client stream"""
    pos, mode, names = 4, 0, []
    while len(data) - pos >= 16:
        magic, opt, length = struct.unpack(">QII", data[pos:pos + 16])
        if magic != IHAVEOPT:
            break
        body = data[pos + 16:pos + 16 + length]
        pos += 16 + length
        names.append(opt)
        if opt == OPT_STRUCTURED_REPLY:
            mode |= 1
        if opt == OPT_SET_META and b"base:allocation" in body:
            mode |= 2
        if opt in (OPT_EXPORT_NAME, OPT_GO):
            name = body if opt == OPT_EXPORT_NAME else body[4:4 + struct.unpack(">I", body[:4])[0]]
            mode = (mode & 3) | (4 if b"@" in name else 0)
        if opt in (OPT_EXPORT_NAME, OPT_GO) and len(data) - pos >= 4 and \
                struct.unpack(">I", data[pos:pos + 4])[0] == REQUEST_MAGIC:
            return mode, data[pos:], names
    return mode, None, names


def opt(o, data=b"", magic=IHAVEOPT):
    return struct.pack(">QII", magic, o, len(data)) + data


def req(t, off=0, length=0, cookie=1, flags=0, magic=REQUEST_MAGIC):
    return struct.pack(">IHHQQI", magic, flags, t, cookie, off, length)


def crafted():
    """inputs no client above sends: old style, refusals, the limits"""
    fl = struct.pack(">I", 3)
    go = struct.pack(">I", 5) + b"alpha" + struct.pack(">HH", 1, 3)
    meta = struct.pack(">I", 5) + b"alpha" + struct.pack(">I", 2) + \
        struct.pack(">I", 15) + b"base:allocation" + struct.pack(">I", 5) + b"base:"
    put("nbd-opt", "export-name", fl + opt(1, b"alpha") + req(0, 0, 4096) + req(2))
    put("nbd-opt", "export-name-zeroes", struct.pack(">I", 1) + opt(1, b"beta") + req(3))
    put("nbd-opt", "export-name-unknown", fl + opt(1, b"nosuch"))
    put("nbd-opt", "export-name-nul", fl + opt(1, b"al\0pha"))
    put("nbd-opt", "abort", fl + opt(2))
    put("nbd-opt", "starttls-list-data", fl + opt(5) + opt(3, b"x") + opt(3) + opt(99) + opt(2))
    put("nbd-opt", "bad-flags", struct.pack(">I", 0x80))
    put("nbd-opt", "bad-magic", fl + opt(3, magic=0x1122334455667788))
    put("nbd-opt", "oversized-option", fl + struct.pack(">QII", IHAVEOPT, 7, 1 << 20))
    put("nbd-opt", "info-malformed", fl + opt(6, struct.pack(">I", 100) + b"alpha") +
        opt(6, struct.pack(">I", 5) + b"alpha" + struct.pack(">H", 7)) + opt(2))
    put("nbd-opt", "meta-before-structured", fl + opt(10, meta) + opt(8) + opt(9, meta) +
        opt(10, meta) + opt(9, meta[:12]) + opt(7, go) + req(7, 0, 1 << 20, flags=8))
    put("nbd-opt", "go-snapshot-tag", fl + opt(7, struct.pack(">I", 7) + b"alpha@1\0\0") +
        opt(7, struct.pack(">I", 6) + b"alpha@\0\0") + opt(7, struct.pack(">I", 7) + b"/alpha@\0\0"))
    put("nbd-opt", "go-twice-locked", fl + opt(7, go) + req(1, 0, 8, cookie=7) + b"x" * 8)
    M = 32 << 20
    put("nbd-req", "mode3-oversized-read", bytes([3]) + req(0, 0, M + 1))
    put("nbd-req", "mode0-oversized-write", bytes([0]) + req(1, 0, M + 1) + b"x" * 64)
    put("nbd-req", "mode1-unknown-cmd", bytes([1]) + req(5, 0, 8) + req(0, 0, 8))
    put("nbd-req", "mode1-past-end", bytes([1]) + req(0, (16 << 20) - 4, 8) +
        req(1, (16 << 20) - 4, 8) + b"y" * 8 + req(6, 1 << 63, 1 << 31) +
        req(4, (1 << 64) - 8, 16) + req(0, 0, 0) + req(3, 5, 5))
    put("nbd-req", "mode0-past-end", bytes([0]) + req(0, 16 << 20, 1) + req(0, (16 << 20) - 1, 1))
    put("nbd-req", "mode1-block-status-no-meta", bytes([1]) + req(7, 0, 4096))
    put("nbd-req", "mode3-block-status", bytes([3]) + req(1, 4 << 20, 4096) + b"z" * 4096 +
        req(7, 0, 16 << 20) + req(7, 0, 16 << 20, flags=8) + req(7, 1 << 20, 0))
    put("nbd-req", "mode5-readonly", bytes([5]) + req(1, 0, 4) + b"abcd" + req(4, 0, 4096) +
        req(6, 0, 4096) + req(3) + req(0, 0, 8192))
    put("nbd-req", "mode0-bad-magic", bytes([0]) + req(0, 0, 8, magic=0x25609514) + req(3))
    put("nbd-req", "mode1-cross-object", bytes([1]) + req(1, (4 << 20) - 100, 200) + b"c" * 200 +
        req(0, (4 << 20) - 300, 600) + req(6, (8 << 20) - 10, 20, flags=2) +
        req(4, (12 << 20) - 10, 20) + req(0, (8 << 20) - 4096, 8192))
    put("nbd-req", "mode1-short-payload", bytes([1]) + req(1, 0, 100) + b"q" * 50)


def main():
    crafted()
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "conn-*")) if len(sys.argv) > 1 else []):
        if path.endswith(".rsp"):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < 4:
            continue
        mode, trans, names = split(data)
        label = "opts-" + "-".join(str(n) for n in names[:6])
        put("nbd-opt", label, data)
        if trans is not None:
            put("nbd-req", "mode%d" % mode, bytes([mode]) + trans)


if __name__ == "__main__":
    main()
