#!/usr/bin/env python3
"""A model of the front cache's large classes (alloc/tcache.c) on bench_alloc's
GPU-like sequence, for the choice docs/design.md explains: round every
cacheable request up to its class top, or let a hit take a block of its class
that holds the request, or any block of the next class.

    python3 bench/tcache_large_model.py        # about a minute

It replays bench.h's sequence (bench_sizes(65536, 512, 8 MiB, seed 1),
splitmix64 and all) with a window of 16 live blocks; a freed block enters the
cache while it fits under its cap (1 MiB for blocks <= 64 KiB, the large cap
above), a request takes a cached block as the policy says, else the core
serves it. No core is modelled: no slow path flushes the cache, so the hit
rates are an upper bound of what the allocator sees (docs/benchmarks.md, "A
front cache for GPU-like sizes", has the measured ones). Printed per large
cap: the hits among all requests and among those above 64 KiB, after one pass
of warm-up."""
import math
from collections import defaultdict

M = (1 << 64) - 1
SMALL, LARGE = 64 << 10, 8 << 20
PER_OCTAVE = 8


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return state, z ^ (z >> 31)


def bench_sizes(n, lo, hi, seed):
    a, b, out = math.log(lo), math.log(hi + 1.0), []
    for _ in range(n):
        seed, r = splitmix(seed)
        v = math.exp(a + (r >> 11) / 9007199254740992.0 * (b - a))
        out.append(lo if v < lo else hi if v > hi else int(v))
    return out


def round512(s):
    return max(512, (s + 511) & ~511)


def class_of(s):
    """tcache.c's classes: one per 512 B to 64 KiB, then an eighth of an octave."""
    if s <= SMALL:
        return s // 512
    k = (s - 1).bit_length() - 1
    return 1000 + (k - 16) * PER_OCTAVE + (((s - 1) >> (k - 3)) & 7)


def class_top(s):
    k = (s - 1).bit_length() - 1
    step = (1 << k) // PER_OCTAVE
    return (1 << k) + ((s - 1 - (1 << k)) // step + 1) * step


def run(sizes, cap, rounding, passes=3):
    cache, held, window = defaultdict(list), [0, 0], [None] * 16
    hits = total = large_hits = large_total = 0
    for i in range(len(sizes) * passes):
        slot = i % 16
        b = window[slot]
        if b and b <= LARGE:
            kind = b > SMALL
            if held[kind] + b <= (cap if kind else 1 << 20):
                cache[class_of(b)].append(b)
                held[kind] += b
        r = round512(sizes[i % len(sizes)])
        if rounding and SMALL < r <= LARGE:
            r = class_top(r)
        got = None
        if r <= LARGE:
            classes = [class_of(r)] if r <= SMALL or rounding else [class_of(r), class_of(r) + 1]
            for c in classes:
                blocks = cache[c]
                for j in range(len(blocks) - 1, max(-1, len(blocks) - 5), -1):   # the last 4, as CA_TCACHE_SITE_LOOK
                    if blocks[j] >= r:
                        got = blocks.pop(j)
                        break
                if got:
                    break
        if i >= len(sizes):
            total += 1
            large_total += r > SMALL
            hits += got is not None
            large_hits += got is not None and r > SMALL
        if got:
            held[got > SMALL] -= got
        window[slot] = got or r
    return hits / total, large_hits / large_total


if __name__ == "__main__":
    sizes = bench_sizes(65536, 512, LARGE, 1)
    print("large cap | rounded to the class top: all, large | next class, no rounding: all, large")
    for mib in (8, 16, 32):
        a = run(sizes, mib << 20, True)
        b = run(sizes, mib << 20, False)
        print(f"{mib} MiB | {a[0]:.0%}, {a[1]:.0%} | {b[0]:.0%}, {b[1]:.0%}")
