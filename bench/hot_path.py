#!/usr/bin/env python3
"""The instructions a pair executes, from callgrind's per-instruction counts
(docs/benchmarks.md, twenty-sixth session), for a count of what the pair does
besides instructions: its loads and stores (they go through the load-store
units, three a cycle on the machine's Zen cores), and an input for llvm-mca's
throughput model.

    valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \\
      --callgrind-out-file=OUT --toggle-collect=timed BINARY PAIRS ...
    bench/hot_path.py OUT PAIRS [--mca FILE] [--list] FUNCTION...

FUNCTION: the functions (callgrind's names, e.g. ca_entry_malloc, mallocx) whose
instructions count; those executed at least once every two pairs are the pair's
path. A memory operand: a load or a store (`lea` computes an address only).
Each function's object is disassembled with objdump (a shared object at
the address its function's entry was loaded at). --mca writes them, branches,
calls and returns left out, in address order within each function, for
`llvm-mca -mcpu=znver3 FILE` (a model: it reads the path as straight-line code).
--list prints them. Figures only, no verdict."""
import argparse
import collections
import re
import subprocess
import sys

BRANCH = ("j", "call", "ret", "nop", "xchg   %ax,%ax", "cs nop", "data16")


def executed(path, pairs):
    """(object, function) -> {runtime address: executions per pair}."""
    cost = collections.defaultdict(dict)
    obj = fn = None
    skip = False
    for line in open(path):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn="):
            fn = line[3:].strip()
        elif line.startswith("calls="):
            skip = True   # the next cost line is the call's, inclusive
        else:
            m = re.match(r"^(0x[0-9a-f]+) \d+ (\d+)", line)
            if m:
                if skip:
                    skip = False
                    continue
                a = int(m.group(1), 16)
                cost[(obj, fn)][a] = cost[(obj, fn)].get(a, 0) + int(m.group(2)) / pairs
    return cost


def disassembly(obj):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True).stdout
    ins, starts = {}, {}
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.+)>:", line)
        if m:
            starts[m.group(2)] = int(m.group(1), 16)
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m:
            ins[int(m.group(1), 16)] = re.sub(r"<[^>]*>", "", m.group(2).split("#")[0]).strip()
    return ins, starts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("pairs", type=float)
    ap.add_argument("functions", nargs="+")
    ap.add_argument("--mca")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    cost = executed(a.out, a.pairs)
    mca, total = [], collections.Counter()
    for want in a.functions:
        found = [(o, f) for (o, f) in cost if f == want or f.startswith(want + ".") or f.startswith(want + " ")]
        if not found:
            sys.exit(f"hot_path: no function {want} in {a.out}")
        for obj, fn in found:
            ins, starts = disassembly(obj.split(" ")[0])
            hot = sorted(x for x, c in cost[(obj, fn)].items() if c >= 0.5)
            name = fn.split(" ")[0]
            # where the object was loaded: its function's entry, the lowest address run in it
            base = min(cost[(obj, fn)]) - starts[name] if name in starts else 0
            path = [ins.get(x - base, "?") for x in hot]
            body = [i for i in path if not i.startswith(BRANCH)]
            mem = [i for i in body if ("(" in i and not i.startswith("lea")) or i.startswith(("push", "pop"))]
            pushpop = sum(1 for i in body if i.startswith(("push", "pop")))
            print(f"{name}: {len(path)} instructions, {len(body)} not branches, {len(mem)} with a memory "
                  f"operand ({pushpop} pushes and pops)")
            total.update(all=len(path), body=len(body), mem=len(mem))
            if a.list:
                print("\n".join("    " + i for i in path))
            mca += body
    print(f"together: {total['all']} instructions, {total['body']} not branches, {total['mem']} with a memory operand")
    if a.mca:
        open(a.mca, "w").write("\n".join(mca) + "\n")


if __name__ == "__main__":
    main()
