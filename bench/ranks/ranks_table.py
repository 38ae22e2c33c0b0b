#!/usr/bin/env python3
"""One table for the ranks of a job: peak, leaks, OOMs and creep per rank.

Reads the JSON reports that cudalloc wrote for each process of one job
(`report:<prefix>` with %r in the prefix: one <prefix>-stats.json per rank)
and prints one line per rank, sorted by rank, so that the rank that peaks
higher, leaks or creeps stands out:

    python3 bench/ranks/ranks_table.py run/job-*-stats.json

Fields read (docs/reports.md, "Many ranks, one job"); any that a report
lacks prints as "-", so that the tool keeps working on older reports and
on fields added later:
  schema                               must start with "cudalloc-"
  job.rank, job.host, job.pid          which process wrote it (rank null: none set)
  devices[].stats.allocated_bytes.peak largest over the devices
  devices[].stats.reserved_bytes.peak  largest over the devices
  devices[].leaks[].bytes, .count      summed: what was still live when written
  devices[].stats.num_ooms.total       summed
  oom.verdict, creep.verdict           (top level, or per device) when present
Standard library only. Exit status 1 when no file could be read.
"""
import json
import sys


def mib(b):
    return "-" if b is None else "%.1f MiB" % (b / 1048576.0)


def dig(obj, *keys):
    """obj[k0][k1]..., or None when any step is missing or of another type."""
    for k in keys:
        if isinstance(obj, dict) and k in obj:
            obj = obj[k]
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return None
    return obj


def number(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def verdict(report, devices, name):
    """The `name.verdict` of the report, or the devices' (joined), or None."""
    top = dig(report, name, "verdict")
    if isinstance(top, str):
        return top
    per = [dig(d, name, "verdict") for d in devices]
    per = [v for v in per if isinstance(v, str)]
    return ",".join(per) if per else None


def row_of(path, report):
    devices = [d for d in (report.get("devices") or []) if isinstance(d, dict)]
    peaks = [number(dig(d, "stats", "allocated_bytes", "peak")) for d in devices]
    reserved = [number(dig(d, "stats", "reserved_bytes", "peak")) for d in devices]
    peaks = [p for p in peaks if p is not None]
    reserved = [p for p in reserved if p is not None]
    leak_bytes = leak_count = None
    for d in devices:
        for leak in d.get("leaks") or []:
            b, c = number(dig(leak, "bytes")), number(dig(leak, "count"))
            if b is not None:
                leak_bytes = (leak_bytes or 0) + b
                leak_count = (leak_count or 0) + (c or 0)
        if isinstance(d.get("leaks"), list) and leak_bytes is None:
            leak_bytes, leak_count = 0, 0   # a report that lists no leak: none
    ooms = [number(dig(d, "stats", "num_ooms", "total")) for d in devices]
    ooms = [o for o in ooms if o is not None]
    oom_verdict = verdict(report, devices, "oom")
    creep = verdict(report, devices, "creep")
    rank = number(dig(report, "job", "rank"))
    return {
        "rank": rank,
        "host": dig(report, "job", "host"),
        "pid": number(dig(report, "job", "pid")),
        "peak": max(peaks) if peaks else None,
        "reserved": max(reserved) if reserved else None,
        "leaks": None if leak_bytes is None else "%d B in %d" % (leak_bytes, leak_count),
        "ooms": None if not ooms else str(int(sum(ooms))) + (" (%s)" % oom_verdict if oom_verdict else ""),
        "creep": creep,
        "path": path,
    }


def load(path):
    """The report at path, or None with one line on stderr saying why not."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print("ranks_table: skipped %s: %s" % (path, e), file=sys.stderr)
        return None
    schema = report.get("schema") if isinstance(report, dict) else None
    if not isinstance(schema, str) or not schema.startswith("cudalloc-"):
        print("ranks_table: skipped %s: not a cudalloc report (schema %r)" % (path, schema), file=sys.stderr)
        return None
    return report


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 1
    rows = [row_of(p, r) for p in argv[1:] for r in [load(p)] if r is not None]
    if not rows:
        print("ranks_table: no report could be read", file=sys.stderr)
        return 1
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["path"]))
    head = ("rank", "host", "pid", "peak allocated", "peak reserved", "leaks (bytes in blocks)", "OOMs", "creep")
    cells = [head] + [
        (
            "-" if r["rank"] is None else str(int(r["rank"])),
            r["host"] if isinstance(r["host"], str) else "-",
            "-" if r["pid"] is None else str(int(r["pid"])),
            mib(r["peak"]),
            mib(r["reserved"]),
            r["leaks"] or "-",
            r["ooms"] or "-",
            r["creep"] or "-",
        )
        for r in rows
    ]
    width = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for c in cells:
        print("  ".join(s.ljust(w) for s, w in zip(c, width)).rstrip())
    peaked = [r for r in rows if r["peak"] is not None]
    if len(peaked) > 1:
        hi = max(peaked, key=lambda r: r["peak"])
        lo = min(peaked, key=lambda r: r["peak"])
        name = lambda r: "rank %d" % r["rank"] if r["rank"] is not None else r["path"]
        print("highest peak: %s (%s); lowest: %s (%s)" % (name(hi), mib(hi["peak"]), name(lo), mib(lo["peak"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
