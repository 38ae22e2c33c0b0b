#!/usr/bin/env python3
"""PyTorch on a GPU, with and without cudalloc (bench/gpu-check.sh, section torch).

  torch_check.py run MODE [--steps 50] [--lib build/libcudalloc.so] [--out FILE.json]
      one mode in this process; the caller sets the environment that `env MODE` prints
  torch_check.py env MODE [--lib build/libcudalloc.so]
      the environment of a mode, as NAME=value words for env(1)
  torch_check.py table FILE.json...
      the results of several modes side by side (markdown)
  torch_check.py plan
      what `run` would do, without importing torch (the dry run)

MODE:
  native      PyTorch's caching allocator
  expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  pluggable   cudalloc through torch.cuda.memory.CUDAPluggableAllocator
  preload     cudalloc preloaded, PyTorch's cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1)

`run` trains a small multimodal model (image patches, audio frames and text
tokens concatenated into one sequence through a transformer) on batches whose
size and lengths change every step, for --steps steps, then checks:
  record_stream  a block used on a side stream and freed on the main one after
                 record_stream() is not reused before the side stream is done
                 (in native mode also the control: without record_stream the
                 block IS reused, so the check can fail)
  huge_alloc     a 1 TiB tensor fails with an out-of-memory error, and the
                 allocator still works after it
  graph          a CUDA graph captured and replayed gives the eager results
It prints one line per figure and check, writes them to --out as JSON, and
exits 0 when every check passed, 1 when one failed, 2 when it could not run.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import sys
import time

MODES = ("native", "expandable", "pluggable", "preload")
WARMUP = 10
MIB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mode_env(mode, lib):
    lib = os.path.abspath(lib)
    return {
        "native": {},
        "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        "pluggable": {},
        "preload": {"LD_PRELOAD": lib, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    }[mode]


def env_problem(mode, lib):
    """What in this process's environment contradicts the mode, or None."""
    for name, value in mode_env(mode, lib).items():
        if value not in os.environ.get(name, ""):
            return f"mode {mode} needs {name}={value} in the environment (see `torch_check.py env {mode}`)"
    if mode != "preload" and "libcudalloc" in os.environ.get("LD_PRELOAD", ""):
        return f"mode {mode} must run without cudalloc preloaded"
    if mode in ("pluggable", "preload") and not os.path.exists(lib):
        return f"{lib} is not built"
    return None


# -----------------------------------------------------------------------------
# cudalloc's statistics (cudalloc_get_stats), laid out from the public header
# -----------------------------------------------------------------------------

def stats_fields(header=os.path.join(ROOT, "alloc", "include", "cudalloc.h")):
    """The statistics' names in struct order: the X-macro lists of cudalloc.h."""
    text = open(header).read()
    names = []
    for macro in ("CUDALLOC_STAT_BYTES", "CUDALLOC_STAT_COUNTS"):
        body = re.search(r"#define %s\(X\)(.*?)\n\s*\n" % macro, text, re.S)
        if not body:
            raise RuntimeError(f"{header}: no {macro} list")
        names += re.findall(r"X\((\w+),", body.group(1))
    return names


def cudalloc_stats(lib):
    """A function returning cudalloc's device-0 statistics as a dict, or None."""
    class Stat(ctypes.Structure):
        _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64), ("total", ctypes.c_int64)]

    class Stats(ctypes.Structure):
        _fields_ = [(name, Stat) for name in stats_fields()]

    try:
        handle = ctypes.CDLL(lib) if lib else ctypes.CDLL(None)
        get = handle.cudalloc_get_stats
    except (OSError, AttributeError):
        return None
    get.argtypes = [ctypes.c_int, ctypes.POINTER(Stats)]

    def read():
        s = Stats()
        if get(0, ctypes.byref(s)) != 0:
            return None
        return {name: (getattr(s, name).current, getattr(s, name).peak) for name, _ in Stats._fields_}
    return read


# -----------------------------------------------------------------------------
# The driver's view: NVML, else cudaMemGetInfo
# -----------------------------------------------------------------------------

class Nvml:
    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit_v2 failed")
        self.dev = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.dev)) != 0:
            raise OSError("nvmlDeviceGetHandleByIndex_v2 failed")

    def used(self):
        m = Nvml.Memory()
        self.lib.nvmlDeviceGetMemoryInfo(self.dev, ctypes.byref(m))
        return m.used


def driver_view(torch, mode):
    """(name, function returning the device's used bytes)."""
    try:
        nvml = Nvml()
        return "NVML used memory", nvml.used
    except OSError:
        pass

    def used():
        free, total = torch.cuda.mem_get_info()
        return total - free
    return ("cudaMemGetInfo (answered by cudalloc)" if mode == "preload" else "cudaMemGetInfo"), used


# -----------------------------------------------------------------------------
# The model and its variable batches
# -----------------------------------------------------------------------------

def make_model(torch, d=256, heads=4, layers=2, vocab=1024, patch=16 * 16 * 3, mel=64):
    nn = torch.nn

    class Multimodal(nn.Module):
        def __init__(self):
            super().__init__()
            self.image = nn.Linear(patch, d)
            self.audio = nn.Linear(mel, d)
            self.text = nn.Embedding(vocab, d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, image, audio, text):
            x = torch.cat([self.image(image), self.audio(audio), self.text(text)], dim=1)
            return self.head(self.encoder(x)[:, -text.shape[1]:])

    return Multimodal().cuda(), vocab, patch, mel


def batch(torch, gen, vocab, patch, mel):
    """Sizes drawn each step: 1..16 samples, 16..64 patches, 16..128 audio frames, 8..64 tokens."""
    r = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=gen))
    b, p, a, t = r(1, 16), r(16, 64), r(16, 128), r(8, 64)
    image = torch.randn(b, p, patch, generator=gen).cuda()
    audio = torch.randn(b, a, mel, generator=gen).cuda()
    text = torch.randint(0, vocab, (b, t), generator=gen).cuda()
    target = torch.randint(0, vocab, (b, t), generator=gen).cuda()
    return image, audio, text, target


def train(torch, steps, sample):
    model, vocab, patch, mel = make_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    times, losses, driver_peak = [], [], 0
    for _ in range(steps):
        image, audio, text, target = batch(torch, gen, vocab, patch, mel)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(image, audio, text)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
        driver_peak = max(driver_peak, sample())
        del image, audio, text, target, logits, loss
    del model, opt
    return times, losses, driver_peak


# -----------------------------------------------------------------------------
# Checks
# -----------------------------------------------------------------------------

def record_stream_check(torch, use_record_stream=True):
    """True when the side stream read what was written before the free."""
    n = 4 << 20
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    x = torch.full((n,), 1.0, device="cuda")
    side.wait_stream(main)
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)   # ~0.1 s of spinning before the read
        y = x * 2
    if use_record_stream:
        x.record_stream(side)
    del x
    z = torch.full((n,), 7.0, device="cuda")   # on main: may take x's block
    torch.cuda.synchronize()
    intact = bool((y == 2).all())
    del y, z
    return intact


def huge_alloc_check(torch):
    try:
        t = torch.empty(1 << 40, dtype=torch.uint8, device="cuda")
        del t
        return False, "a 1 TiB tensor was allocated"
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        after = torch.ones(1 << 20, device="cuda").sum().item()
        return after == float(1 << 20), f"{type(e).__name__}: {first[:160]}; a 4 MiB tensor after it works"


def graph_check(torch):
    with torch.no_grad():
        lin = torch.nn.Linear(256, 256).cuda()
        static_in = torch.randn(64, 256, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                torch.relu(lin(static_in))
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = torch.relu(lin(static_in)) * 2
        worst = 0.0
        for _ in range(3):
            static_in.copy_(torch.randn(64, 256, device="cuda"))
            g.replay()
            torch.cuda.synchronize()
            worst = max(worst, float((static_out - torch.relu(lin(static_in)) * 2).abs().max()))
        return worst < 1e-4, f"3 replays, largest difference from eager {worst:.2e}"


def guarded(name, fn, checks):
    try:
        ok, detail = fn()
    except Exception as e:   # a check that raises has failed; say how
        ok, detail = False, f"raised {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    checks[name] = {"ok": bool(ok), "detail": detail}
    print(f"torch_check: check {name}: {'ok' if ok else 'FAIL'}: {detail}", flush=True)


# -----------------------------------------------------------------------------
# Commands
# -----------------------------------------------------------------------------

def allocator_peaks(torch, mode, stats):
    """(source, peak allocated, peak reserved) as the allocator in use counts them."""
    if stats:
        s = stats()
        if s:
            return "cudalloc_get_stats", s["allocated_bytes"][1], s["reserved_bytes"][1]
    return "torch.cuda.max_memory_*", torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()


def cmd_run(args):
    problem = env_problem(args.mode, args.lib)
    if problem:
        print(f"torch_check: {problem}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"torch_check: PyTorch is not installed ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_check: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    driver_name, used = driver_view(torch, args.mode)
    before = used()   # no CUDA context of ours yet when it is NVML
    stats = None
    if args.mode == "pluggable":
        allocator = torch.cuda.memory.CUDAPluggableAllocator(
            os.path.abspath(args.lib), "cudalloc_torch_malloc", "cudalloc_torch_free")
        torch.cuda.memory.change_current_allocator(allocator)
        stats = cudalloc_stats(os.path.abspath(args.lib))
    elif args.mode == "preload":
        stats = cudalloc_stats(None)
    times, losses, driver_peak = train(torch, args.steps, used)
    source, peak_alloc, peak_reserved = allocator_peaks(torch, args.mode, stats)
    after = times[WARMUP:] or times
    result = {
        "mode": args.mode, "torch": torch.__version__, "steps": args.steps,
        "ms_median": statistics.median(after), "ms_mean": statistics.fmean(times),
        "loss_first": losses[0], "loss_last": losses[-1],
        "peak_allocated_mib": peak_alloc / MIB, "peak_reserved_mib": peak_reserved / MIB, "peaks_from": source,
        "driver_peak_mib": (driver_peak - before) / MIB, "driver_from": driver_name, "checks": {},
    }
    print(f"torch_check: {args.mode}: torch {torch.__version__}, {args.steps} steps, median "
          f"{result['ms_median']:.2f} ms/step after {WARMUP}, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    print(f"torch_check: {args.mode}: peak allocated {result['peak_allocated_mib']:.1f} MiB, peak reserved "
          f"{result['peak_reserved_mib']:.1f} MiB ({source}); device memory used at step ends, at most "
          f"{result['driver_peak_mib']:.1f} MiB above the start ({driver_name})", flush=True)
    checks = result["checks"]
    guarded("record_stream", lambda: (record_stream_check(torch), "the side stream read the values written "
                                      "before the free"), checks)
    if args.mode == "native":
        guarded("record_stream_control", lambda: (not record_stream_check(torch, use_record_stream=False),
                "without record_stream the block is reused at once (so the check above can fail)"), checks)
    guarded("huge_alloc", lambda: huge_alloc_check(torch), checks)
    guarded("graph", lambda: graph_check(torch), checks)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    failed = [name for name, c in checks.items() if not c["ok"]]
    print(f"torch_check: {args.mode}: " + (f"FAILED: {', '.join(failed)}" if failed else "ok"))
    return 1 if failed else 0


def cmd_env(args):
    print(" ".join(f"{k}={v}" for k, v in mode_env(args.mode, args.lib).items()))
    return 0


def cmd_table(args):
    rows = []
    for path in args.files:
        try:
            rows.append(json.load(open(path)))
        except (OSError, ValueError) as e:
            print(f"torch_check: {path}: {e}")
    if not rows:
        print("torch_check: no results")
        return 1
    print("| mode | ms/step (median after warm-up) | peak allocated MiB | peak reserved MiB (from) "
          "| device used MiB (from) | checks |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        checks = ", ".join(f"{k} {'ok' if c['ok'] else '**FAIL**'}" for k, c in r["checks"].items())
        print(f"| {r['mode']} | {r['ms_median']:.2f} | {r['peak_allocated_mib']:.1f} | "
              f"{r['peak_reserved_mib']:.1f} ({r['peaks_from']}) | {r['driver_peak_mib']:.1f} ({r['driver_from']}) "
              f"| {checks} |")
    by = {r["mode"]: r for r in rows}
    for ours in ("pluggable", "preload"):
        for theirs in ("native", "expandable"):
            if ours in by and theirs in by:
                a, b = by[ours], by[theirs]
                print(f"\n{ours} / {theirs}: step time {a['ms_median'] / b['ms_median']:.2f}, device memory used "
                      f"{a['driver_peak_mib'] / max(b['driver_peak_mib'], 1e-9):.2f} (design: <= 1.0 for both)")
    return 0


def cmd_plan(args):
    fields = stats_fields()
    lib = os.path.join(ROOT, "build", "libcudalloc.so")
    print(f"torch_check: plan: {len(fields)} statistics in cudalloc.h "
          f"(allocated_bytes at {fields.index('allocated_bytes')}, reserved_bytes at {fields.index('reserved_bytes')})")
    for mode in MODES:
        env = " ".join(f"{k}={v}" for k, v in mode_env(mode, lib).items()) or "(no variable)"
        print(f"torch_check: plan: {mode}: {env} python3 bench/gpu/torch_check.py run {mode} --steps {args.steps}")
    print("torch_check: plan: checks record_stream (+ control in native), huge_alloc, graph")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("mode", choices=MODES)
    r.add_argument("--steps", type=int, default=50)
    r.add_argument("--lib", default=os.path.join(ROOT, "build", "libcudalloc.so"))
    r.add_argument("--out")
    e = sub.add_parser("env")
    e.add_argument("mode", choices=MODES)
    e.add_argument("--lib", default=os.path.join(ROOT, "build", "libcudalloc.so"))
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    pl = sub.add_parser("plan")
    pl.add_argument("--steps", type=int, default=50)
    args = p.parse_args(argv)
    if getattr(args, "steps", 1) < 1:
        p.error("--steps wants a number >= 1")
    if args.cmd == "run" and args.steps <= WARMUP:
        p.error(f"--steps must exceed the {WARMUP} warm-up steps")
    return {"run": cmd_run, "env": cmd_env, "table": cmd_table, "plan": cmd_plan}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
