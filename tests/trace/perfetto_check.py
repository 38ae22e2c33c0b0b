#!/usr/bin/env python3
"""Parses a Chrome trace event JSON (what Perfetto loads) and checks the
counter tracks' final and peak values and the step marks against the
recorded run's statistics. Exit status 0 when every check holds.
  perfetto_check.py JSON --allocated N --peak-allocated N --reserved N
                         --peak-reserved N --pending N --steps N"""
import argparse
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("json")
for k in ("allocated", "peak-allocated", "reserved", "peak-reserved", "pending", "steps"):
    ap.add_argument("--" + k, type=int, required=True)
args = ap.parse_args()
with open(args.json) as f:
    events = json.load(f)["traceEvents"]
tracks = {}
steps = 0
for e in events:
    check_keys = {"name", "ph", "pid"} <= e.keys()
    if not check_keys:
        print("perfetto_check: an event without name/ph/pid:", e, file=sys.stderr)
        sys.exit(1)
    if e["ph"] == "C" and e["pid"] == 0:
        tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes"]))
    elif e["ph"] == "i" and e["name"].startswith("step"):
        steps += 1
problems = []
for name, final, peak in (("allocated", args.allocated, args.peak_allocated),
                          ("reserved", args.reserved, args.peak_reserved), ("pending", args.pending, None)):
    vals = tracks.get(name, [])
    if not vals:
        problems.append(f"no {name} counter")
        continue
    if any(b[0] < a[0] for a, b in zip(vals, vals[1:])):
        problems.append(f"{name}: time goes back")
    if vals[-1][1] != final:
        problems.append(f"{name}: ends at {vals[-1][1]}, the run at {final}")
    if peak is not None and max(v for _, v in vals) != peak:
        problems.append(f"{name}: peaks at {max(v for _, v in vals)}, the run at {peak}")
if steps != args.steps:
    problems.append(f"{steps} step marks, the run made {args.steps}")
for p in problems:
    print("perfetto_check:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
