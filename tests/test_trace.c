#define _GNU_SOURCE /* memmem */
/* The event log (trace:PATH, trace_ring:N; docs/trace.md): recording
 * loses no event on several threads and streams (counted against the
 * run's own statistics, and shown to catch one lost event), the ring keeps
 * exactly the last N, the reader rejects malformed logs with the offset,
 * and the exports read the way their viewers read them (the scripts of tests/trace
 * replicate PyTorch's _memory_viz.py and a Perfetto counter reader). */
#include "core_testing.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_read.h"

#define THREADS 6
#define OPS 800

static char log_path[256];

static const char *build_dir(void) {
  const char *b = getenv("CUDALLOC_BUILD");
  return b && *b ? b : "build";
}

static void start_recording(const char *extra) {
  snprintf(log_path, sizeof log_path, "/tmp/cudalloc-trace-test-%d.log", (int)getpid());
  char conf[512];
  snprintf(conf, sizeof conf, "trace:%s%s%s", log_path, extra && *extra ? "," : "", extra ? extra : "");
  core_start(conf);
}

static void read_log(const char *path, ca_trace_data_t *t) {
  char err[512];
  cr_assert_eq(ca_trace_read(path, t, err, sizeof err), 0, "%s: %s", path, err);
}

static uint64_t count(const ca_trace_data_t *t, unsigned kind) {
  uint64_t n = 0;
  for (size_t i = 0; i < t->nevents; i++) n += t->events[i].kind == kind;
  return n;
}

/* The log against the run's statistics; returns how many figures differ
 * (each said in why). */
static int check_counts(const ca_trace_data_t *t, const cudalloc_stats_t *s, uint64_t page, char *why, size_t cap) {
  int64_t alloc = 0, peak_alloc = 0, reserved = 0, peak_reserved = 0, mapped = 0, pending = 0;
  uint64_t moved = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    const ca_trace_event_t *e = &t->events[i];
    int64_t span = (int64_t)(e->size + e->extra);
    switch (e->kind) {
    case CA_EV_ALLOC: alloc += span; break;
    case CA_EV_FREE: case CA_EV_FREE_ASYNC: alloc -= span; break;
    case CA_EV_RESERVE: reserved += (int64_t)e->size; break;
    case CA_EV_RELEASE: reserved -= (int64_t)e->size; break;
    case CA_EV_SEGMENT_MAP: mapped += (int64_t)e->size; break;
    case CA_EV_SEGMENT_UNMAP: mapped -= (int64_t)e->size; break;
    case CA_EV_PAGE_MOVE: moved += e->size / page; break;
    default: break;
    }
    if (alloc > peak_alloc) peak_alloc = alloc;
    if (reserved > peak_reserved) peak_reserved = reserved;
  }
  (void)pending;
  struct { const char *what; int64_t log, stats; } figs[] = {
    {"allocations", (int64_t)count(t, CA_EV_ALLOC), s->num_allocs.total},
    {"frees", (int64_t)(count(t, CA_EV_FREE) + count(t, CA_EV_FREE_ASYNC)), s->num_frees.total},
    {"out-of-memory", (int64_t)count(t, CA_EV_OOM), s->num_ooms.total},
    {"page moves", (int64_t)moved, s->num_page_moves.total},
    {"allocated bytes", alloc, s->allocated_bytes.current},
    {"peak allocated bytes", peak_alloc, s->allocated_bytes.peak},
    {"reserved bytes", reserved, s->reserved_bytes.current},
    {"peak reserved bytes", peak_reserved, s->reserved_bytes.peak},
    {"mapped bytes", mapped, s->mapped_bytes.current},
  };
  int bad = 0;
  size_t n = 0;
  for (size_t i = 0; i < sizeof figs / sizeof *figs; i++)
    if (figs[i].log != figs[i].stats) {
      bad++;
      n += (size_t)snprintf(why + n, n < cap ? cap - n : 0, "%s: log %lld, stats %lld; ", figs[i].what,
                            (long long)figs[i].log, (long long)figs[i].stats);
    }
  return bad;
}

typedef struct {
  int id;
  ca_stream_t stream;
  uint64_t rng;
  int failures;
} worker_t;

static void *work(void *arg) {
  worker_t *w = arg;
  if (ca_ready()) ca_state.be->set_device(0);
  void *mine[16] = {0};
  for (int op = 0; op < OPS; op++) {
    int k = (int)(rng_next(&w->rng) % 16);
    if (mine[k]) {
      cudaError_t rc = rng_next(&w->rng) % 2 ? cudalloc_free(mine[k], (cudaStream_t)w->stream) : cudalloc_free_sync(mine[k]);
      w->failures += rc != cudaSuccess;
      mine[k] = NULL;
    } else {
      size_t size = 1 + rng_next(&w->rng) % (rng_next(&w->rng) % 4 ? 64 * 1024 : 6 * MiB);
      w->failures += cudalloc_malloc(&mine[k], size, (cudaStream_t)w->stream) != cudaSuccess;
    }
  }
  for (int k = 0; k < 16; k++)
    if (mine[k]) cudalloc_free_sync(mine[k]);
  return NULL;
}

/* Six threads on six streams (half non-blocking), each running work(). */
typedef struct {
  pthread_t t[THREADS];
  worker_t w[THREADS];
} crew_t;

static void crew_start(crew_t *c, uint64_t seed) {
  void *p;   /* the device is set up first: a step marks only devices in use */
  cr_assert_eq(cudalloc_malloc(&p, 1, NULL), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  for (int i = 0; i < THREADS; i++) {
    c->w[i] = (worker_t){.id = i, .stream = test_stream(i % 2), .rng = seed + (uint64_t)i};
    pthread_create(&c->t[i], NULL, work, &c->w[i]);
  }
}

static void crew_join(crew_t *c) {
  for (int i = 0; i < THREADS; i++) {
    pthread_join(c->t[i], NULL);
    cr_assert_eq(c->w[i].failures, 0, "thread %d: %d calls failed", i, c->w[i].failures);
  }
}

/* The crew's async and sync frees, with steps and cache releases from the
 * main thread meanwhile; the threads end before the log closes, so their
 * buffers are written at thread exit. */
static void record_threads(cudalloc_stats_t *s) {
  crew_t crew;
  crew_start(&crew, 77);
  for (int i = 0; i < 20; i++) {
    cudalloc_step();
    if (i % 5 == 0) cudalloc_empty_cache();
    usleep(1000);
  }
  crew_join(&crew);
  cudalloc_step();
  cr_assert_eq(cudalloc_get_stats(0, s), cudaSuccess);
}

/* Blocks left live and pending when the log closes: the snapshot's
 * segments then hold blocks of every state. */
static void leave_some_live(cudalloc_stats_t *s) {
  void *p[6];
  for (int i = 0; i < 6; i++) cr_assert_eq(cudalloc_malloc(&p[i], 3000 + (size_t)i * 700000, NULL), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p[1]), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p[4]), cudaSuccess);
  cr_assert_eq(cudalloc_get_stats(0, s), cudaSuccess);
}

TestSuite(trace, .fini = core_fini, .timeout = 120);

Test(trace, threads_and_streams_lose_no_event) {
  start_recording("sim_capacity_mb:1024,sim_granularity_kb:2048,garbage_collection_threshold:0.5");
  cudalloc_stats_t s;
  record_threads(&s);
  cudalloc_shutdown();   /* closes the log */
  ca_trace_data_t t;
  read_log(log_path, &t);
  cr_assert(t.complete);
  cr_assert_eq(t.lost, 0);
  char why[1024] = "";
  cr_expect_eq(check_counts(&t, &s, 2 * MiB, why, sizeof why), 0, "the log disagrees with the stats: %s", why);
  cr_expect_gt(s.num_allocs.total, THREADS * OPS / 4, "the run allocated little: %lld", (long long)s.num_allocs.total);
  cr_expect_gt(count(&t, CA_EV_FREE_COMPLETED), 0);
  cr_expect_eq(count(&t, CA_EV_STEP), 21);
  cr_expect_eq(count(&t, CA_EV_EMPTY_CACHE), 4);
  /* every thread's events: six workers and the main thread */
  uint32_t tids[64];
  int ntids = 0;
  for (size_t i = 0; i < t.nevents; i++) {
    int k = 0;
    while (k < ntids && tids[k] != t.events[i].thread) k++;
    if (k == ntids && ntids < 64) tids[ntids++] = t.events[i].thread;
  }
  cr_expect_eq(ntids, THREADS + 1);
  /* a device's events are in strictly increasing time */
  for (size_t i = 1; i < t.nevents; i++) cr_assert_gt(t.events[i].time_ns, t.events[i - 1].time_ns);
  ca_trace_data_free(&t);
  unlink(log_path);
}

/* While the log records, an ordinal's allocations all go to its first
 * arena, whatever the routing would say (arena_spread:first sends a
 * second stream to arena 1): one lock orders the log's events and the
 * statistics' changes alike, so that the log's replay reads the
 * statistics' peaks (the threaded test above, at arenas:2). Without the
 * rule (siblings.c's ca_siblings_route), b lands in arena 1. */
Test(trace, recording_keeps_an_ordinal_on_its_first_arena) {
  start_recording("arenas:2,arena_spread:first");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a, *b;
  cr_assert_eq(cudalloc_malloc(&a, 3 * MiB, (cudaStream_t)s1), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 3 * MiB, (cudaStream_t)s2), cudaSuccess);
  ca_device_t *da = ca_device_lock_owner((uintptr_t)a);
  ca_devlock_release(&da->lock);
  ca_device_t *db = ca_device_lock_owner((uintptr_t)b);
  ca_devlock_release(&db->lock);
  cr_assert_eq(da->arena, 0);
  cr_assert_eq(db->arena, 0, "a second stream's allocation went to arena %d while the log recorded", db->arena);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  cudalloc_shutdown();
  unlink(log_path);
}

/* The count check above fails when one event is lost: the test build
 * drops one without counting it. */
Test(trace, a_lost_event_fails_the_count_check) {
  start_recording("sim_capacity_mb:1024");
  cudalloc_stats_t s;
  void *p;
  for (int i = 0; i < 10; i++) {
    if (i == 5) ca_debug.trace_drop_one = true;
    cr_assert_eq(cudalloc_malloc(&p, 4096, NULL), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);
  }
  cr_assert_eq(cudalloc_get_stats(0, &s), cudaSuccess);
  cudalloc_shutdown();
  ca_trace_data_t t;
  read_log(log_path, &t);
  char why[1024] = "";
  cr_expect_neq(check_counts(&t, &s, 2 * MiB, why, sizeof why), 0, "one event was dropped, yet the counts agree");
  cr_expect(strstr(why, "allocations: log 9, stats 10"), "%s", why);
  ca_trace_data_free(&t);
  unlink(log_path);
}

/* 300 pairs on the legacy stream (a block freed there is reused at once:
 * no fences, no other event), then a dump: the ring holds the last 100
 * events, the last 50 pairs in order, and says how many were older. */
Test(trace, ring_keeps_exactly_the_last_n) {
  start_recording("trace_ring:100");
  void *p;
  for (int i = 0; i < 300; i++) {
    cr_assert_eq(cudalloc_malloc(&p, 1000 + (size_t)i, NULL), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);
  }
  char dump[300];
  snprintf(dump, sizeof dump, "%s.dump", log_path);
  cr_assert_eq(cudalloc_trace_dump(dump), cudaSuccess);
  ca_trace_data_t t;
  read_log(dump, &t);
  cr_assert(t.header.flags & CA_TRACE_FLAG_RING);
  cr_assert_eq(t.nevents, 100);
  for (size_t i = 0; i < 100; i++) {
    const ca_trace_event_t *e = &t.events[i];
    cr_assert_eq(e->kind, i % 2 ? CA_EV_FREE_ASYNC : CA_EV_ALLOC, "event %zu: %s", i, ca_trace_kind_name(e->kind));
    cr_assert_eq(e->size, 1000 + 250 + i / 2, "event %zu", i);
  }
  uint64_t before = t.lost;   /* everything older: the pairs and the first mapping's events */
  cr_expect_geq(before, 500);
  ca_trace_data_free(&t);
  cudalloc_shutdown();   /* the exit dump: the same last 100 */
  read_log(log_path, &t);
  cr_expect_eq(t.nevents, 100);
  cr_expect_eq(t.lost, before);
  ca_trace_data_free(&t);
  unlink(dump);
  unlink(log_path);
}

/* Dumps of the ring while six threads record into it: each dump is a
 * complete log of at most the ring's events, in strictly increasing time
 * (the ring is copied under its lock while the threads go on). */
Test(trace, ring_dumps_while_threads_record) {
  start_recording("trace_ring:500,sim_capacity_mb:1024,sim_granularity_kb:2048");
  crew_t crew;
  crew_start(&crew, 91);
  char dump[300];
  snprintf(dump, sizeof dump, "%s.dump", log_path);
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(cudalloc_trace_dump(dump), cudaSuccess);
    ca_trace_data_t d;
    read_log(dump, &d);
    cr_assert(d.complete, "dump %d is not a complete log", i);
    cr_assert(d.header.flags & CA_TRACE_FLAG_RING);
    cr_assert_leq(d.nevents, 500);
    for (size_t k = 1; k < d.nevents; k++)
      cr_assert_gt(d.events[k].time_ns, d.events[k - 1].time_ns, "dump %d, event %zu", i, k);
    ca_trace_data_free(&d);
    usleep(500);
  }
  crew_join(&crew);
  cudalloc_shutdown();
  unlink(dump);
  unlink(log_path);
}

Test(trace, ring_is_dumped_on_out_of_memory) {
  start_recording("trace_ring:50,sim_capacity_mb:64");
  void *p;
  capture_t c;
  capture_begin(&c);
  cudaError_t rc = cudalloc_malloc(&p, 512 * MiB, NULL);
  char out[4096];
  capture_end(&c, out, sizeof out);
  cr_assert_eq(rc, cudaErrorMemoryAllocation);
  char oom[300];
  snprintf(oom, sizeof oom, "%s.oom", log_path);
  ca_trace_data_t t;
  read_log(oom, &t);
  cr_assert_geq(t.nevents, 1);
  cr_expect_eq(t.events[t.nevents - 1].kind, CA_EV_OOM);
  cr_expect_eq(t.events[t.nevents - 1].size, 512 * MiB);
  ca_trace_data_free(&t);
  unlink(oom);
  capture_discard(cudalloc_shutdown);
  unlink(log_path);
}

Test(trace, dump_says_when_it_cannot) {
  core_start("");
  cr_expect_eq(cudalloc_trace_dump(NULL), cudaErrorInitializationError, "no log is recorded");
  cudalloc_shutdown();
  start_recording("");
  cr_expect_eq(cudalloc_trace_dump("/tmp/elsewhere"), cudaErrorInvalidValue, "the full log has one file");
  cr_expect_eq(cudalloc_trace_dump(NULL), cudaSuccess);
  cudalloc_shutdown();
  unlink(log_path);
}

// ----------------------------------------------------------------------------
// The reader
// ----------------------------------------------------------------------------

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(*n);
  cr_assert_eq(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

static void expect_rejected(const unsigned char *b, size_t n, const char *says) {
  ca_trace_data_t t;
  char err[512] = "";
  cr_expect_eq(ca_trace_read_mem(b, n, &t, err, sizeof err), -1, "accepted a log that should fail with \"%s\"", says);
  cr_expect(strstr(err, says), "the message \"%s\" does not say \"%s\"", err, says);
}

Test(trace, reader_rejects_malformed_logs_with_the_offset) {
  start_recording("track:backtrace");
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 4096, NULL), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_shutdown();
  size_t n;
  unsigned char *b = slurp(log_path, &n), *copy = malloc(n);
  size_t hdr = sizeof(ca_trace_header_t), rec = sizeof(ca_trace_event_t);
  expect_rejected(b, 10, "offset 0: 10 bytes, shorter than a log's header");
  memcpy(copy, b, n), copy[0] = 'X';
  expect_rejected(copy, n, "offset 0: not a cudalloc event log");
  memcpy(copy, b, n), copy[12] = 99;
  expect_rejected(copy, n, "offset 12: format version 99");
  /* records 0 and 1: the clock's start pairs; 2: the first event */
  cr_assert_eq(((ca_trace_event_t *)(b + hdr))->kind, CA_EV_CLOCK);
  cr_assert_eq(((ca_trace_event_t *)(b + hdr + rec))->kind, CA_EV_CLOCK);
  size_t kind_at = offsetof(ca_trace_event_t, kind);
  memcpy(copy, b, n), copy[hdr + 2 * rec + kind_at] = 200, copy[hdr + 2 * rec + kind_at + 1] = 0;
  char says[64];
  snprintf(says, sizeof says, "offset %zu: record 2 has the unknown kind 200", hdr + 2 * rec);
  expect_rejected(copy, n, says);
  expect_rejected(b, hdr + rec + 20, "a torn record (20 bytes left");
  /* a record taken out: the end record's count catches it */
  memcpy(copy, b, hdr + 2 * rec);
  memcpy(copy + hdr + 2 * rec, b + hdr + 3 * rec, n - hdr - 3 * rec);
  expect_rejected(copy, n - rec, "records were written, the log holds");
  expect_rejected(b, n - 3, "is torn");   /* the call-site table cut short */
  /* the second start pair's ns before the first's: a calibration that goes back */
  memcpy(copy, b, n);
  memset(copy + hdr + rec + offsetof(ca_trace_event_t, addr), 0, 8);
  expect_rejected(copy, n, "calibration pairs go back in time");
  /* an event's raw time that converts beyond any run (a fuzzed input made it) */
  memcpy(copy, b, n);
  memset(copy + hdr + 2 * rec + offsetof(ca_trace_event_t, time_ns), 0xff, 8);
  expect_rejected(copy, n, "more than 2^62");
  /* without its end record (a killed process): the events, incomplete */
  ca_trace_data_t t;
  char err[256];
  size_t records = 0, events = 0;
  for (const ca_trace_event_t *e; hdr + (records + 1) * rec <= n &&
                                  (e = (const ca_trace_event_t *)(b + hdr + records * rec))->kind != CA_EV_LOG_END;
       records++)
    events += e->kind != CA_EV_CLOCK;
  cr_assert_eq(ca_trace_read_mem(b, hdr + records * rec, &t, err, sizeof err), 0, "%s", err);
  cr_expect(!t.complete);
  cr_expect_eq(t.nevents, events);
  ca_trace_data_free(&t);
  /* ... and with one clock pair only (the second start pair and the last,
   * before the end record, taken out): its times cannot be converted */
  cr_assert_eq(((ca_trace_event_t *)(b + hdr + (records - 1) * rec))->kind, CA_EV_CLOCK);
  memcpy(copy, b, hdr + rec);
  memcpy(copy + hdr + rec, b + hdr + 2 * rec, (records - 3) * rec);
  expect_rejected(copy, hdr + (records - 2) * rec, "clock calibration pairs of distinct times");
  free(copy);
  free(b);
  unlink(log_path);
}

/* A version 1 log (times in ns, no clock pairs), made from a version 2
 * one: read as it is, its times not converted. */
Test(trace, reader_reads_version_1_logs_unconverted) {
  start_recording("");
  void *p;
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(cudalloc_malloc(&p, 4096 + (size_t)i, NULL), cudaSuccess);
    cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  }
  cudalloc_shutdown();
  size_t n;
  unsigned char *b = slurp(log_path, &n), *v1 = malloc(n);
  size_t hdr = sizeof(ca_trace_header_t), rec = sizeof(ca_trace_event_t), out = hdr, events = 0, at = hdr;
  memcpy(v1, b, hdr);
  ((ca_trace_header_t *)v1)->version = 1;
  ((ca_trace_header_t *)v1)->clock = 0;
  for (;; at += rec) {
    ca_trace_event_t e;
    memcpy(&e, b + at, rec);
    if (e.kind == CA_EV_CLOCK) continue;
    if (e.kind == CA_EV_LOG_END) e.size = events;
    else e.time_ns = 1000 * ++events;   /* ns, as version 1 wrote them */
    memcpy(v1 + out, &e, rec);
    out += rec;
    if (e.kind == CA_EV_LOG_END) break;
  }
  memcpy(v1 + out, b + at + rec, n - at - rec);   /* the call-site table */
  out += n - at - rec;
  ca_trace_data_t t;
  char err[256];
  cr_assert_eq(ca_trace_read_mem(v1, out, &t, err, sizeof err), 0, "%s", err);
  cr_expect_eq(t.nevents, events);
  cr_expect_geq(events, 10);
  for (size_t i = 0; i < t.nevents; i++) cr_expect_eq(t.events[i].time_ns, 1000 * (i + 1), "event %zu", i);
  ca_trace_data_free(&t);
  free(v1);
  free(b);
  unlink(log_path);
}

// ----------------------------------------------------------------------------
// Exports, read as their viewers read them
// ----------------------------------------------------------------------------

static int run(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A recorded run to export: threads and streams, stats kept. */
static void record_for_export(cudalloc_stats_t *s, const char *conf) {
  start_recording(conf);
  record_threads(s);
  leave_some_live(s);
  capture_discard(cudalloc_shutdown);   /* its leak report names the live blocks */
  cr_assert_gt(s->mapped_bytes.current, 0);
  cr_assert_gt(s->active_bytes.current, s->allocated_bytes.current, "nothing pending at the end");
}

/* A recorded run exported as a memory_viz pickle, read by the script that
 * reads what _memory_viz.py reads; extra: more of its options. */
static void pytorch_snapshot_check(const char *conf, const char *extra) {
  cudalloc_stats_t s;
  record_for_export(&s, conf);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace pytorch %s %s.pickle", build_dir(), log_path, log_path);
  cr_assert_eq(run(cmd), 0, "%s", cmd);
  snprintf(cmd, sizeof cmd,
           "python3 tests/trace/memory_viz_check.py %s.pickle --peak-requested %lld --live-requested %lld "
           "--mapped %lld --allocs %lld %s",
           log_path, (long long)s.requested_bytes.peak, (long long)s.requested_bytes.current,
           (long long)s.mapped_bytes.current, (long long)s.num_allocs.total, extra);
  cr_expect_eq(run(cmd), 0, "%s", cmd);
  snprintf(cmd, sizeof cmd, "%s.pickle", log_path);
  unlink(cmd);
  unlink(log_path);
}

Test(trace, pytorch_snapshot_reads_as_memory_viz_reads_it) {
  pytorch_snapshot_check("track:backtrace,sim_capacity_mb:1024,garbage_collection_threshold:0.5", "--need-frames");
}

Test(trace, pytorch_snapshot_classic_segments) {
  pytorch_snapshot_check("expandable_segments:false,sim_capacity_mb:1024", "");
}

Test(trace, perfetto_counters_end_and_peak_at_the_stats) {
  cudalloc_stats_t s;
  record_for_export(&s, "sim_capacity_mb:1024,garbage_collection_threshold:0.5");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace perfetto %s %s.json", build_dir(), log_path, log_path);
  cr_assert_eq(run(cmd), 0, "%s", cmd);
  snprintf(cmd, sizeof cmd,
           "python3 tests/trace/perfetto_check.py %s.json --allocated %lld --peak-allocated %lld --reserved %lld "
           "--peak-reserved %lld --pending %lld --steps 21",
           log_path, (long long)s.allocated_bytes.current, (long long)s.allocated_bytes.peak,
           (long long)s.reserved_bytes.current, (long long)s.reserved_bytes.peak,
           (long long)(s.active_bytes.current - s.allocated_bytes.current));
  cr_expect_eq(run(cmd), 0, "%s", cmd);
  snprintf(cmd, sizeof cmd, "%s.json", log_path);
  unlink(cmd);
  unlink(log_path);
}

/* Ten call sites (track:caller: each function's call of cudalloc_malloc;
 * the store after it keeps the call from being a tail call, and the
 * functions from being folded into one). */
#define SITES 10
static volatile int site_sink;
#define SITE_FN(k)                                                  \
  static __attribute__((noinline)) void *alloc_at_##k(size_t size) { \
    void *p = NULL;                                                 \
    cr_assert_eq(cudalloc_malloc(&p, size, NULL), cudaSuccess);     \
    site_sink = k;                                                  \
    return p;                                                       \
  }
SITE_FN(0) SITE_FN(1) SITE_FN(2) SITE_FN(3) SITE_FN(4) SITE_FN(5) SITE_FN(6) SITE_FN(7) SITE_FN(8) SITE_FN(9)
static void *(*const site_fns[SITES])(size_t) = {alloc_at_0, alloc_at_1, alloc_at_2, alloc_at_3, alloc_at_4,
                                                 alloc_at_5, alloc_at_6, alloc_at_7, alloc_at_8, alloc_at_9};

/* The per-site tracks of the Perfetto export against the run's own sums:
 * every block's bytes as the core holds them (its live map), added per
 * site as the test allocates and frees, peaks taken as it goes. Ten sites,
 * each keeping its own number of blocks live: the export keeps the eight
 * with the highest peaks. */
Test(trace, perfetto_site_tracks_match_the_runs_own_sums) {
  start_recording("track:caller,sim_capacity_mb:2048");
  void *live[SITES][6] = {{0}};
  int64_t bytes[SITES] = {0}, peak[SITES] = {0};
  for (int r = 0; r < 12; r++)
    for (int k = 0; k < SITES; k++) {
      int keep = 1 + (k * 7) % 5, slot = r % keep;
      if (live[k][slot]) {
        bytes[k] -= (int64_t)ca_ptrmap_get(&dev0()->live, (uintptr_t)live[k][slot])->size;
        cr_assert_eq(cudalloc_free(live[k][slot], NULL), cudaSuccess);
      }
      live[k][slot] = site_fns[k]((size_t)(k + 1) * 300 * 1024 + (size_t)r * 512 + (size_t)k * 4096);
      bytes[k] += (int64_t)ca_ptrmap_get(&dev0()->live, (uintptr_t)live[k][slot])->size;
      if (bytes[k] > peak[k]) peak[k] = bytes[k];
    }
  for (int k = 0; k < SITES; k += 3)   /* some sites end lower than where they were */
    if (live[k][0]) {
      bytes[k] -= (int64_t)ca_ptrmap_get(&dev0()->live, (uintptr_t)live[k][0])->size;
      cr_assert_eq(cudalloc_free(live[k][0], NULL), cudaSuccess);
    }
  capture_discard(cudalloc_shutdown);   /* its leak report names the blocks left live */
  /* the top eight by peak: the two lowest peaks have no track */
  int low1 = 0, low2 = 1;
  if (peak[low2] < peak[low1]) low1 = 1, low2 = 0;
  for (int k = 2; k < SITES; k++) {
    if (peak[k] < peak[low1]) low2 = low1, low1 = k;
    else if (peak[k] < peak[low2]) low2 = k;
  }
  for (int k = 0; k < SITES; k++)
    if (k != low2) cr_assert_neq(peak[k], peak[low2], "sites %d and %d tie: the choice of the top 8 is open", k, low2);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace perfetto %s %s.json", build_dir(), log_path, log_path);
  cr_assert_eq(run(cmd), 0, "%s", cmd);
  /* wrong: 0 the right figures; 1 one site's peak a byte off; 2 a site
   * outside the top eight said to have a track: the checker must fail 1, 2 */
  int top = 0;   /* a top site, to put a byte off */
  while (top == low1 || top == low2) top++;
  for (int wrong = 0; wrong < 3; wrong++) {
    int n = snprintf(cmd, sizeof cmd, "python3 tests/trace/perfetto_sites_check.py %s.json 2>/dev/null", log_path);
    for (int k = 0; k < SITES; k++)
      n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --site alloc_at_%d:%lld:%lld:%d", k,
                    (long long)peak[k] + (wrong == 1 && k == top), (long long)bytes[k],
                    (k != low1 && k != low2) || (wrong == 2 && k == low1));
    cr_expect_eq(run(cmd), wrong ? 1 : 0, "%s", cmd);
  }
  snprintf(cmd, sizeof cmd, "%s.json", log_path);
  unlink(cmd);
  unlink(log_path);
}

Test(trace, rmm_csv_has_a_line_per_allocation_and_free) {
  cudalloc_stats_t s;
  record_for_export(&s, "sim_capacity_mb:1024");
  char cmd[1024], csv[300];
  snprintf(csv, sizeof csv, "%s.csv", log_path);
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace rmm %s %s", build_dir(), log_path, csv);
  cr_assert_eq(run(cmd), 0, "%s", cmd);
  FILE *f = fopen(csv, "r");
  cr_assert(f);
  char line[256];
  cr_assert(fgets(line, sizeof line, f));
  cr_expect_str_eq(line, "Thread,Time,Action,Pointer,Size,Stream\n");
  long long allocs = 0, frees = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned tid;
    double time;
    char action[32];
    unsigned long long ptr, size, stream;
    if (sscanf(line, "%u,%lf,%31[a-z ],%llx,%llu,%llx", &tid, &time, action, &ptr, &size, &stream) != 6) bad++;
    else if (!strcmp(action, "allocate")) allocs++;
    else if (!strcmp(action, "free")) frees++;
  }
  fclose(f);
  cr_expect_eq(bad, 0);
  cr_expect_eq(allocs, s.num_allocs.total);
  cr_expect_eq(frees, s.num_frees.total);
  unlink(csv);
  unlink(log_path);
}

Test(trace, tool_rejects_a_bad_log_with_its_offset) {
  snprintf(log_path, sizeof log_path, "/tmp/cudalloc-trace-test-%d.bad", (int)getpid());
  FILE *f = fopen(log_path, "wb");
  fputs("CUDALLOCTRC but not a log at all, and far too short", f);
  fclose(f);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace summary %s - 2>%s.err", build_dir(), log_path, log_path);
  cr_expect_eq(run(cmd), 1);
  snprintf(cmd, sizeof cmd, "%s.err", log_path);
  size_t n;
  unsigned char *msg = slurp(cmd, &n);
  cr_expect(n && memmem(msg, n, "offset 0", 8), "%.*s", (int)n, msg);
  free(msg);
  unlink(cmd);
  unlink(log_path);
}
