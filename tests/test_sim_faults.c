/* The simulated device's instruments: counters of every call, fault
 * injection (exactly the calls asked for fail, with the op's error, and
 * change nothing; a rate with a seed is reproducible) and latency. */
#define _GNU_SOURCE
#include <pthread.h>

#include "sim_testing.h"

#define CONF "backend:sim,sim_capacity_mb:64"

TestSuite(sim_faults, .fini = sim_fini);

#define injected(op) ca_sim_injected_error(op)

/* The table itself: an injected fault answers as the driver does when it
 * is short of memory or a launch failed. */
Test(sim_faults, injected_errors_are_the_drivers) {
  cr_assert_eq(injected(CA_OP_create), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(injected(CA_OP_map), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(injected(CA_OP_event_record), CUDA_ERROR_LAUNCH_FAILED);
  cr_assert_eq(injected(CA_OP_init), CUDA_ERROR_NOT_INITIALIZED);
  for (int op = 0; op < CA_OP_COUNT; op++) cr_assert_neq(injected(op), CUDA_SUCCESS, "%s", ca_backend_op_name(op));
}

// ----------------------------------------------------------------------------
// Counters
// ----------------------------------------------------------------------------

Test(sim_faults, every_call_is_counted) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  uintptr_t va;
  OK(be->reserve(0, 2 * g, &va));
  for (int i = 0; i < 3; i++) {
    OK(be->create(0, g, &h));
    OK(be->release(h));
  }
  cr_assert_eq(be->create(0, g / 2, &h), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(ca_sim_calls(CA_OP_init), 1);
  cr_assert_eq(ca_sim_calls(CA_OP_device_props), 1);
  cr_assert_eq(ca_sim_calls(CA_OP_reserve), 1);
  cr_assert_eq(ca_sim_calls(CA_OP_create), 4);
  cr_assert_eq(ca_sim_calls(CA_OP_release), 3);
  cr_assert_eq(ca_sim_calls(CA_OP_map), 0);
  cr_assert_eq(ca_sim_errors(CA_OP_create), 1);
  cr_assert_eq(ca_sim_errors(CA_OP_release), 0);
  cr_assert_eq(ca_sim_violations(), 1);
  cr_assert_eq(ca_sim_calls(CA_OP_COUNT), 0, "an op that does not exist");
}

Test(sim_faults, not_ready_is_not_an_error) {
  SKIP_ON_CUDA("instruments of the simulation");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:manual", NULL);
  ca_event_t e;
  OK(be->event_create(0, &e));
  OK(be->event_record(e, NULL));
  cr_assert_eq(be->event_query(e), CUDA_ERROR_NOT_READY);
  cr_assert_eq(ca_sim_calls(CA_OP_event_query), 1);
  cr_assert_eq(ca_sim_errors(CA_OP_event_query), 0);
}

static void *count_calls(void *arg) {
  const ca_backend_t *be = arg;
  int n;
  for (int i = 0; i < 1000; i++)
    if (be->device_count(&n)) return (void *)1;
  return NULL;
}

Test(sim_faults, counters_hold_under_threads) {
  SKIP_ON_CUDA("instruments of the simulation");
  const ca_backend_t *be = sim_start(CONF, NULL);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(pthread_create(&t[i], NULL, count_calls, (void *)be), 0);
  for (int i = 0; i < 4; i++) {
    void *res;
    pthread_join(t[i], &res);
    cr_assert_null(res);
  }
  cr_assert_eq(ca_sim_calls(CA_OP_device_count), 4000);
}

// ----------------------------------------------------------------------------
// The k-th call
// ----------------------------------------------------------------------------

Test(sim_faults, the_kth_call_fails_and_changes_nothing) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 8 * g, &va));
  OK(be->create(0, 8 * g, &h));
  ca_sim_fail_nth(CA_OP_map, 3);
  OK(be->map(va, g, h, 0));
  OK(be->map(va + g, g, h, g));
  uint64_t v0 = ca_sim_violations();
  cr_assert_eq(be->map(va + 2 * g, g, h, 2 * g), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_sim_violations(), v0, "an injected failure is not a broken rule");
  cr_assert_eq(ca_sim_mapped_bytes(0), 2 * g, "the failed map mapped");
  OK(be->map(va + 2 * g, g, h, 2 * g)); /* the same call again: the place is free */
  OK(be->map(va + 3 * g, g, h, 3 * g));
  cr_assert_eq(ca_sim_errors(CA_OP_map), 1);
  cr_assert_eq(ca_sim_calls(CA_OP_map), 5);
}

Test(sim_faults, a_failed_create_takes_no_memory) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  ca_sim_fail_nth(CA_OP_create, 1);
  cr_assert_eq(be->create(0, 4 * g, &h), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_sim_physical_used(0), 0);
  cr_assert_eq(ca_sim_live_handles(0), 0);
  OK(be->create(0, 4 * g, &h));
  cr_assert_eq(ca_sim_physical_used(0), 4 * g);
}

Test(sim_faults, a_failed_release_keeps_the_handle) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  OK(be->create(0, g, &h));
  ca_sim_fail_nth(CA_OP_release, 1);
  cr_assert_eq(be->release(h), CUDA_ERROR_UNKNOWN);
  cr_assert_eq(ca_sim_live_handles(0), 1);
  OK(be->release(h));
  cr_assert_eq(ca_sim_live_handles(0), 0);
}

Test(sim_faults, zero_cancels) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  ca_sim_fail_nth(CA_OP_create, 1);
  ca_sim_fail_nth(CA_OP_create, 0);
  OK(be->create(0, g, &h));
}

Test(sim_faults, each_op_fails_with_its_own_error) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  ca_event_t e;
  OK(be->reserve(0, 2 * g, &va));
  OK(be->create(0, g, &h));
  OK(be->event_create(0, &e));
  for (int op = 0; op < CA_OP_COUNT; op++) ca_sim_fail_nth((ca_backend_op_t)op, 1);
  int n, c;
  size_t f, t;
  ca_device_props_t p;
  uintptr_t va2;
  ca_phys_t h2;
  ca_event_t e2;
  void *pinned = NULL;
  CUresult got[CA_OP_COUNT] = {
      [CA_OP_init] = be->init(&ca_config.sim),
      [CA_OP_device_count] = be->device_count(&n),
      [CA_OP_get_device] = be->get_device(&n),
      [CA_OP_set_device] = be->set_device(0),
      [CA_OP_device_props] = be->device_props(0, &p),
      [CA_OP_mem_info] = be->mem_info(0, &f, &t),
      [CA_OP_reserve] = be->reserve(0, g, &va2),
      [CA_OP_va_free] = be->va_free(va, 2 * g),
      [CA_OP_create] = be->create(0, g, &h2),
      [CA_OP_release] = be->release(h),
      [CA_OP_map] = be->map(va, g, h, 0),
      [CA_OP_unmap] = be->unmap(va, g),
      [CA_OP_set_access] = be->set_access(0, va, g),
      [CA_OP_event_create] = be->event_create(0, &e2),
      [CA_OP_event_record] = be->event_record(e, NULL),
      [CA_OP_event_query] = be->event_query(e),
      [CA_OP_event_sync] = be->event_sync(e),
      [CA_OP_event_destroy] = be->event_destroy(e),
      [CA_OP_stream_sync] = be->stream_sync(NULL),
      [CA_OP_stream_query] = be->stream_query(NULL),
      [CA_OP_device_sync] = be->device_sync(0),
      [CA_OP_is_capturing] = be->is_capturing(NULL, &c),
      [CA_OP_stream_device] = be->stream_device(NULL, &n),
      [CA_OP_host_alloc] = be->host_alloc(0, 4096, &pinned),
      [CA_OP_host_free] = be->host_free(&c, 4096),
  };
  for (int op = 0; op < CA_OP_COUNT; op++) {
    cr_assert_eq(got[op], injected(op), "%s returned %d, not its injected %d",
                 ca_backend_op_name((ca_backend_op_t)op), got[op], injected(op));
    cr_assert_eq(ca_sim_errors((ca_backend_op_t)op), 1);
  }
  /* every one of them changed nothing */
  cr_assert_eq(ca_sim_live_handles(0), 1);
  cr_assert_eq(ca_sim_pinned_used(), 0);
  cr_assert_eq(ca_sim_mapped_bytes(0), 0);
  OK(be->event_query(e));
  OK(be->map(va, g, h, 0));
  OK(be->unmap(va, g));
  OK(be->release(h));
  OK(be->va_free(va, 2 * g));
}

Test(sim_faults, configured_failures) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be =
      sim_start(CONF ",sim_fail:create@2,sim_fail:create@4,sim_fail:map@1", &g);
  ca_phys_t h[5];
  CUresult rc[5];
  for (int i = 0; i < 5; i++) rc[i] = be->create(0, g, &h[i]);
  cr_assert_eq(rc[0], CUDA_SUCCESS);
  cr_assert_eq(rc[1], CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(rc[2], CUDA_SUCCESS);
  cr_assert_eq(rc[3], CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(rc[4], CUDA_SUCCESS);
  uintptr_t va;
  OK(be->reserve(0, g, &va));
  cr_assert_eq(be->map(va, g, h[0], 0), CUDA_ERROR_OUT_OF_MEMORY);
  OK(be->map(va, g, h[0], 0));
}

Test(sim_faults, a_failed_init_can_be_retried) {
  SKIP_ON_CUDA("instruments of the simulation");
  cr_assert_eq(ca_config_load("backend:sim,sim_fail:init@1"), 0);
  int n;
  cr_assert_eq(ca_backend_sim.init(&ca_config.sim), CUDA_ERROR_NOT_INITIALIZED);
  cr_assert_eq(ca_backend_sim.device_count(&n), CUDA_ERROR_NOT_INITIALIZED,
               "the failed init started the device");
  OK(ca_backend_sim.init(&ca_config.sim));
  OK(ca_backend_sim.device_count(&n));
  cr_assert_eq(n, 1);
}

// ----------------------------------------------------------------------------
// A rate with a seed
// ----------------------------------------------------------------------------

#define DRAWS 400

/* The pattern of failures of DRAWS device_count calls. */
static int draw_pattern(const char *conf, double p, uint64_t seed, char *out) {
  const ca_backend_t *be = test_start_backend(conf); /* no other call: they may fail */
  if (p >= 0) ca_sim_fail_rate(CA_OP_device_count, p, seed);
  int fails = 0, n;
  for (int i = 0; i < DRAWS; i++) {
    CUresult rc = be->device_count(&n);
    cr_assert(rc == CUDA_SUCCESS || rc == CUDA_ERROR_NO_DEVICE, "unexpected %d", rc);
    out[i] = rc ? 'x' : '.';
    fails += rc != 0;
  }
  ca_sim_shutdown();
  return fails;
}

Test(sim_faults, a_seeded_rate_is_reproducible) {
  SKIP_ON_CUDA("instruments of the simulation");
  char a[DRAWS], b[DRAWS], c[DRAWS];
  int fa = draw_pattern(CONF, 0.5, 42, a);
  int fb = draw_pattern(CONF, 0.5, 42, b);
  draw_pattern(CONF, 0.5, 43, c);
  cr_assert_eq(fa, fb);
  cr_assert_arr_eq(a, b, DRAWS, "the same seed drew differently");
  cr_assert(memcmp(a, c, DRAWS) != 0, "another seed drew the same");
  cr_assert(fa > DRAWS * 3 / 10 && fa < DRAWS * 7 / 10, "%d failures of %d at p = 0.5", fa, DRAWS);
}

Test(sim_faults, configured_rate_is_reproducible) {
  SKIP_ON_CUDA("instruments of the simulation");
  char a[DRAWS], b[DRAWS];
  int fa = draw_pattern(CONF ",sim_fail_rate:0.25,sim_seed:7", -1, 0, a);
  int fb = draw_pattern(CONF ",sim_fail_rate:0.25,sim_seed:7", -1, 0, b);
  cr_assert_arr_eq(a, b, DRAWS);
  cr_assert(fa > DRAWS / 10 && fa < DRAWS * 4 / 10, "%d failures of %d at p = 0.25", fa, DRAWS);
  cr_assert_eq(fa, fb);
}

Test(sim_faults, rate_one_fails_all_and_zero_stops) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  ca_sim_fail_rate(CA_OP_COUNT, 1.0, 1);
  for (int i = 0; i < 10; i++) cr_assert_eq(be->create(0, g, &h), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_sim_physical_used(0), 0);
  OK(be->init(&ca_config.sim)); /* a rate over every op leaves init alone */
  ca_sim_fail_rate(CA_OP_COUNT, 0, 1);
  OK(be->create(0, g, &h));
}

// ----------------------------------------------------------------------------
// Latency
// ----------------------------------------------------------------------------

Test(sim_faults, latency_slows_the_op) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  ca_sim_set_latency(CA_OP_create, 20000);
  double t0 = now_ms();
  OK(be->create(0, g, &h));
  double dt = now_ms() - t0;
  cr_assert_geq(dt, 20.0, "create took %.3f ms with 20 ms of latency", dt);
  ca_sim_set_latency(CA_OP_create, 0);
  OK(be->release(h));
}

Test(sim_faults, configured_latency) {
  SKIP_ON_CUDA("instruments of the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF ",sim_latency:map@20000", &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, g, &va));
  OK(be->create(0, g, &h));
  double t0 = now_ms();
  OK(be->map(va, g, h, 0));
  double dt = now_ms() - t0;
  cr_assert_geq(dt, 20.0, "map took %.3f ms with 20 ms of latency", dt);
}
