/* The replay (replay.h). */
#include "replay.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addr_map.h"
#include "backend_sim.h"
#include "core.h"

#define MiB (1ull << 20)
#define PAGE (2 * MiB)   /* the simulated device's default granularity */

typedef struct {
  const ca_replay_opts_t *o;
  ca_replay_result_t *r;
  ca_addr_map_t blocks;    /* trace address -> cudalloc pointer */
  ca_addr_map_t streams;   /* trace stream -> simulated stream */
} run_t;

static int start(const ca_replay_opts_t *o, char *err, size_t cap) {
  char conf[512];
  /* manual events: work completes when the trace says so; track:off: no call sites to keep;
   * oom_report:off: a replay's out-of-memory failures are its result, not files to leave behind;
   * thread_cache_kb:0: the replay's peaks are the trace's (a front cache's blocks count as
   * allocated in the peaks, and it answers what the allocator core does) */
  snprintf(conf, sizeof conf,
           "backend:sim,sim_events:manual,sim_devices:1,sim_capacity_mb:%llu,expandable_segments:%s,quiet:true,"
           "track:off,oom_report:off,thread_cache_kb:0%s",
           (unsigned long long)(o->capacity / MiB), o->expandable ? "true" : "false", o->conf ? o->conf : "");
  if (cudalloc_init(conf) != cudaSuccess) {
    snprintf(err, cap, "cudalloc did not start on the simulated device (%s)", conf);
    return -1;
  }
  ca_sim_thread_init();
  return 0;
}

/* The simulated stream that plays the trace's stream id. */
static ca_stream_t stream_of(run_t *run, uint64_t id) {
  uint64_t s;
  if (ca_addr_map_get(&run->streams, id, &s)) return (ca_stream_t)(uintptr_t)s;
  ca_stream_t made = NULL;
  if (ca_sim_stream_create(&made, 1) != CUDA_SUCCESS || ca_stream_created(made, true) != CUDA_SUCCESS ||
      !ca_addr_map_put(&run->streams, id, (uint64_t)(uintptr_t)made))
    return NULL;
  return made;
}

static void on_alloc(run_t *run, const ca_trace_event_t *e) {
  void *p = NULL;
  ca_stream_t s = stream_of(run, e->stream);
  CUresult rc = s ? ca_malloc_on(0, &p, e->size, s, CA_ALLOC_ASYNC, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
  if (rc != CUDA_SUCCESS || !ca_addr_map_put(&run->blocks, e->addr, (uint64_t)(uintptr_t)p)) {
    run->r->ooms++;
    return;
  }
  run->r->allocs++;
}

static void on_free(run_t *run, const ca_trace_event_t *e) {
  uint64_t p;
  if (!ca_addr_map_get(&run->blocks, e->addr, &p)) {
    run->r->unknown_frees++;
    return;
  }
  ca_addr_map_del(&run->blocks, e->addr);
  ca_stream_t s = stream_of(run, e->stream);
  if (e->kind == CA_EV_FREE || !s) ca_free_sync((void *)(uintptr_t)p);
  else ca_free((void *)(uintptr_t)p, s);
  run->r->frees++;
}

static void replay_event(run_t *run, const ca_trace_event_t *e) {
  switch (e->kind) {
  case CA_EV_ALLOC: on_alloc(run, e); break;
  case CA_EV_FREE:
  case CA_EV_FREE_ASYNC: on_free(run, e); break;
  case CA_EV_FREE_COMPLETED: {
    ca_stream_t s = stream_of(run, e->stream);
    if (s) ca_sim_stream_complete(s);
    break;
  }
  case CA_EV_EMPTY_CACHE:
    if (run->o->honour_empty_cache) cudalloc_empty_cache();
    break;
  case CA_EV_STEP: cudalloc_step(); break;
  default: break;   /* segment and page events are the recording allocator's own decisions */
  }
}

/* A new peak of reserved memory: where that memory is, replacing the dump
 * of the previous peak (so the figures are those right after the event). */
static void keep_peak_dump(const ca_trace_event_t *e, size_t i, int64_t *peak, ca_replay_result_t *r) {
  cudalloc_stats_t s;
  if (cudalloc_get_stats(0, &s) != cudaSuccess || s.reserved_bytes.current <= *peak) return;
  *peak = s.reserved_bytes.current;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  fprintf(f, "peak reserved set by event %zu (%s of %llu bytes on stream %#llx):\n", i,
          e->kind == CA_EV_ALLOC ? "an allocation" : "another event", (unsigned long long)e->size,
          (unsigned long long)e->stream);
  ca_holdings_dump(0, f);
  if (fclose(f)) {
    free(text);
    return;
  }
  free(r->peak_dump);
  r->peak_dump = text;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int ca_replay_run(const ca_trace_t *t, const ca_replay_opts_t *o, ca_replay_result_t *r, char *err, size_t cap) {
  memset(r, 0, sizeof *r);
  if (start(o, err, cap)) return -1;
  run_t run = {.o = o, .r = r};
  double t0 = now();
  int64_t peak = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (t->ev[i].device != o->device) continue;
    r->events++;
    replay_event(&run, &t->ev[i]);
    if (o->dump_peak) keep_peak_dump(&t->ev[i], i, &peak, r);
  }
  r->seconds = now() - t0;
  cudalloc_get_stats(0, &r->stats);
  ca_addr_map_free(&run.blocks);
  ca_addr_map_free(&run.streams);
  cudalloc_shutdown();   /* quiet: the blocks still live are the trace's, not leaks */
  return 0;
}

// ----------------------------------------------------------------------------
// The smallest capacity
// ----------------------------------------------------------------------------

uint64_t ca_replay_ample_capacity(const ca_trace_t *t, int dev) {
  uint64_t live = 0, peak = 0;
  ca_addr_map_t sizes = {0};
  for (size_t i = 0; i < t->n; i++) {
    const ca_trace_event_t *e = &t->ev[i];
    uint64_t size;
    if (e->device != dev) continue;
    if (e->kind == CA_EV_ALLOC && ca_addr_map_put(&sizes, e->addr, e->size) && (live += e->size) > peak) peak = live;
    if ((e->kind == CA_EV_FREE || e->kind == CA_EV_FREE_ASYNC) && ca_addr_map_get(&sizes, e->addr, &size)) {
      live -= size;
      ca_addr_map_del(&sizes, e->addr);
    }
  }
  ca_addr_map_free(&sizes);
  if (dev >= 0 && dev < CA_TRACE_MAX_DEVICES && t->origin[dev].peak_reserved > peak) peak = t->origin[dev].peak_reserved;
  uint64_t ample = (2 * peak + 1024 * MiB - 1) / (1024 * MiB) * (1024 * MiB);
  return ample < 1024 * MiB ? 1024 * MiB : ample;
}

/* true when the device's events replay at capacity pages without an OOM.
 * The search provokes out-of-memory on purpose: cudalloc's report of each
 * (on stderr) is silenced meanwhile. */
static int fits(const ca_trace_t *t, ca_replay_opts_t o, uint64_t pages, unsigned *runs, bool *ok, char *err,
                size_t cap) {
  ca_replay_result_t r;
  o.capacity = pages * PAGE;
  ++*runs;
  fflush(stderr);
  int saved = dup(2), null = open("/dev/null", O_WRONLY);
  if (saved >= 0 && null >= 0) dup2(null, 2);
  int rc = ca_replay_run(t, &o, &r, err, cap);
  if (saved >= 0) dup2(saved, 2), close(saved);
  if (null >= 0) close(null);
  if (rc) return -1;
  *ok = r.ooms == 0;
  return 0;
}

int ca_replay_min_capacity(const ca_trace_t *t, ca_replay_opts_t o, uint64_t *capacity, unsigned *runs, char *err,
                           size_t cap) {
  ca_replay_result_t r;
  *runs = 1;
  o.dump_peak = false;   /* the search's replays answer fits or not */
  o.capacity = ca_replay_ample_capacity(t, o.device);
  if (ca_replay_run(t, &o, &r, err, cap)) return -1;
  if (r.ooms) return snprintf(err, cap, "the replay fails even with %llu MiB", (unsigned long long)(o.capacity / MiB)), -1;
  /* below the live bytes nothing fits; the ample run never held more than its peak reserved */
  uint64_t lo = (uint64_t)r.stats.requested_bytes.peak / PAGE;   /* too small (or exactly the live bytes) */
  uint64_t hi = ((uint64_t)r.stats.reserved_bytes.peak + PAGE - 1) / PAGE;
  bool ok;
  while (true) {   /* hi is expected to fit; make sure */
    if (fits(t, o, hi, runs, &ok, err, cap)) return -1;
    if (ok) break;
    lo = hi;
    hi *= 2;
  }
  if (lo > 0 && lo < hi) {   /* lo itself fits when the live bytes fill whole pages and nothing is cached */
    if (fits(t, o, lo, runs, &ok, err, cap)) return -1;
    if (ok) hi = lo;
  }
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (fits(t, o, mid, runs, &ok, err, cap)) return -1;
    *(ok ? &hi : &lo) = mid;
  }
  *capacity = hi * PAGE;
  return 0;
}
