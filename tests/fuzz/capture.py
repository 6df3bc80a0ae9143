#!/usr/bin/env python3
"""Record what clients send to a sheep: a loopback proxy for seed corpora.

    capture.py LISTEN_PORT SHEEP_PORT OUTDIR

Accepts on 127.0.0.1:LISTEN_PORT, forwards each connection to
127.0.0.1:SHEEP_PORT, and writes the bytes the client sent on it to
OUTDIR/conn-NNNN, and the replies to OUTDIR/conn-NNNN.rsp. Stops on
SIGTERM.
"""
import os
import selectors
import signal
import socket
import sys


def main():
    lport, sport, outdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", lport))
    ls.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    n = 0
    conns = {}  # socket -> (peer socket, file or None)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                c, _ = ls.accept()
                u = socket.create_connection(("127.0.0.1", sport))
                f = open(os.path.join(outdir, "conn-%04d" % n), "wb")
                r = open(os.path.join(outdir, "conn-%04d.rsp" % n), "wb")
                n += 1
                conns[c] = (u, f)
                conns[u] = (c, r)
                sel.register(c, selectors.EVENT_READ, None)
                sel.register(u, selectors.EVENT_READ, None)
                continue
            if s not in conns:  # closed with its peer in this round
                continue
            peer, f = conns[s]
            try:
                data = s.recv(1 << 20)
            except ConnectionResetError:
                data = b""

            if data:
                f.write(data)
                peer.sendall(data)
                continue
            for x in (s, peer):
                sel.unregister(x)
                x.close()
                conns.pop(x)[1].close()


if __name__ == "__main__":
    main()
