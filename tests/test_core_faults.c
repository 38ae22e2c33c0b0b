/* Out of memory and injected faults: the retry ladder, and that a failure
 * of any backend operation at any call leaves the allocator consistent and
 * leaks no physical handle. */
#include "core_testing.h"

/* Injected faults and a small capacity: simulated device only. */
static void sim_only(void) { SKIP_ON_CUDA("injected faults and a small capacity"); }
TestSuite(core_faults, .init = sim_only, .fini = core_fini);

Test(core_faults, ladder_waits_for_pending_frees_before_failing) {
  core_start("sim_capacity_mb:16,sim_events:manual,legacy_queue:off");   /* cudaFree's fence, as in a program with more than the legacy stream (legacy_queue:off) */
  void *a, *b;
  cr_assert_eq(cudalloc_malloc(&a, 12 * MiB, 0), cudaSuccess);
  cudalloc_free_sync(a);   /* pending: the legacy stream never completes by itself */
  cr_assert_eq(cudalloc_malloc(&b, 12 * MiB, 0), cudaSuccess);
  cr_assert_eq(b, a);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_waits.total, 1, "it waited once, for the oldest fence");
  cr_assert_eq(s.num_ooms.total, 0);
  CHECK_CONSISTENT();
}

Test(core_faults, real_exhaustion_fails_with_consistent_stats, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("a small capacity");
  core_start("sim_capacity_mb:32");
  void *a, *b, *c;
  cr_assert_eq(cudalloc_malloc(&a, 20 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 10 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&c, 8 * MiB, 0), cudaErrorMemoryAllocation);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_ooms.total, 1);
  cr_assert_eq(s.allocated_bytes.current, 30 * MiB);
  cr_assert_eq(s.num_live_blocks.current, 2);
  CHECK_CONSISTENT();
  cr_assert(strstr(captured_stderr(), "(8.0 MiB): exhausted"), "the report names the cause:\n%s", captured_stderr());
}

Test(core_faults, fragmentation_is_diagnosed, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("a small capacity");
  core_start("sim_capacity_mb:32,expandable_segments:false");
  void *p[16];
  int n = 0;
  while (n < 16 && cudalloc_malloc(&p[n], 1536 * 1024, 0) == cudaSuccess) n++;
  for (int i = 0; i < n; i += 2) cudalloc_free_sync(p[i]);
  void *big;
  cr_assert_eq(cudalloc_malloc(&big, 4 * MiB, 0), cudaErrorMemoryAllocation);
  cr_assert(strstr(captured_stderr(), "(4.0 MiB): fragmented"), "%s", captured_stderr());
  CHECK_CONSISTENT();
}

/* A small random workload in which any call may fail; the allocator must
 * stay consistent after every operation. */
static void churn(uint64_t seed, int ops) {
  void *live[32] = {0};
  uint64_t rng = seed;
  for (int op = 0; op < ops; op++) {
    int k = (int)(rng_next(&rng) % 32);
    if (live[k]) {
      cudaError_t rc = rng_next(&rng) % 2 ? cudalloc_free_sync(live[k]) : cudalloc_free(live[k], 0);
      cr_assert_eq(rc, cudaSuccess, "a free never fails");
      live[k] = NULL;
    } else {
      size_t size = 1 + rng_next(&rng) % (6 * MiB);
      cudaError_t rc = cudalloc_malloc(&live[k], size, 0);
      if (rc != cudaSuccess) {
        /* Memory calls surface as out-of-memory; a failed device query as its own error. */
        cr_assert(rc == cudaErrorMemoryAllocation || rc == cudaErrorDeviceUninitialized || rc == cudaErrorInvalidDevice,
                  "unexpected error %d", rc);
        live[k] = NULL;
      } else {
        memset(live[k], 0x5a, size);
      }
    }
    if (cudalloc_check()) cr_assert_fail("inconsistent after operation %d", op);
  }
  for (int k = 0; k < 32; k++)
    if (live[k]) cudalloc_free_sync(live[k]);
}

/* churn() with what it prints captured: the first allocations that failed
 * for want of memory printed one verdict each (later ones are rate-limited
 * to a line per second), and nothing else was printed. Returns the number
 * of those failures. */
static int64_t churn_diagnosed(uint64_t seed, int ops) {
  capture_t cap;
  capture_begin(&cap);
  churn(seed, ops);
  char *err = capture_end_all(&cap);
  int64_t ooms = stats0().num_ooms.total;
  int64_t full = ooms < CA_OOM_FULL_REPORTS ? ooms : CA_OOM_FULL_REPORTS;
  cr_assert_eq(count_of(err, "cudalloc: out of memory on device 0: asked for "), full,
               "%lld out-of-memory failures, not one verdict for each of the first:\n%.2000s", (long long)ooms, err);
  cr_assert_eq(count_of(err, "cudalloc:   report: "), full, "%.2000s", err);
  cr_assert_leq(count_of(err, "cudalloc: out of memory on device 0 again: "), ooms - full, "%.2000s", err);
  cr_assert_eq(count_of(err, "\n"), count_of(err, "cudalloc: out of memory") + count_of(err, "cudalloc:   "),
               "a line that is not part of a diagnosis:\n%.2000s", err);
  free(err);
  return ooms;
}

/* Everything freed and the cache emptied twice (a release may itself be
 * the call that fails): no physical memory may remain. */
static void assert_no_leaked_handle(void) {
  ca_debug.skip_fences = false;
  cudalloc_step();
  ca_sim_complete_all();
  cudalloc_empty_cache();
  cr_assert_eq((size_t)stats0().reserved_bytes.current, ca_sim_physical_used(0),
               "every physical page the device holds is accounted for");
  cudalloc_empty_cache();
  cr_assert_eq(stats0().reserved_bytes.current, 0);
  cr_assert_eq(ca_sim_physical_used(0), 0, "no handle leaked");
  cr_assert_eq(ca_sim_mapped_bytes(0), 0, "no mapping leaked");
  CHECK_CONSISTENT();
}

/* Manual events make frees wait, so that the event calls (and waits)
 * happen often enough for the k-th call to exist. */
/* 5 s in a plain build; ThreadSanitizer makes it about ten times slower. */
Test(core_faults, every_backend_op_failing_at_a_random_call, .timeout = 300) {
  static const char *ops[] = {"reserve", "create", "release", "map", "unmap", "set_access",
                              "event_create", "event_record", "event_query", "event_sync", "mem_info"};
  uint64_t rng = 42;
  int64_t ooms = 0;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int op = ca_backend_op_from_name(ops[i], strlen(ops[i]));
    for (int round = 0; round < 3; round++) {
      char conf[128];
      unsigned k = op == CA_OP_reserve ? 1 : 1 + (unsigned)(rng_next(&rng) % 4);
      /* legacy_queue:off: cudaFree'd blocks wait for events, so that event calls are many */
      snprintf(conf, sizeof conf, "sim_capacity_mb:64,sim_events:manual,legacy_queue:off,sim_fail:%s@%u", ops[i], k);
      core_start(conf);
      ooms += churn_diagnosed(rng_next(&rng), 400);
      assert_no_leaked_handle();
      /* in the churn or in the clean-up: releases are few since a chunk
       * goes back only whole (pages.c) */
      cr_assert_geq(ca_sim_errors(op), 1, "the %s call %u was made and failed (%llu calls)", ops[i], k,
                    (unsigned long long)ca_sim_calls(op));
      cudalloc_shutdown();
    }
  }
  cr_assert_gt(ooms, 0, "some allocations failed, so that their diagnoses were checked");
}

Test(core_faults, random_failures_everywhere) {
  int64_t ooms = 0;
  for (uint64_t seed = 1; seed <= 4; seed++) {
    char conf[128];
    snprintf(conf, sizeof conf, "sim_capacity_mb:64,sim_fail_rate:0.05,sim_seed:%llu", (unsigned long long)seed);
    core_start(conf);
    ooms += churn_diagnosed(seed * 7, 500);
    ca_sim_fail_rate(CA_OP_COUNT, 0, 0);
    assert_no_leaked_handle();
    cudalloc_shutdown();
  }
  cr_assert_gt(ooms, 0, "some allocations failed, so that their diagnoses were checked");
}

Test(core_faults, a_refused_reservation_is_asked_again_smaller) {
  core_start("sim_fail:reserve@1");
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, MiB, 0), cudaSuccess);
  cr_assert_eq(ca_sim_errors(CA_OP_reserve), 1);
  cr_assert_eq(dev0()->va_size, 3 * dev0()->props.total_bytes, "small region + twice the device");
  CHECK_CONSISTENT();
}

/* (A reservation refused at every size is no transient failure: the
 * device is then passed through, test_core_regressions.c.) */
Test(core_faults, a_failed_device_setup_is_retried) {
  core_start("sim_fail:device_props@1");
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, MiB, 0), ca_cuda_error(ca_sim_injected_error(CA_OP_device_props)));
  cr_assert_eq(cudalloc_malloc(&p, MiB, 0), cudaSuccess, "the next call sets the device up");
  CHECK_CONSISTENT();
}

Test(core_faults, a_wait_that_keeps_failing_ends_in_out_of_memory, .init = cr_redirect_stderr, .timeout = 20) {
  SKIP_ON_CUDA("injected faults");
  core_start("sim_capacity_mb:16,sim_events:manual,legacy_queue:off");   /* cudaFree's fence, as in a program with more than the legacy stream (legacy_queue:off) */
  void *a, *b;
  cr_assert_eq(cudalloc_malloc(&a, 12 * MiB, 0), cudaSuccess);
  cudalloc_free_sync(a);
  ca_sim_fail_rate(CA_OP_event_sync, 1.0, 1);   /* the driver can no longer wait */
  cr_assert_eq(cudalloc_malloc(&b, 12 * MiB, 0), cudaErrorMemoryAllocation, "it gives up instead of spinning");
  cr_assert_geq(ca_sim_errors(CA_OP_event_sync), 1);
  CHECK_CONSISTENT();
  ca_sim_fail_rate(CA_OP_event_sync, 0, 0);
  cr_assert_eq(cudalloc_malloc(&b, 12 * MiB, 0), cudaSuccess, "and succeeds once waiting works again");
}
