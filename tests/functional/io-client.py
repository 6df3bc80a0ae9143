#!/usr/bin/env python3
"""Pipelining clients of the io tests (200-209), for both front-ends.

usage: io-client.py PROTO PORT TARGET MODE CMD COUNT SIZE [SHEEP_PID]

PROTO is sheep (TARGET: the VDI's id, in hex) or nbd (TARGET: the export).
CMD is read, write or (nbd only) zero; request i is SIZE bytes at offset
i * SIZE within the first 64 MiB (writes carry the byte 0x5a; zero is a
WRITE_ZEROES with NO_HOLE, which carries no payload). MODE:
  pipeline   a sender and a reader thread: COUNT requests in flight at once
             as the socket allows; prints the replies and their errors
  noread     sends COUNT requests and reads no reply until the daemon stops
             taking them, then prints how much SHEEP_PID's RSS grew (to
             stderr, with a verdict line on stdout), then reads every reply
  halfclose  sends COUNT requests, shuts its sending side down, then reads
             the replies until the daemon closes; prints how many came
Exits 0 unless the server broke the protocol.
"""
import socket
import struct
import sys
import threading
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x3E889045565A9
NBD_REQMAGIC = 0x25609513
NBD_SIMPLE = 0x67446698
SPAN = 64 << 20


def recvall(s, n):
    b = bytearray()
    while len(b) < n:
        c = s.recv(min(n - len(b), 1 << 20))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return bytes(b)


class Sheep:
    """the sheepdog protocol: READ_OBJ / WRITE_OBJ on a VDI's data objects"""

    def __init__(self, port, vid):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.vid = int(vid, 16)

    def request(self, i, write, off, size, data):
        oid = self.vid << 32 | off >> 22
        return struct.pack("<BBHIIIQQBB6xQ", 1, 3 if write else 2, 1 if write else 0, 0, i,
                           size, oid, 0, 0, 0, off & ((4 << 20) - 1)) + (data if write else b"")

    def reply(self, write, size):
        h = recvall(self.s, 48)
        _, _, _, _, rid, dlen, result = struct.unpack("<BBHIIII", h[:20])
        if dlen:
            recvall(self.s, dlen)
        return rid, result


class Nbd:
    """NBD, after OPT_GO, with simple replies"""

    def __init__(self, port, export):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        magic, opt, _ = struct.unpack(">QQH", recvall(s, 18))
        assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
        s.sendall(struct.pack(">I", 3))
        name = export.encode()
        data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
        s.sendall(struct.pack(">QII", IHAVEOPT, 7, len(data)) + data)
        while True:
            magic, _, rtype, rlen = struct.unpack(">QIII", recvall(s, 20))
            payload = recvall(s, rlen)
            assert magic == REPMAGIC, "bad option reply"
            if rtype == 1:
                break
            if rtype & 0x80000000:
                raise RuntimeError("GO refused: %s" % payload.decode(errors="replace"))
        self.s = s

    zero = False

    def request(self, i, write, off, size, data):
        if self.zero:
            # WRITE_ZEROES (6) with NO_HOLE (1 << 1): zeros are written, no payload
            return struct.pack(">IHHQQI", NBD_REQMAGIC, 2, 6, i, off, size)
        return struct.pack(">IHHQQI", NBD_REQMAGIC, 0, 1 if write else 0, i, off, size) + \
            (data if write else b"")

    def reply(self, write, size):
        magic, err, cookie = struct.unpack(">IIQ", recvall(self.s, 16))
        assert magic == NBD_SIMPLE, "bad reply magic %x" % magic
        if not err and not write:
            recvall(self.s, size)
        return cookie, err


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    proto, port, target, mode, cmd, count, size = sys.argv[1:8]
    port, count, size = int(port), int(count), int(size)
    pid = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    write = cmd in ("write", "zero")
    conn = (Sheep if proto == "sheep" else Nbd)(port, target)
    conn.zero = cmd == "zero"
    s = conn.s
    data = b"\x5a" * size if cmd == "write" else b""
    reqs = [conn.request(i, write, i * size % SPAN, size, data) for i in range(count)] \
        if size <= (1 << 20) or not write else None
    sent = [0]

    def req(i):
        return reqs[i] if reqs else conn.request(i, write, i * size % SPAN, size, data)

    def sender():
        for i in range(count):
            s.sendall(req(i))
            sent[0] = i + 1

    def read_replies(n):
        errors = 0
        for i in range(n):
            _, err = conn.reply(write, size)
            errors += err != 0
        return errors, n

    if mode == "pipeline":
        t = threading.Thread(target=sender)
        t.start()
        errors, ids = read_replies(count)
        t.join()
        print("%d %ss of %d bytes in flight at once: %d replies, %d errors"
              % (count, cmd, size, count, errors))
    elif mode == "noread":
        before = rss_kib(pid)
        t = threading.Thread(target=sender, daemon=True)
        t.start()
        # until the daemon stops taking requests and its memory settles (at
        # most 60 s: a late measure only understates the growth)
        last, still, rss = -1, 0, before
        for _ in range(600):
            time.sleep(0.1)
            cur = (sent[0], rss_kib(pid))
            still = still + 1 if cur == last else 0
            last, rss = cur, cur[1]
            if still >= 20:
                break
        growth = (rss - before) / 1024
        print("%d %ss of %d bytes, no reply read: %d sent, sheep RSS %d -> %d kB (+%.1f MiB)"
              % (count, cmd, size, sent[0], before, rss, growth), file=sys.stderr)
        print("growth_mib=%d" % int(growth), flush=True)
        errors, _ = read_replies(count)
        t.join()
        print("then read %d replies, %d errors" % (count, errors))
    elif mode == "halfclose":
        sender()
        s.shutdown(socket.SHUT_WR)
        got = errors = 0
        try:
            while got < count:
                _, err = conn.reply(write, size)
                got += 1
                errors += err != 0
        except (EOFError, ConnectionResetError):
            pass
        print("%d %ss, then shutdown(SHUT_WR): %d replies (%d errors)"
              % (count, cmd, got, errors))
        try:
            end = s.recv(1)
            print("then the daemon closed the connection" if end == b""
                  else "more bytes after the last reply")
        except ConnectionResetError:
            print("then the daemon reset the connection")
    else:
        sys.exit("unknown mode " + mode)
    s.close()


if __name__ == "__main__":
    main()
