#!/usr/bin/env python3
"""Checks of the tests of requests across nodes (340-359).

  trace-check.py chrome FILE NODES
      the merged trace (cat --all --format chrome) against the Trace Event
      Format's fields that Perfetto reads: one line per kind of problem,
      then "schema problems: N"
  trace-check.py replicas EV0 EV1 EV2
      every remote peer write of a request traced at its gateway has its
      part, under the request's id, on a replica: "N of N"
  trace-check.py chosen EV0 EV1 EV2
      request mode: no call outside a recorded request, and every replica's
      part is of a request its gateway recorded
"""
import json
import sys

FLAG_GATEWAY = 0x100
WRITES = {0x01, 0x03}          # create_and_write_obj, write_obj
PEER_WRITES = {0xA1, 0xA2}     # write_peer, create_and_write_peer


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def chrome(path, nr_nodes):
    problems = []
    doc = json.load(open(path))
    ev = doc.get("traceEvents")
    if not isinstance(ev, list):
        print("schema problems: no traceEvents")
        return
    other = doc.get("otherData", {})
    nodes = other.get("nodes", [])
    if not isinstance(other.get("clock_sync"), str) or "round trip" not in other["clock_sync"]:
        problems.append("otherData: no clock_sync method")
    if len(nodes) != nr_nodes or any(
            not (isinstance(n.get("pid"), int) and isinstance(n.get("node"), str)
                 and isinstance(n.get("offset_ns"), int) and isinstance(n.get("error_ns"), int)
                 and n["error_ns"] >= 0) for n in nodes):
        problems.append("otherData: nodes")
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        problems.append("displayTimeUnit")
    slices = {}
    flows = {}
    procs = set()
    for e in ev:
        ph = e.get("ph")
        if not (isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)):
            problems.append("pid/tid of a %s event" % ph)
            continue
        if ph == "M":
            if e.get("name") not in ("process_name", "thread_name") or \
                    not isinstance(e.get("args", {}).get("name"), str):
                problems.append("metadata event")
            if e.get("name") == "process_name":
                procs.add(e["pid"])
        elif ph == "X":
            if not (isinstance(e.get("name"), str) and e["name"] and
                    e.get("cat") in ("function", "request") and num(e.get("ts")) and
                    num(e.get("dur")) and e["ts"] >= 0 and e["dur"] >= 0):
                problems.append("complete event")
                continue
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        elif ph in ("s", "f"):
            if not (isinstance(e.get("id"), int) and num(e.get("ts")) and
                    isinstance(e.get("name"), str) and isinstance(e.get("cat"), str)):
                problems.append("flow event")
                continue
            if ph == "f" and e.get("bp") != "e":
                problems.append("flow end not bound to its enclosing slice")
            flows.setdefault(e["id"], []).append(e)
        else:
            problems.append("phase %s" % ph)
    if procs != set(range(1, nr_nodes + 1)):
        problems.append("process names: %s" % sorted(procs))
    for fid, fl in flows.items():
        if sorted(f["ph"] for f in fl) != ["f", "s"] or fl[0]["pid"] == fl[1]["pid"]:
            problems.append("flow %s: not one start and one end on two nodes" % fid)
            continue
        for f in fl:
            inside = any(b <= f["ts"] <= e for b, e in slices.get((f["pid"], f["tid"]), []))
            if not inside:
                problems.append("flow %s: its %s is in no slice of its thread" % (fid, f["ph"]))
    for p in sorted(set(problems)):
        print("  %d x %s" % (problems.count(p), p))
    print("processes: %d" % len(procs))
    print("flows: %s" % ("some" if flows else "none"))
    print("schema problems: %d" % len(problems))


def parts(paths):
    """(node, kind, id, flags, opcode) of every Q line, and (node, id) of every call"""
    qs, calls = [], []
    for node, path in enumerate(paths):
        for line in open(path):
            f = line.split()
            if not f:
                continue
            if f[0] == "Q":
                qs.append((node, int(f[3], 16), int(f[4], 16), int(f[5], 16)))
            elif f[0] in ("C", "O"):
                calls.append((node, int(f[5 if f[0] == "C" else 4], 16)))
    return qs, calls


def replicas(paths):
    qs, _ = parts(paths)
    writes = [(n, i) for n, i, fl, op in qs if fl & FLAG_GATEWAY and op in WRITES]
    seen = {(n, i) for n, i, fl, op in qs if not fl & FLAG_GATEWAY and op in PEER_WRITES}
    want = found = 0
    for gw, rid in writes:
        for n in range(len(paths)):
            if n == gw:
                continue
            want += 1
            found += (n, rid) in seen
    print("gateway writes: %s" % ("some" if writes else "none"))
    print("remote peer writes under their request id on their replica: %s" %
          ("all" if want and found == want else "%d of %d" % (found, want)))


def chosen(paths):
    qs, calls = parts(paths)
    recorded = {i for n, i, fl, op in qs if fl & FLAG_GATEWAY}
    parts_of = {(n, i) for n, i, fl, op in qs}
    stray = [c for c in calls if c not in parts_of]
    orphans = [(n, i) for n, i, fl, op in qs if not fl & FLAG_GATEWAY and i not in recorded]
    print("calls outside a recorded request: %d" % len(stray))
    print("replica parts of requests their gateway did not record: %d" % len(orphans))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "chrome":
        chrome(sys.argv[2], int(sys.argv[3]))
    elif what == "replicas":
        replicas(sys.argv[2:])
    elif what == "chosen":
        chosen(sys.argv[2:])
