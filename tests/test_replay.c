/* The replay (bench/replay/replay.h): imported traces through cudalloc's
 * core on the simulated device, touching no memory, so that the 80 GiB
 * snapshot replays in milliseconds. */
#include "replay_testing.h"

#include "replay.h"

#define TINY "tests/replay/tiny_snapshot.pickle"

static ca_replay_result_t replay(const ca_trace_t *t, int dev, bool expandable, bool honour) {
  ca_replay_opts_t o = {.device = dev, .expandable = expandable, .honour_empty_cache = honour,
                        .capacity = ca_replay_ample_capacity(t, dev)};
  ca_replay_result_t r;
  char err[256];
  cr_assert_eq(ca_replay_run(t, &o, &r, err, sizeof err), 0, "%s", err);
  return r;
}

/* The snapshot's own live requested bytes per device, read by python3's
 * pickle from its segments (blocks in state active_allocated): a reading
 * independent of the importer under test. */
static void python_live_end(const char *path, uint64_t *live, int ndev) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "python3 -c \"import pickle,sys; s=pickle.load(open(sys.argv[1],'rb')); "
           "print(' '.join(str(sum(b['requested_size'] for g in s['segments'] if g['device']==d "
           "for b in g['blocks'] if b['state']=='active_allocated')) for d in range(%d)))\" '%s'",
           ndev, path);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  for (int d = 0; d < ndev; d++) cr_assert_eq(fscanf(p, "%lu", &live[d]), 1, "python3 printed no figure for %s", path);
  cr_assert_eq(pclose(p), 0, "python3 is needed by this test (tests/deps.sh)");
}

/* The blocks still live when each snapshot was taken are what the replay
 * holds at its end, in both modes. Broken on purpose once (the importer's
 * pre-trace blocks from segments dropped): select-n's device 0 then ended
 * 195 blocks short and this test failed. */
Test(replay, live_bytes_at_the_end_are_the_snapshots) {
  for (size_t i = 0; i < N_SHARED; i++) {
    const shared_snapshot_t *s = &shared_snapshots[i];
    char path[512];
    uint64_t want[3];
    ca_trace_t t;
    shared_path(path, sizeof path, s->file);
    python_live_end(path, want, s->ndevices);
    import_ok(path, &t);
    for (int d = 0; d < s->ndevices; d++)
      for (int expandable = 0; expandable < 2; expandable++) {
        ca_replay_result_t r = replay(&t, d, expandable, false);
        cr_assert_eq(r.ooms, 0, "%s dev %d: out of memory at an ample capacity", s->file, d);
        cr_assert_eq(r.unknown_frees, 0, "%s dev %d: %llu frees of blocks the replay did not hold", s->file, d,
                     (unsigned long long)r.unknown_frees);
        cr_assert_eq((uint64_t)r.stats.requested_bytes.current, want[d],
                     "%s dev %d (%s): %lld live bytes at the end, the snapshot has %llu", s->file, d,
                     expandable ? "expandable" : "classic", (long long)r.stats.requested_bytes.current,
                     (unsigned long long)want[d]);
        cr_assert_eq(r.events, s->events[d] + (d == 0 ? s->pre : 0));
      }
    ca_trace_dispose(&t);
  }
}

static bool same_run(const ca_replay_result_t *a, const ca_replay_result_t *b) {
  const cudalloc_stats_t *x = &a->stats, *y = &b->stats;
  return a->allocs == b->allocs && a->frees == b->frees && a->ooms == b->ooms &&
         x->requested_bytes.peak == y->requested_bytes.peak && x->allocated_bytes.peak == y->allocated_bytes.peak &&
         x->reserved_bytes.peak == y->reserved_bytes.peak && x->backend_create.total == y->backend_create.total &&
         x->backend_map.total == y->backend_map.total && x->backend_unmap.total == y->backend_unmap.total &&
         x->backend_reserve.total == y->backend_reserve.total && x->backend_sync.total == y->backend_sync.total;
}

/* Two replays of the same trace give the same figures (the 10-stream
 * snapshot: the most ordering to get wrong), and two searches the same
 * smallest capacity (the small snapshot, to keep the test fast). */
Test(replay, deterministic) {
  char path[512];
  ca_trace_t t;
  shared_path(path, sizeof path, "select-n-llama7b-10streams.pickle");
  import_ok(path, &t);
  for (int expandable = 0; expandable < 2; expandable++) {
    ca_replay_result_t a = replay(&t, 0, expandable, false), b = replay(&t, 0, expandable, false);
    cr_assert(same_run(&a, &b), "two replays (%s) differ: reserved %lld vs %lld", expandable ? "expandable" : "classic",
              (long long)a.stats.reserved_bytes.peak, (long long)b.stats.reserved_bytes.peak);
  }
  ca_trace_dispose(&t);
  shared_path(path, sizeof path, "cs336-transformer-step.pickle");
  import_ok(path, &t);
  ca_replay_opts_t o = {.device = 0, .expandable = true};
  uint64_t c1, c2;
  unsigned runs;
  char err[256];
  cr_assert_eq(ca_replay_min_capacity(&t, o, &c1, &runs, err, sizeof err), 0, "%s", err);
  cr_assert_eq(ca_replay_min_capacity(&t, o, &c2, &runs, err, sizeof err), 0, "%s", err);
  cr_assert_eq(c1, c2);
  ca_trace_dispose(&t);
}

/* The smallest capacity is a threshold: the trace runs at it, and one
 * page less gives an out-of-memory. */
Test(replay, smallest_capacity_is_the_threshold) {
  char path[512], err[256];
  ca_trace_t t;
  shared_path(path, sizeof path, "cs336-transformer-step.pickle");
  import_ok(path, &t);
  for (int expandable = 0; expandable < 2; expandable++) {
    ca_replay_opts_t o = {.device = 0, .expandable = expandable};
    uint64_t cap;
    unsigned runs;
    ca_replay_result_t r;
    cr_assert_eq(ca_replay_min_capacity(&t, o, &cap, &runs, err, sizeof err), 0, "%s", err);
    cr_assert_geq(cap, (uint64_t)3098 * MiB, "below the peak live bytes nothing fits");
    o.capacity = cap;
    cr_assert_eq(ca_replay_run(&t, &o, &r, err, sizeof err), 0);
    cr_assert_eq(r.ooms, 0, "the trace runs at the smallest capacity");
    o.capacity = cap - 2 * MiB;
    capture_t c;
    char buf[4096];
    capture_begin(&c);   /* cudalloc's out-of-memory report, expected */
    cr_assert_eq(ca_replay_run(&t, &o, &r, err, sizeof err), 0);
    capture_end(&c, buf, sizeof buf);
    cr_assert_gt(r.ooms, 0, "one page less fits too (%s): not the smallest", expandable ? "expandable" : "classic");
    cr_assert(strstr(buf, "out of memory") != NULL);
  }
  ca_trace_dispose(&t);
}

/* Blocks live before the trace are allocated first, and count in the
 * peak; a free of a block the trace never allocated frees one of them. */
Test(replay, pre_trace_blocks_are_allocated_first) {
  ca_trace_t t;
  import_ok(TINY, &t);
  ca_replay_result_t r = replay(&t, 0, true, false);
  cr_assert_eq(r.allocs, 4, "2 blocks from before the trace, 2 from it");
  cr_assert_eq(r.frees, 3);
  cr_assert_eq(r.unknown_frees, 0);
  cr_assert_eq(r.stats.requested_bytes.peak, (int64_t)(18 * MiB - 100));
  cr_assert_eq(r.stats.requested_bytes.current, (int64_t)(5 * MiB - 100));
  r = replay(&t, 1, true, false);
  cr_assert_eq(r.allocs, 1);
  cr_assert_eq(r.stats.requested_bytes.current, 0);
  ca_trace_dispose(&t);
}

/* --honour-empty-cache gives the cache back where the program did; without
 * it the program's empty_cache is not replayed. */
Test(replay, honour_empty_cache) {
  ca_trace_t t;
  import_ok(TINY, &t);
  ca_replay_result_t kept = replay(&t, 0, true, false), honoured = replay(&t, 0, true, true);
  cr_assert_eq(kept.stats.backend_release.total, 0, "nothing released unless the trace's empty_cache is honoured");
  cr_assert_gt(honoured.stats.backend_release.total, 0, "the program's empty_cache released the cached pages");
  cr_assert_lt(honoured.stats.reserved_bytes.current, kept.stats.reserved_bytes.current);
  ca_trace_dispose(&t);
}

/* An RMM log replays too; its failed allocation is not replayed as one. */
Test(replay, rmm_log) {
  ca_trace_t t;
  import_ok("tests/replay/small_rmm.csv", &t);
  ca_replay_result_t r = replay(&t, 0, false, false);
  cr_assert_eq(r.allocs, 2);
  cr_assert_eq(r.frees, 2);
  cr_assert_eq(r.stats.requested_bytes.peak, 3072);
  cr_assert_eq(r.stats.requested_bytes.current, 0);
  ca_trace_dispose(&t);
}
