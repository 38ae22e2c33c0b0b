/* The event log's round trip: a run recorded (trace:PATH), exported as a
 * PyTorch memory snapshot (cudalloc-trace pytorch), imported by the replay
 * (bench/replay) and replayed through the core gives the recorded run's
 * own figures, and so does the log itself read by the replay: the same allocations, the same peak of live bytes, the same
 * peak of allocated bytes; and two replays give the same figures, backend
 * calls included. A trace that lost its largest allocation is shown to
 * fail the comparison. */
#include "core_testing.h"

#include <sys/wait.h>
#include <unistd.h>

#include "importers.h"
#include "replay.h"

TestSuite(trace_roundtrip, .fini = core_fini, .timeout = 120);

static char log_path[256], pickle_path[300];

static const char *build_dir(void) {
  const char *b = getenv("CUDALLOC_BUILD");
  return b && *b ? b : "build";
}

/* 2000 seeded operations on two streams and the legacy one: sizes from
 * 512 B to 8 MiB, at most 48 live, stream-ordered and cudaFree-like frees. */
static void record(cudalloc_stats_t *s) {
  snprintf(log_path, sizeof log_path, "/tmp/cudalloc-roundtrip-%d.log", (int)getpid());
  snprintf(pickle_path, sizeof pickle_path, "%s.pickle", log_path);
  char conf[400];
  snprintf(conf, sizeof conf, "trace:%s,sim_events:auto", log_path);
  core_start(conf);
  ca_stream_t streams[3] = {NULL, test_stream(true), test_stream(false)};
  void *live[48] = {0};
  ca_stream_t on[48] = {0};
  uint64_t rng = 11;
  for (int op = 0; op < 2000; op++) {
    unsigned i = (unsigned)(rng_next(&rng) % 48);
    if (live[i]) {
      if (rng_next(&rng) % 3) cr_assert_eq(cudalloc_free(live[i], (cudaStream_t)on[i]), cudaSuccess);
      else cr_assert_eq(cudalloc_free_sync(live[i]), cudaSuccess);
      live[i] = NULL;
      continue;
    }
    on[i] = streams[rng_next(&rng) % 3];
    size_t size = (size_t)512 << (rng_next(&rng) % 15);
    size += (size_t)(rng_next(&rng) % 4096);
    cr_assert_eq(cudalloc_malloc(&live[i], size, (cudaStream_t)on[i]), cudaSuccess);
  }
  for (unsigned i = 0; i < 48; i++)
    if (live[i]) cudalloc_free(live[i], (cudaStream_t)on[i]);
  cr_assert_eq(cudalloc_get_stats(0, s), cudaSuccess);
  core_stop();   /* closes the log */
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/cudalloc-trace pytorch %s %s", build_dir(), log_path, pickle_path);
  int rc = system(cmd);
  cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s", cmd);
}

static void import_from(const char *path, ca_trace_t *t) {
  ca_import_error_t err = {{0}};
  ca_trace_init(t);
  cr_assert_eq(ca_import_file(path, t, &err), 0, "%s", err.msg);
  cr_assert_eq(t->ndevices, 1);
}

static void import(ca_trace_t *t) { import_from(pickle_path, t); }

static void replay(const ca_trace_t *t, ca_replay_result_t *r) {
  char err[256];
  ca_replay_opts_t o = {.device = 0, .expandable = true, .capacity = ca_replay_ample_capacity(t, 0)};
  cr_assert_eq(ca_replay_run(t, &o, r, err, sizeof err), 0, "%s", err);
}

/* How many of the recorded run's figures the replay does not give (each
 * said in why). */
static int mismatches(const cudalloc_stats_t *s, const ca_replay_result_t *r, char *why, size_t cap) {
  struct { const char *what; int64_t recorded, replayed; } f[] = {
    {"allocations", s->num_allocs.total, (int64_t)r->allocs},
    {"frees", s->num_frees.total, (int64_t)r->frees},
    {"peak live (requested) bytes", s->requested_bytes.peak, r->stats.requested_bytes.peak},
    {"peak allocated bytes", s->allocated_bytes.peak, r->stats.allocated_bytes.peak},
    {"out-of-memory", s->num_ooms.total, (int64_t)r->ooms},
  };
  int bad = 0;
  size_t n = 0;
  why[0] = 0;
  for (size_t i = 0; i < sizeof f / sizeof *f; i++)
    if (f[i].recorded != f[i].replayed && n < cap) {
      bad++;
      n += (size_t)snprintf(why + n, cap - n, "%s: recorded %lld, replayed %lld; ", f[i].what,
                            (long long)f[i].recorded, (long long)f[i].replayed);
    }
  return bad;
}

Test(trace_roundtrip, record_export_import_replay_gives_the_recorded_peaks) {
  cudalloc_stats_t s;
  record(&s);
  ca_trace_t t;
  import(&t);
  ca_replay_result_t r1, r2;
  replay(&t, &r1);
  replay(&t, &r2);
  char why[1024];
  cr_expect_eq(mismatches(&s, &r1, why, sizeof why), 0, "%s", why);
  /* deterministic: the same figures, the backend's calls included */
  cr_expect_eq(memcmp(&r1.stats, &r2.stats, sizeof r1.stats), 0, "two replays differ");
  cr_expect_eq(r1.allocs, r2.allocs);
  ca_trace_dispose(&t);
  unlink(log_path);
  unlink(pickle_path);
}

/* The same from cudalloc's own log, read by the replay directly. */
Test(trace_roundtrip, record_then_replay_the_log_itself_gives_the_recorded_peaks) {
  cudalloc_stats_t s;
  record(&s);
  ca_trace_t t;
  import_from(log_path, &t);
  cr_assert_str_eq(t.format, "cudalloc-trace");
  ca_replay_result_t r;
  replay(&t, &r);
  char why[1024];
  cr_expect_eq(mismatches(&s, &r, why, sizeof why), 0, "%s", why);
  ca_trace_dispose(&t);
  unlink(log_path);
  unlink(pickle_path);
}

/* The comparison can fail: the imported trace loses its largest
 * allocation (and that block's free), and the peaks no longer agree. */
Test(trace_roundtrip, a_trace_missing_an_allocation_fails_the_comparison) {
  cudalloc_stats_t s;
  record(&s);
  ca_trace_t t;
  import(&t);
  size_t big = t.n;
  for (size_t i = 0; i < t.n; i++)
    if (t.ev[i].kind == CA_EV_ALLOC && (big == t.n || t.ev[i].size > t.ev[big].size)) big = i;
  cr_assert_lt(big, t.n);
  t.ev[big].kind = CA_EV_STEP + 100;   /* a kind the replay skips: the allocation is gone */
  ca_replay_result_t r;
  replay(&t, &r);
  char why[1024];
  cr_assert_gt(mismatches(&s, &r, why, sizeof why), 0, "the lost allocation went unnoticed");
  cr_assert_not_null(strstr(why, "allocations"), "%s", why);
  ca_trace_dispose(&t);
  unlink(log_path);
  unlink(pickle_path);
}
