/* The out-of-memory verdict: the decision tree of oom_verdict.h, with the
 * sums that decide each branch written out for the report. */
#include "oom_verdict.h"

#include <stdio.h>

static const char *const names[] = {
    [CA_OOM_EXHAUSTED] = "exhausted", [CA_OOM_CAPPED] = "capped",   [CA_OOM_FRAGMENTED] = "fragmented",
    [CA_OOM_PENDING] = "pending",     [CA_OOM_REFUSED] = "refused",
};

const char *ca_oom_verdict_name(ca_oom_verdict_t v) {
  return (unsigned)v < sizeof names / sizeof *names ? names[v] : "unknown";
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

static uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

#define ARITH(...) snprintf(out->arithmetic, sizeof out->arithmetic, __VA_ARGS__)
#define HINT(...) snprintf(out->hint, sizeof out->hint, __VA_ARGS__)

/* Live memory is what does not fit: the request alone, a step larger than
 * the usual ones, or the steady footprint. */
static void exhausted(const ca_oom_figures_t *f, uint64_t live_after, uint64_t room, ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_EXHAUSTED;
  uint64_t may = f->limit < room ? f->limit : room;
  char others[96] = "";
  if (f->others) snprintf(others, sizeof others, "; device %.1f MiB - other processes %.1f MiB = %.1f MiB",
                          mib(f->total), mib(f->others), mib(room));
  ARITH("allocated %.1f MiB + request %.1f MiB = %.1f MiB > %.1f MiB this process may hold (%s %.1f MiB%s)",
        mib(f->allocated), mib(f->rounded), mib(live_after), mib(may), f->cap_set ? "cap" : "device",
        mib(f->limit), others);
  double ratio = f->usual_peak ? (double)live_after / (double)f->usual_peak : 0;
  if (f->rounded > may)
    HINT("the request alone (%.1f MiB) is larger than all this process may hold: split it, or use a larger device",
         mib(f->rounded));
  else if (ratio >= 1.25)
    HINT("this step's live memory (%.1f MiB with the request) is %.1fx the usual peak (%.1f MiB, median of the last "
         "%u steps): one abnormal batch; bound or bucket the input sizes",
         mib(live_after), ratio, mib(f->usual_peak), f->usual_steps);
  else
    HINT("live memory itself does not fit: free what is no longer needed (the live call sites below hold it), or "
         "lower the batch size or use activation checkpointing");
}

static void capped(const ca_oom_figures_t *f, uint64_t live_after, uint64_t room, ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_CAPPED;
  ARITH("allocated %.1f MiB + request %.1f MiB = %.1f MiB > cap %.1f MiB, while the device has room for it: "
        "total %.1f MiB - other processes %.1f MiB = %.1f MiB",
        mib(f->allocated), mib(f->rounded), mib(live_after), mib(f->limit), mib(f->total), mib(f->others),
        mib(room));
  HINT("the cap is the limit: raise memory_cap_mb to at least %llu (or memory_fraction to %.2f), or lower live memory",
       (unsigned long long)((live_after + (1 << 20) - 1) >> 20),
       f->total ? (double)live_after / (double)f->total + 0.005 : 1.0);
}

static void refused_by_others(const ca_oom_figures_t *f, uint64_t live_after, uint64_t room, ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_REFUSED;
  ARITH("allocated %.1f MiB + request %.1f MiB = %.1f MiB fits the limit %.1f MiB, but %u other %s "
        "%.1f MiB: total %.1f MiB - %.1f MiB = %.1f MiB < %.1f MiB",
        mib(f->allocated), mib(f->rounded), mib(live_after), mib(f->limit), f->nothers,
        f->nothers == 1 ? "process holds" : "processes hold",
        mib(f->others), mib(f->total), mib(f->others), mib(room), mib(live_after));
  HINT("other processes hold %.1f MiB of this device (listed below, as nvidia-smi shows them): stop them, give each "
       "job its own device, or share it knowingly with memory_fraction",
       mib(f->others));
}

static void pending(const ca_oom_figures_t *f, uint64_t idle, uint64_t headroom, ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_PENDING;
  ARITH("idle cached %.1f MiB + headroom %.1f MiB = %.1f MiB < request %.1f MiB <= that + pending %.1f MiB = %.1f MiB",
        mib(idle), mib(headroom), mib(idle + headroom), mib(f->rounded), mib(f->pending),
        mib(idle + headroom + f->pending));
  if (f->capture)
    HINT("a graph capture forbids waiting for the freed memory: allocate what the capture needs before it begins, or "
         "synchronize before capturing");
  else
    HINT("the device work that uses the freed memory did not complete (a wait failed): synchronize its stream before "
         "allocating, and check for a failed kernel");
}

static void fragmented(const ca_oom_figures_t *f, uint64_t idle, uint64_t headroom, bool address_space,
                       ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_FRAGMENTED;
  if (address_space) {
    ARITH("headroom %.1f MiB >= growth %.1f MiB, but the largest range the address space can place is %.1f MiB < "
          "request %.1f MiB",
          mib(headroom), mib(f->grow_bytes), mib(f->va_room), mib(f->rounded));
    HINT("live blocks cut the pool's address range into pieces: free or allocate long-lived blocks first, or call "
         "cudalloc_empty_cache() between phases");
    return;
  }
  ARITH("idle cached %.1f MiB + headroom %.1f MiB = %.1f MiB >= request %.1f MiB, but the largest free block is "
        "%.1f MiB and a new %s of %.1f MiB exceeds the headroom",
        mib(idle), mib(headroom), mib(idle + headroom), mib(f->rounded), mib(f->largest_free),
        f->expandable ? "mapping" : "segment", mib(f->grow_bytes));
  if (f->expandable)
    HINT("cached memory is scattered: call cudalloc_empty_cache() between phases, or set roundup_power2_divisions "
         "so that sizes repeat");
  else
    HINT("set expandable_segments:true: cudalloc then remaps cached pages into one range (classic segments cannot "
         "merge)");
}

static void refused_by_driver(const ca_oom_figures_t *f, uint64_t headroom, ca_oom_diagnosis_t *out) {
  out->verdict = CA_OOM_REFUSED;
  if (f->driver_free_known && f->driver_free < f->grow_bytes) {
    ARITH("growth %.1f MiB <= headroom %.1f MiB (limit %.1f MiB - reserved %.1f MiB), but the driver has only "
          "%.1f MiB free",
          mib(f->grow_bytes), mib(headroom), mib(f->limit), mib(f->reserved), mib(f->driver_free));
    HINT("%.1f MiB of the device are held outside cudalloc's accounting (another process%s, or memory the program "
         "got around cudalloc): find who with nvidia-smi",
         mib(sub0(f->total, f->reserved + f->driver_free)), f->others_known ? " NVML does not list" : "");
    return;
  }
  char free_text[48];
  if (f->driver_free_known) snprintf(free_text, sizeof free_text, "%.1f MiB", mib(f->driver_free));
  else snprintf(free_text, sizeof free_text, "unknown (cuMemGetInfo failed)");
  ARITH("growth %.1f MiB <= headroom %.1f MiB (limit %.1f MiB - reserved %.1f MiB), driver free %s, yet the driver "
        "failed with error %d",
        mib(f->grow_bytes), mib(headroom), mib(f->limit), mib(f->reserved), free_text, f->driver_error);
  HINT("the driver failed with memory to spare: check nvidia-smi and the kernel log (Xid errors) for a faulty "
       "device, then retry the allocation");
}

void ca_oom_decide(const ca_oom_figures_t *f, ca_oom_diagnosis_t *out) {
  uint64_t live_after = f->allocated + f->rounded;
  uint64_t room = sub0(f->total, f->others);
  if (live_after > f->limit) {
    if (f->cap_set && live_after <= room) capped(f, live_after, room, out);
    else exhausted(f, live_after, room, out);
    return;
  }
  if (live_after > room) {
    refused_by_others(f, live_after, room, out);
    return;
  }
  uint64_t idle = sub0(f->reserved, f->allocated + f->pending);
  uint64_t headroom = sub0(f->limit, f->reserved);
  if (f->pending && idle + headroom < f->rounded) pending(f, idle, headroom, out);
  else if (f->grow_bytes > headroom) fragmented(f, idle, headroom, false, out);
  else if (f->expandable && f->va_room < f->rounded) fragmented(f, idle, headroom, true, out);
  else refused_by_driver(f, headroom, out);
}
