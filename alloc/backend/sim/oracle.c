/* Device work that touches memory, and the reuse oracle that watches it.
 *
 * A touch (ca_sim_touch) says "work on stream S reads or writes [p, p+n)
 * now": a kernel, a copy or a fill. It is a piece of work on S like any
 * other (streams.c), pending until S completes up to it, and while it is
 * pending the oracle knows that the device may still use those bytes.
 *
 * Pinned host memory (host.c) is watched as device memory is: an async
 * copy from or to it is a touch, and the pinned cache's hand-outs are
 * checked too.
 *
 * The oracle is asked at every block the allocator hands out
 * (check_handout) and at every map, unmap and release: a block handed out
 * for any stream (cudaMalloc, cuMemAlloc, pitch, 3D) may overlap no pending
 * touch; a block handed out for stream S may overlap only touches that are
 * sure to complete before new work on S starts (issued earlier on S, on
 * what S waits for by the legacy stream's rules, or through an event S
 * waits for). The host copies and fills of the simulated runtime ask it
 * too (ca_sim_host_access). Each violation is counted, kept (the first
 * few) and printed with both call sites: where the block was handed out
 * and where the work that still touches it was issued.
 *
 * Violations are the process's record: they survive ca_sim_shutdown, so a
 * test can look at them after the allocator has shut down. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define ORACLE_KEPT 8          /* reports kept for ca_sim_oracle_report */
#define ORACLE_PRINTED 32      /* reports printed on stderr, then a last line */
#define ORACLE_TEXT 640

static uint64_t violations;    /* atomic */
static char kept[ORACLE_KEPT][ORACLE_TEXT];

// ----------------------------------------------------------------------------
// Reports
// ----------------------------------------------------------------------------

/* "symbol+0x1c" when the site's object exports it, else "object+0x1c" (an
 * offset addr2line takes), else the address. */
static void site_name(void *site, char *buf, size_t cap) {
  Dl_info info;
  if (!site) snprintf(buf, cap, "an unknown site");
  else if (dladdr(site, &info) && info.dli_sname)
    snprintf(buf, cap, "%s+%#lx", info.dli_sname, (unsigned long)((char *)site - (char *)info.dli_saddr));
  else if (dladdr(site, &info) && info.dli_fname) {
    const char *base = strrchr(info.dli_fname, '/');
    snprintf(buf, cap, "%s+%#lx", base ? base + 1 : info.dli_fname,
             (unsigned long)((char *)site - (char *)info.dli_fbase));
  } else snprintf(buf, cap, "%p", site);
}

static void stream_name(const sim_stream_t *s, char *buf, size_t cap) {
  if (s->kind == SIM_STREAM_LEGACY) snprintf(buf, cap, "the legacy stream of device %d", s->dev);
  else if (s->kind == SIM_STREAM_PER_THREAD) snprintf(buf, cap, "a per-thread stream of device %d", s->dev);
  else snprintf(buf, cap, "stream %#llx", (unsigned long long)s->id);
}

/* Counts one violation: what (a sentence with its own site) met touch t. */
static void report(const char *what, const sim_touch_t *t) {
  char site[160], text[ORACLE_TEXT];
  site_name(t->site, site, sizeof site);
  snprintf(text, sizeof text, "%s overlaps a pending %s of [%#lx, +%zu) issued at %s on %s", what,
           t->write ? "write" : "read", (unsigned long)t->va, t->size, site, t->stream_name);
  uint64_t n = __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
  if (n < ORACLE_KEPT) snprintf(kept[n], sizeof kept[n], "%s", text);
  if (n < ORACLE_PRINTED) ca_log("reuse oracle: %s", text);
  else if (n == ORACLE_PRINTED) ca_log("reuse oracle: further violations are counted, not printed");
}

static bool overlaps(const sim_touch_t *t, uintptr_t va, size_t size) {
  return t->va < va + size && va < t->va + t->size;
}

static const sim_touch_t *first_overlap(uintptr_t va, size_t size, bool writes_only) {
  for (const sim_touch_t *t = ca_sim.touches; t; t = t->next)
    if (overlaps(t, va, size) && (t->write || !writes_only)) return t;
  return NULL;
}

/* The lock, without counting a broken rule when the device is down: the
 * oracle is an observer, and says nothing then. */
static bool lock_if_started(void) {
  pthread_mutex_lock(&ca_sim.lock);
  if (ca_sim.started) return true;
  pthread_mutex_unlock(&ca_sim.lock);
  return false;
}

// ----------------------------------------------------------------------------
// Touches
// ----------------------------------------------------------------------------

static void touch_free(sim_touch_t *t) {
  free(t->handles);
  free(t);
}

void ca_sim_touch_done_locked(sim_touch_t *t) {
  if (t->prev) t->prev->next = t->next;
  else ca_sim.touches = t->next;
  if (t->next) t->next->prev = t->prev;
  __atomic_sub_fetch(&ca_sim.ntouches, 1, __ATOMIC_RELEASE);
  touch_free(t);
}

#define TOUCH_MAX_HANDLES 64   /* remembered for the release check */

static sim_touch_t *touch_new(const sim_stream_t *s, uintptr_t va, size_t n, bool write, void *site) {
  sim_touch_t *t = calloc(1, sizeof *t);
  uint64_t under[TOUCH_MAX_HANDLES];
  if (!t) return NULL;
  *t = (sim_touch_t){.va = va, .size = n, .write = write, .site = site};
  stream_name(s, t->stream_name, sizeof t->stream_name);
  t->nhandles = ca_sim_handles_under_locked(va, n, under, TOUCH_MAX_HANDLES);
  if (t->nhandles && !(t->handles = malloc(t->nhandles * sizeof *t->handles))) {
    free(t);
    return NULL;
  }
  if (t->nhandles) memcpy(t->handles, under, t->nhandles * sizeof *t->handles);
  return t;
}

static CUresult touch_locked(ca_stream_t stream, uintptr_t va, size_t n, bool write, void *site) {
  sim_stream_t *s;
  bool mapped;
  CUresult rc = ca_sim_stream_resolve_locked(stream, &s, false);
  if (rc != CUDA_SUCCESS) return rc;
  if (n > UINTPTR_MAX - va) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (n == 0) return CUDA_SUCCESS;
  /* outside every reservation and every pinned allocation: pageable host
   * memory, which no reuse by cudalloc can hit; pinned memory is watched
   * like device memory (the pinned cache hands it out again) */
  if (!ca_sim_device_range_locked(va, n, &mapped)) {
    if (!ca_sim_host_range_locked(va, n)) return CUDA_SUCCESS;
  } else if (!mapped) {
    return ca_sim_violation(CUDA_ERROR_ILLEGAL_ADDRESS); /* the kernel would fault */
  }
  /* complete at once, or captured into a graph rather than run */
  if (ca_sim.event_mode == CA_SIM_EVENTS_AUTO || s->capturing) return CUDA_SUCCESS;
  sim_touch_t *t = touch_new(s, va, n, write, site);
  if (!t || ca_sim_work_push_touch_locked(s, t) != CUDA_SUCCESS) {
    if (t) touch_free(t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  t->next = ca_sim.touches;
  if (t->next) t->next->prev = t;
  ca_sim.touches = t;
  __atomic_add_fetch(&ca_sim.ntouches, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

CUresult ca_sim_touch_at(ca_stream_t stream, const void *ptr, size_t n, int write, void *site) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  rc = touch_locked(stream, (uintptr_t)ptr, n, write != 0, site);
  ca_sim_lag_tick_locked(); /* a launch is a call of the device */
  ca_sim_unlock();
  return rc;
}

CUresult ca_sim_touch(ca_stream_t stream, const void *ptr, size_t n, int write) {
  return ca_sim_touch_at(stream, ptr, n, write, __builtin_return_address(0));
}

unsigned ca_sim_pending_touches(void) {
  unsigned n = 0;
  if (!lock_if_started()) return 0;
  for (const sim_touch_t *t = ca_sim.touches; t; t = t->next) n++;
  ca_sim_unlock();
  return n;
}

// ----------------------------------------------------------------------------
// The checks
// ----------------------------------------------------------------------------

/* Every pending touch against one hand-out (apart from the test below, so
 * that a hand-out with nothing pending saves no registers for it). */
static __attribute__((noinline)) void check_pending(uintptr_t va, size_t size, ca_stream_t stream,
                                                    bool stream_ordered, void *site) {
  if (!lock_if_started()) return;
  sim_stream_t *s = NULL;
  /* a handle the device does not know orders nothing */
  if (stream_ordered && ca_sim_stream_resolve_locked(stream, &s, true) != CUDA_SUCCESS) s = NULL;
  for (const sim_touch_t *t = ca_sim.touches; t; t = t->next) {
    if (!overlaps(t, va, size) || (s && ca_sim_work_ordered_before_locked(t->work, s))) continue;
    char at[160], on[64], what[320];
    site_name(site, at, sizeof at);
    if (s) stream_name(s, on, sizeof on);
    snprintf(what, sizeof what, "the block [%#lx, +%zu) handed out at %s for %s", (unsigned long)va, size,
             at, s ? on : "any stream (not stream-ordered)");
    report(what, t);
    break; /* one violation per hand-out */
  }
  ca_sim_unlock();
}

void ca_sim_check_handout(uintptr_t va, size_t size, ca_stream_t stream, bool stream_ordered, void *site) {
  /* Nothing pending (always so with sim_events:auto, the benchmarks'
   * mode): nothing to check, and no lock taken on the allocation path. A
   * touch another thread issues at this very moment is not ordered before
   * this hand-out either way. The table's handout_pending is this count:
   * the core makes the call only while it is not 0. */
  if (size && __atomic_load_n(&ca_sim.ntouches, __ATOMIC_ACQUIRE))
    check_pending(va, size, stream, stream_ordered, site);
}

void ca_sim_host_access(const void *ptr, size_t n, int write, void *site) {
  if (!n || !lock_if_started()) return;
  const sim_touch_t *t = first_overlap((uintptr_t)ptr, n, !write);
  if (t) {
    char at[160], what[320];
    site_name(site, at, sizeof at);
    snprintf(what, sizeof what, "a host %s of [%p, +%zu) at %s", write ? "write" : "read", ptr, n, at);
    report(what, t);
  }
  ca_sim_unlock();
}

void ca_sim_oracle_pages_locked(const char *op, uintptr_t va, size_t size) {
  const sim_touch_t *t = first_overlap(va, size, false);
  if (!t) return;
  char what[160];
  snprintf(what, sizeof what, "a %s of [%#lx, +%zu)", op, (unsigned long)va, size);
  report(what, t);
}

void ca_sim_oracle_release_locked(uint64_t handle) {
  for (const sim_touch_t *t = ca_sim.touches; t; t = t->next)
    for (unsigned i = 0; i < t->nhandles; i++)
      if (t->handles[i] == handle) {
        char what[96];
        snprintf(what, sizeof what, "the release of handle %#llx", (unsigned long long)handle);
        report(what, t);
        return;
      }
}

// ----------------------------------------------------------------------------
// The record
// ----------------------------------------------------------------------------

uint64_t ca_sim_oracle_violations(void) { return __atomic_load_n(&violations, __ATOMIC_RELAXED); }

const char *ca_sim_oracle_report(unsigned i) {
  return i < ORACLE_KEPT && i < ca_sim_oracle_violations() ? kept[i] : NULL;
}

void ca_sim_oracle_reset(void) {
  __atomic_store_n(&violations, 0, __ATOMIC_RELAXED);
  memset(kept, 0, sizeof kept);
}
