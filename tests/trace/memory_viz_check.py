#!/usr/bin/env python3
"""Reads a memory snapshot the way PyTorch's torch/cuda/_memory_viz.py reads
one (the same keys: segments' address, total_size, stream, segment_type,
device and blocks' size, state, requested_size, frames; device_traces'
action, addr, size, stream, frames, time_us; frames' filename, line, name),
computes its timelines, and checks them against the recorded run's figures.
Exit status 0 when every check holds; each failure is one line on stderr.
  memory_viz_check.py SNAPSHOT --peak-requested N --live-requested N --mapped N --allocs N [--need-frames]"""
import argparse
import pickle
import sys

ap = argparse.ArgumentParser()
ap.add_argument("snapshot")
for k in ("peak-requested", "live-requested", "mapped", "allocs"):
    ap.add_argument("--" + k, type=int, required=True)
ap.add_argument("--need-frames", action="store_true", help="allocations carry stacks (track:backtrace)")
args = ap.parse_args()

with open(args.snapshot, "rb") as f:
    data = pickle.load(f)
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def frame_fmt(f):  # _memory_viz._frame_fmt
    return f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}"


# _memory_viz.segments / memory: the segments and their blocks tile them.
live_requested = 0
mapped = 0
states = set()
for seg in data["segments"]:
    addr, total = seg["address"], seg["total_size"]
    mapped += total
    check(seg["segment_type"] in ("small", "large"), f"segment {addr:#x}: type {seg['segment_type']!r}")
    check(isinstance(seg["stream"], int) and isinstance(seg["device"], int), f"segment {addr:#x}: stream/device")
    at = addr
    for b in seg["blocks"]:
        check(b.get("address", at) == at, f"segment {addr:#x}: block at {b.get('address', 0):#x}, expected {at:#x}")
        at += b["size"]
        states.add(b["state"])
        check(b["state"] in ("active_allocated", "active_awaiting_free", "inactive"), f"block state {b['state']!r}")
        if b["state"] == "active_allocated":
            live_requested += b["requested_size"]
            check(b["requested_size"] <= b["size"], "requested_size above size")
        for fr in b["frames"]:
            frame_fmt(fr)
    check(at == addr + total, f"segment {addr:#x}: blocks end at {at:#x}, the segment at {addr + total:#x}")
check({"active_allocated", "active_awaiting_free"} <= states, f"the blocks' states are only {sorted(states)}")
check(live_requested == args.live_requested, f"live requested bytes {live_requested}, the run had {args.live_requested}")
check(mapped == args.mapped, f"segments hold {mapped} bytes, the run had {args.mapped} mapped")

# _memory_viz.trace and the viewer's active-memory timeline: allocs and frees
# by address, in time order.
peak = 0
allocs = 0
frames_seen = 0
for dev, trace in enumerate(data["device_traces"]):
    live = {}
    freed = {}
    cur = 0
    last_t = 0
    for e in trace:
        a, addr, size = e["action"], e["addr"], e["size"]
        check(isinstance(e["stream"], int), "stream not an int")
        check(e["time_us"] >= last_t, f"device {dev}: time goes back at {addr:#x}")
        last_t = e["time_us"]
        frames_seen += len(e["frames"])
        for fr in e["frames"]:
            frame_fmt(fr)
        if a == "alloc":
            check(addr not in live, f"device {dev}: {addr:#x} allocated twice")
            live[addr] = size
            cur += size
            allocs += 1
            peak = max(peak, cur)
        elif a == "free_requested":
            check(live.get(addr) == size, f"device {dev}: free_requested of {addr:#x} ({size}) not live")
            cur -= live.pop(addr, 0)
            freed[addr] = size
        elif a == "free_completed":
            check(addr in freed, f"device {dev}: free_completed of {addr:#x} never freed")
            freed.pop(addr, None)
        elif a in ("segment_map", "segment_unmap", "segment_alloc", "segment_free", "oom", "snapshot"):
            pass
        else:
            check(False, f"unknown action {a!r}")
check(peak == args.peak_requested, f"peak of the alloc/free timeline {peak}, the run's peak requested {args.peak_requested}")
check(frames_seen > 0 or not args.need_frames, "no entry has frames")
check(allocs == args.allocs, f"{allocs} alloc entries, the run made {args.allocs} allocations")
for p in problems:
    print("memory_viz_check:", p, file=sys.stderr)
if problems:
    print(f"memory_viz_check: {len(data['segments'])} segments, {allocs} allocs, peak {peak}, "
          f"{frames_seen} frames, {len(problems)} problems", file=sys.stderr)
sys.exit(1 if problems else 0)
