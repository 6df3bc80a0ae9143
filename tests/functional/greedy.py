#!/usr/bin/env python3
"""Greedy clients against a victim (functional test 360, script/stress/harden).

usage: greedy.py SHEEP_PORT NBD_PORT VID SNAP_EXPORT VICTIM_EXPORT COLLIE
                 NBD_GREEDY SHEEP_GREEDY DEPTH SECONDS [SHEEP_PID]

A greedy client pipelines DEPTH reads of 4 MiB and reads no reply until
told: NBD_GREEDY of them on the read-only export SNAP_EXPORT (no lock: any
number may connect), SHEEP_GREEDY on the sheepdog protocol (READ_OBJ of
the objects of VID, hex). The victim reads 4 KiB at queue depth 1, for
SECONDS, over NBD (VICTIM_EXPORT) and over the sheepdog protocol (VID), once
before the greedy clients connect and once while they hold their replies;
`COLLIE node list -p SHEEP_PORT` is timed ten times in each phase. Then the
greedy clients all read every reply, which must all be there, whole.

Prints, one per line (key=value, for the callers to pick):
  nbd_base_iops, nbd_greedy_iops, sheep_base_iops, sheep_greedy_iops,
  victim_read_iops_ratio (the lower of the two protocols' ratios),
  node_list_base_ms, node_list_ms (the longest of the ten under greed),
  node_list_failed (how many of those did not succeed within 15 s),
  greedy_replies, greedy_errors; with SHEEP_PID, rss_growth_mib (the
  daemon's resident memory while the greedy clients hold their replies,
  less before they came).
"""
import socket
import struct
import subprocess
import sys
import threading
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x3E889045565A9
NBD_REQMAGIC = 0x25609513
NBD_SIMPLE = 0x67446698
OBJ = 4 << 20


def recvall(s, n):
    b = bytearray(n)
    view, got = memoryview(b), 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if not k:
            raise EOFError("closed after %d of %d bytes" % (got, n))
        got += k
    return bytes(b)


def nbd_open(port, export):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    magic, opt, _ = struct.unpack(">QQH", recvall(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    s.sendall(struct.pack(">I", 3))
    name = export.encode()
    data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, 7, len(data)) + data)
    size = 0
    while True:
        magic, _, rtype, rlen = struct.unpack(">QIII", recvall(s, 20))
        payload = recvall(s, rlen)
        assert magic == REPMAGIC, "bad option reply"
        if rtype == 3 and struct.unpack(">H", payload[:2])[0] == 0:
            size = struct.unpack(">Q", payload[2:10])[0]
        if rtype == 1:
            return s, size
        if rtype & 0x80000000:
            raise RuntimeError("GO refused: %s" % payload.decode(errors="replace"))


def nbd_read_req(cookie, off, length):
    return struct.pack(">IHHQQI", NBD_REQMAGIC, 0, 0, cookie, off, length)


def nbd_reply(s, length):
    magic, err, cookie = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == NBD_SIMPLE, "bad reply magic %x" % magic
    if not err:
        recvall(s, length)
    return err


def sheep_read_req(vid, rid, off, length):
    oid = vid << 32 | off // OBJ
    return struct.pack("<BBHIIIQQBB6xQ", 1, 2, 0, 0, rid, length, oid, 0, 0, 0, off % OBJ)


def sheep_reply(s):
    h = recvall(s, 48)
    _, _, _, _, _, dlen, result = struct.unpack("<BBHIIII", h[:20])
    if dlen:
        recvall(s, dlen)
    return result


class Greedy:
    """DEPTH reads of 4 MiB sent, as many as the daemon takes; no reply read"""

    def __init__(self, kind, port, target, depth, span):
        self.kind, self.depth = kind, depth
        if kind == "nbd":
            self.s, _ = nbd_open(port, target)
            self.reqs = [nbd_read_req(i, i * OBJ % span, OBJ) for i in range(depth)]
        else:
            self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
            self.reqs = [sheep_read_req(target, i, i * OBJ % span, OBJ) for i in range(depth)]
        self.buf = b"".join(self.reqs)
        self.off = 0
        self.s.setblocking(False)

    def push(self):
        """send what the socket takes; True while there is more to send"""
        while self.off < len(self.buf):
            try:
                n = self.s.send(self.buf[self.off:self.off + (1 << 16)])
            except BlockingIOError:
                return True
            self.off += n
        return False

    def drain(self):
        """send the rest while reading every reply: (replies, errors)"""
        self.s.setblocking(True)
        self.s.settimeout(120)
        t = threading.Thread(target=lambda: self.s.sendall(self.buf[self.off:]))
        t.start()
        errors = 0
        for _ in range(self.depth):
            err = nbd_reply(self.s, OBJ) if self.kind == "nbd" else sheep_reply(self.s)
            errors += err != 0
        t.join()
        self.s.close()
        return self.depth, errors


def rss_kib(pid):
    if not pid:
        return 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def victim_iops(kind, port, target, seconds, span):
    if kind == "nbd":
        s, _ = nbd_open(port, target)
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        off = (n * 4096 * 37) % span
        if kind == "nbd":
            s.sendall(nbd_read_req(n, off, 4096))
            err = nbd_reply(s, 4096)
        else:
            s.sendall(sheep_read_req(target, n, off, 4096))
            err = sheep_reply(s)
        assert err == 0, "victim read failed: %d" % err
        n += 1
    s.close()
    return n / seconds


def node_list_ms(collie, port, times):
    worst, failed = 0.0, 0
    for _ in range(times):
        t0 = time.monotonic()
        try:
            r = subprocess.run([collie, "node", "list", "-p", str(port)], capture_output=True,
                               timeout=15)
            ok = r.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        ms = (time.monotonic() - t0) * 1000
        failed += not ok
        worst = max(worst, ms)
    return worst, failed


def main():
    (sport, nport, vid, snap, victim, collie, n_nbd, n_sheep, depth,
     seconds) = sys.argv[1:11]
    sport, nport, vid = int(sport), int(nport), int(vid, 16)
    n_nbd, n_sheep, depth, seconds = int(n_nbd), int(n_sheep), int(depth), float(seconds)
    pid = int(sys.argv[11]) if len(sys.argv) > 11 else 0
    s, span = nbd_open(nport, victim)
    s.close()
    span = min(span, 64 << 20)

    base_nbd = victim_iops("nbd", nport, victim, seconds, span)
    base_sheep = victim_iops("sheep", sport, vid, seconds, span)
    base_nl, _ = node_list_ms(collie, sport, 10)

    rss0 = rss_kib(pid)
    greedy = [Greedy("nbd", nport, snap, depth, span) for _ in range(n_nbd)]
    greedy += [Greedy("sheep", sport, vid, depth, span) for _ in range(n_sheep)]
    # until every greedy client has sent all it could: the daemon stopped reading
    last, still = None, 0
    for _ in range(300):
        more = [g.push() for g in greedy]
        cur = [g.off for g in greedy]
        still = still + 1 if cur == last else 0
        last = cur
        if not any(more) or still >= 10:
            break
        time.sleep(0.1)
    time.sleep(1)
    rss1 = rss_kib(pid)

    greedy_nbd = victim_iops("nbd", nport, victim, seconds, span)
    greedy_sheep = victim_iops("sheep", sport, vid, seconds, span)
    worst_nl, failed_nl = node_list_ms(collie, sport, 10)

    ratio = min(greedy_nbd / base_nbd, greedy_sheep / base_sheep)
    print("nbd_base_iops=%.0f" % base_nbd)
    print("nbd_greedy_iops=%.0f" % greedy_nbd)
    print("sheep_base_iops=%.0f" % base_sheep)
    print("sheep_greedy_iops=%.0f" % greedy_sheep)
    print("victim_read_iops_ratio=%.2f" % ratio)
    print("node_list_base_ms=%.0f" % base_nl)
    print("node_list_ms=%.0f" % worst_nl)
    print("node_list_failed=%d" % failed_nl)
    if pid:
        print("rss_growth_mib=%d" % ((rss1 - rss0) // 1024))
    sys.stdout.flush()
    # all at once: one that reads while the others still hold theirs may
    # wait for them (its share of what is left), as any client would
    results = []
    threads = [threading.Thread(target=lambda g=g: results.append(g.drain())) for g in greedy]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    replies = sum(r for r, _ in results)
    errors = sum(e for _, e in results) + len(greedy) - len(results)
    print("greedy_replies=%d" % replies)
    print("greedy_errors=%d" % errors)


if __name__ == "__main__":
    main()
