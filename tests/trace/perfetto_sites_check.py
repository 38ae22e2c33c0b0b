#!/usr/bin/env python3
"""Parses a Chrome trace event JSON (what Perfetto loads) and checks its
per-call-site counter tracks ("site N: NAME", device 0) against figures the
recorded run summed itself: the tracks are exactly the expected sites, each
peaks and ends at the expected bytes, and never goes back in time.
Exit status 0 when every check holds; each failure is one line on stderr.
  perfetto_sites_check.py JSON --site FUNCTION:PEAK:FINAL:TRACKED ...
FUNCTION is a function name the site's track name must hold; TRACKED 1 when
the site must have a track (a top site), 0 when it must not."""
import argparse
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("json")
ap.add_argument("--site", action="append", required=True)
args = ap.parse_args()
with open(args.json) as f:
    events = json.load(f)["traceEvents"]
tracks = {}
for e in events:
    if e.get("ph") == "C" and e.get("pid") == 0 and re.match(r"site \d+: ", e["name"]):
        tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes"]))
problems = []
claimed = set()
for spec in args.site:
    func, peak, final, tracked = spec.rsplit(":", 3)
    peak, final, tracked = int(peak), int(final), tracked == "1"
    names = [n for n in tracks if re.search(r"\b%s\b" % re.escape(func), n)]
    if not tracked:
        if names:
            problems.append(f"{func}: not a top site, yet it has the track {names[0]!r}")
        continue
    if len(names) != 1:
        problems.append(f"{func}: {len(names)} tracks name it (of {sorted(tracks)})")
        continue
    claimed.add(names[0])
    vals = tracks[names[0]]
    if any(b[0] < a[0] for a, b in zip(vals, vals[1:])):
        problems.append(f"{func}: time goes back")
    if max(v for _, v in vals) != peak:
        problems.append(f"{func}: peaks at {max(v for _, v in vals)}, the run's own sum at {peak}")
    if vals[-1][1] != final:
        problems.append(f"{func}: ends at {vals[-1][1]}, the run's own sum at {final}")
for n in sorted(set(tracks) - claimed):
    problems.append(f"a track no expected site names: {n!r}")
for p in problems:
    print("perfetto_sites_check:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
