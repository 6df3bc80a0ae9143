#!/usr/bin/env python3
"""A tiny NBD client for the NBD tests: well-behaved steps and bad clients.

usage: nbd-client.py PORT EXPORT SCENARIO
Prints one line per observation; exits 0 unless the server misbehaved.
"""
import socket
import struct
import subprocess
import sys
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x3E889045565A9
REQMAGIC = 0x25609513
SIMPLE = 0x67446698
OPT_GO = 7
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2


def recvall(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    magic, opt, flags = struct.unpack(">QQH", recvall(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    return s, flags


def go(port, export):
    s, _ = connect(port)
    s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
    name = export.encode()
    data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
    size = flags = None
    while True:
        magic, opt, rtype, rlen = struct.unpack(">QIII", recvall(s, 20))
        payload = recvall(s, rlen)
        assert magic == REPMAGIC and opt == OPT_GO
        if rtype == 3 and struct.unpack(">H", payload[:2])[0] == 0:
            size, flags = struct.unpack(">QH", payload[2:12])
        elif rtype == 1:
            return s, size, flags
        elif rtype & 0x80000000:
            raise RuntimeError("GO refused: %s" % payload.decode(errors="replace"))


def request(s, cmd, cookie, off, length, data=b"", flags=0):
    s.sendall(struct.pack(">IHHQQI", REQMAGIC, flags, cmd, cookie, off, length) + data)


def simple_reply(s, read_len=0):
    magic, err, cookie = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == SIMPLE, "bad reply magic %x" % magic
    data = recvall(s, read_len) if not err and read_len else b""
    return err, cookie, data


def expect_eof(s):
    try:
        while s.recv(65536):
            pass
        print("connection closed by the server")
    except (ConnectionResetError, socket.timeout) as e:
        print("connection ended: %s" % type(e).__name__)


def main():
    port, export, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if scenario == "truncated-handshake":
        s, _ = connect(port)
        s.sendall(b"\0\0")  # half of the client flags
        s.close()
        s, _ = connect(port)
        s.sendall(struct.pack(">I", 1) + struct.pack(">Q", IHAVEOPT) + b"\0\0\0\7\0\0")
        s.close()
        print("sent two truncated handshakes")
    elif scenario == "bad-magic":
        s, _ = connect(port)
        s.sendall(struct.pack(">IQII", 1, 0x1234, OPT_GO, 0))
        expect_eof(s)
    elif scenario == "oversized":
        s, size, _ = go(port, export)
        request(s, CMD_WRITE, 1, 0, 64 << 20)
        expect_eof(s)
    elif scenario == "oversized-read":
        s, size, _ = go(port, export)
        # qemu-nbd's answer (nbd-tester-client's integrityhuge): an error,
        # and the connection goes on
        request(s, CMD_READ, 7, 0, 33 << 20)
        err, cookie, _ = simple_reply(s)
        print("read of 33 MiB: error %d cookie %d" % (err, cookie))
        request(s, CMD_READ, 8, 0, 4096)
        err, cookie, data = simple_reply(s, 4096)
        print("then a read of 4 KiB: error %d cookie %d, %d bytes" % (err, cookie, len(data)))
        request(s, CMD_DISC, 9, 0, 0)
        expect_eof(s)
    elif scenario == "unknown-command":
        s, size, _ = go(port, export)
        request(s, 42, 9, 0, 0)
        err, cookie, _ = simple_reply(s)
        print("command 42: error %d cookie %d" % (err, cookie))
        expect_eof(s)
    elif scenario == "write-snapshot":
        s, size, flags = go(port, export)
        print("read-only flag: %d" % (flags >> 1 & 1))
        request(s, CMD_WRITE, 5, 0, 4096, b"x" * 4096)
        err, cookie, _ = simple_reply(s)
        print("write: error %d" % err)
        request(s, CMD_DISC, 6, 0, 0)
        s.close()
    elif scenario.startswith("no-read-"):
        # many writes of a pattern byte, then a disconnect without reading
        # a single reply
        byte = int(scenario[len("no-read-"):], 16)
        s, size, _ = go(port, export)
        for i in range(32):
            request(s, CMD_WRITE, i, i << 20, 1 << 20, bytes([byte]) * (1 << 20))
        s.shutdown(socket.SHUT_WR)
        # close only once the server has closed its side (TIME_WAIT, CLOSE, CLOSE_WAIT, LAST_ACK): a
        # close with unread replies resets the connection, and the server
        # could lose requests it has not read yet
        for _ in range(600):
            state = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
            if state in (6, 7, 8, 9):
                break
            time.sleep(0.1)
        s.close()
        print("sent 32 writes, read no reply")
    elif scenario == "zero-no-hole":
        off, length = (int(x) for x in sys.argv[4:6])
        s, size, _ = go(port, export)
        request(s, 6, 3, off, length, flags=2)  # WRITE_ZEROES, NO_HOLE
        err, cookie, _ = simple_reply(s)
        print("write zeroes, no hole: error %d" % err)
        request(s, CMD_DISC, 4, 0, 0)
        s.close()
    elif scenario == "across-snapshot":
        # write, let the command after "--" snapshot the VDI, write again on
        # the same connection, read both back
        cmd = sys.argv[sys.argv.index("--") + 1:]
        s, size, _ = go(port, export)
        request(s, CMD_WRITE, 1, 0, 1 << 20, b"\x01" * (1 << 20))
        request(s, CMD_WRITE, 2, 4 << 20, 1 << 20, b"\x02" * (1 << 20))
        print("before: errors %d %d" % (simple_reply(s)[0], simple_reply(s)[0]))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        request(s, CMD_WRITE, 3, 4096, 4096, b"\x03" * 4096)
        request(s, CMD_WRITE, 4, 8 << 20, 4096, b"\x04" * 4096)
        print("after: errors %d %d" % (simple_reply(s)[0], simple_reply(s)[0]))
        request(s, CMD_READ, 5, 0, 8192)
        err, _, data = simple_reply(s, 8192)
        ok = not err and data == b"\x01" * 4096 + b"\x03" * 4096
        print("read back: %s" % ("ok" if ok else "wrong"))
        request(s, CMD_DISC, 6, 0, 0)
        s.close()
    elif scenario == "concurrent-alloc":
        # 64 writes of 4 KiB, pipelined, into each of the objects OBJ..OBJ+3
        # (unallocated, or shared with a snapshot): all of them must land
        first = int(sys.argv[4])
        s, size, _ = go(port, export)
        cookie = 0
        for obj in range(first, first + 4):
            for i in range(64):
                off = (obj << 22) + i * 65536
                request(s, CMD_WRITE, cookie, off, 4096, bytes([i + 1]) * 4096)
                cookie += 1
        errors = sum(1 for _ in range(cookie) if simple_reply(s)[0])
        print("%d writes, %d errors" % (cookie, errors))
        bad = 0
        for obj in range(first, first + 4):
            request(s, CMD_READ, 1000 + obj, obj << 22, 4 << 20)
            err, _, data = simple_reply(s, 4 << 20)
            for i in range(64):
                if err or data[i * 65536:i * 65536 + 4096] != bytes([i + 1]) * 4096:
                    bad += 1
        print("writes lost: %d" % bad)
        request(s, CMD_DISC, 0, 0, 0)
        s.close()
    elif scenario == "past-the-end":
        s, size, _ = go(port, export)
        request(s, CMD_WRITE, 1, size - 2048, 4096, b"z" * 4096)
        print("write across the end: error %d" % simple_reply(s)[0])
        request(s, CMD_READ, 2, size, 512)
        print("read past the end: error %d" % simple_reply(s)[0])
        request(s, 4, 3, size - 512, 1024)  # TRIM
        print("trim across the end: error %d" % simple_reply(s)[0])
        request(s, CMD_READ, 4, size - 512, 512)
        err, _, data = simple_reply(s, 512)
        print("then a read of the last 512 bytes: error %d, %d bytes" % (err, len(data)))
        request(s, CMD_DISC, 5, 0, 0)
        s.close()
    elif scenario == "export-name":
        # the old way into transmission, with and without NO_ZEROES
        for cflags in (3, 1):
            s, _ = connect(port)
            s.sendall(struct.pack(">I", cflags))
            name = export.encode()
            s.sendall(struct.pack(">QII", IHAVEOPT, 1, len(name)) + name)
            size, flags = struct.unpack(">QH", recvall(s, 10))
            if not cflags & 2:
                assert recvall(s, 124) == bytes(124)
            request(s, CMD_READ, 1, 0, 4096)
            err, _, data = simple_reply(s, 4096)
            print("export-name (flags %d): size %d, read error %d, first byte 0x%02x"
                  % (cflags, size, err, data[0]))
            request(s, CMD_DISC, 2, 0, 0)
            s.close()
        s, _ = connect(port)
        s.sendall(struct.pack(">I", 3))
        s.sendall(struct.pack(">QII", IHAVEOPT, 1, 6) + b"nosuch")
        expect_eof(s)
    elif scenario == "hold":
        # keep a writable export open until killed
        s, size, _ = go(port, export)
        print("holding %s" % export, flush=True)
        while True:
            s.recv(1)
    else:
        sys.exit("unknown scenario " + scenario)


if __name__ == "__main__":
    main()
