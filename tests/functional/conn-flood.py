#!/usr/bin/env python3
"""Connection floods against one sheep, for tests/functional/186.

  conn-flood.py PORT PID IDLE SLOW

Opens IDLE connections that send nothing and SLOW slowloris connections
that send half a request header and stall, then times a normal request
(GET_CLUSTER_DEFAULT) on a new connection while they are all open. Prints
one line per fact, without numbers that vary; the numbers (times, RSS, CPU)
go to stderr. Then it waits for the daemon to close the slowloris
connections (its --client-timeout) and reports how many it closed and
whether it left the idle ones alone.
"""
import socket
import struct
import sys
import time

port, pid, n_idle, n_slow = (int(a) for a in sys.argv[1:5])
HDR = struct.Struct("<BBHIII40x")  # proto_ver, opcode, flags, epoch, id, data_length


def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def cpu_s():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def normal_request():
    """GET_CLUSTER_DEFAULT (0x18): seconds it took, or None on failure"""
    t0 = time.monotonic()
    try:
        s = connect()
        s.sendall(HDR.pack(0x01, 0x18, 0, 0, 42, 0))
        rsp = b""
        while len(rsp) < 48:
            chunk = s.recv(48 - len(rsp))
            if not chunk:
                return None
            rsp += chunk
        s.close()
    except OSError:
        return None
    result = struct.unpack_from("<I", rsp, 16)[0]
    return time.monotonic() - t0 if result == 0 else None


rss0 = rss_kib()
cpu0 = cpu_s()
idle = [connect() for _ in range(n_idle)]
slow = []
for _ in range(n_slow):
    s = connect()
    s.sendall(HDR.pack(0x01, 0x02, 0, 0, 1, 0)[:20])  # half a READ_OBJ header
    slow.append(s)
time.sleep(1)
took = normal_request()
rss1 = rss_kib()
print(f"{n_idle} idle and {n_slow} slowloris connections open")
if took is not None and took < 5:
    print("a normal request completed within 5 s")
else:
    print(f"a normal request did not complete within 5 s ({took})")
grew = rss1 - rss0
print("RSS grew by less than 64 MiB" if grew < 65536 else "RSS grew by 64 MiB or more")
print(f"normal request {took} s; RSS {rss0} KiB -> {rss1} KiB (+{grew} KiB)", file=sys.stderr)

# the daemon closes the slowloris connections after its --client-timeout
deadline = time.monotonic() + 20
closed = 0
for s in slow:
    s.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        if s.recv(1) == b"":
            closed += 1
    except OSError:
        pass
    s.close()
print(f"slowloris connections closed by the daemon: {closed} of {n_slow}")
alive = 0
for s in idle:
    s.setblocking(False)
    try:
        alive += 0 if s.recv(1) == b"" else 1
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print(f"idle connections still open: {alive} of {n_idle}")
took = normal_request()
print("a normal request completed" if took is not None else "a normal request failed")
cpu = cpu_s() - cpu0
print("daemon CPU under 5 s meanwhile" if cpu < 5 else f"daemon CPU {cpu} s")
print(f"daemon CPU {cpu:.2f} s; RSS at the end {rss_kib()} KiB", file=sys.stderr)
for s in idle:
    s.close()
