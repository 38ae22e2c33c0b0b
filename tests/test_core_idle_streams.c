/* cudaFree's fence and idle non-blocking streams (alloc/fence.c idle()):
 * a non-blocking stream whose work is all done when the epoch is sealed
 * gets a stream query instead of an event (nothing issued before the free
 * can still touch the block); one with work pending gets its event, and
 * the block waits for it. The reuse oracle checks every hand-out, and the
 * planted fault busy_streams_idle (every stream believed idle) is caught. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's kernels are touches"); }
TestSuite(core_idle_streams, .init = sim_only, .fini = core_fini);

static void *alloc_sync(size_t size) {
  void *p = NULL;
  cr_assert_eq(ca_malloc(&p, size, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);   /* as cudaMalloc */
  return p;
}

static ca_stream_t nonblocking_stream(void) {
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, 1), CUDA_SUCCESS);
  cr_assert_eq(ca_stream_created(s, true), CUDA_SUCCESS);   /* as the shim reports it */
  return s;
}

/* A block a kernel on the legacy stream still writes (and, with busy, one
 * on the non-blocking stream nb too), cudaFree'd and sealed; returns the
 * events the seal recorded. */
static int64_t freed_and_sealed(void *p, ca_stream_t nb, bool busy) {
  TOUCH(CA_STREAM_LEGACY, p, MiB, true);
  if (busy) TOUCH(nb, p, MiB, true);
  int64_t r0 = stats0().backend_event_record.total;
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();   /* seals cudaFree's queue */
  return stats0().backend_event_record.total - r0;
}

Test(core_idle_streams, an_idle_stream_gets_no_event) {
  core_start("sim_events:manual");
  ca_stream_t nb = nonblocking_stream();
  void *p = alloc_sync(3 * MiB);
  cr_assert_eq(freed_and_sealed(p, nb, false), 1, "one event, on the legacy stream");
  cr_assert_neq(alloc_sync(3 * MiB), p, "not before the legacy stream's kernel is done");
  ca_sim_stream_complete(NULL);
  seal_and_poll();
  cr_assert_eq(alloc_sync(3 * MiB), p, "back once it is");
  CHECK_CONSISTENT();
}

/* With nb's kernel still writing p once the legacy stream is done: true
 * when p was not handed out before nb was done too. */
static bool waits_for_the_busy_stream(bool believe_idle) {
  core_start("sim_events:manual");
  ca_debug.busy_streams_idle = believe_idle;
  ca_stream_t nb = nonblocking_stream();
  void *p = alloc_sync(3 * MiB);
  int64_t records = freed_and_sealed(p, nb, true);
  if (!believe_idle) cr_assert_eq(records, 2, "an event on the legacy stream and one on nb");
  ca_sim_stream_complete(NULL);   /* the legacy stream is done, nb is not */
  seal_and_poll();
  capture_t cap;   /* the oracle's line, when it fires */
  capture_begin(&cap);
  bool safe = alloc_sync(3 * MiB) != p;
  char out[1024];
  capture_end(&cap, out, sizeof out);
  ca_sim_complete_all();
  seal_and_poll();
  if (safe) cr_assert_eq(alloc_sync(3 * MiB), p, "back once nb is done");
  if (!safe) {   /* the oracle agrees: p was handed out under nb's kernel */
    cr_assert_gt(ca_sim_oracle_violations(), 0, "the reuse oracle missed the early reuse");
    ca_sim_oracle_reset();
  }
  CHECK_CONSISTENT();
  return safe;
}

Test(core_idle_streams, a_busy_stream_gets_its_event) { cr_assert(waits_for_the_busy_stream(false)); }

Test(core_idle_streams, believing_every_stream_idle_is_caught) {
  cr_assert_not(waits_for_the_busy_stream(true), "with busy streams taken for idle, p comes back under nb's kernel");
}

/* A query the device cannot answer (input tried: the query failing once,
 * as a lost context would) records the event after all. */
Test(core_idle_streams, a_failed_query_records_the_event) {
  core_start("sim_events:manual");
  ca_stream_t nb = nonblocking_stream();
  void *p = alloc_sync(3 * MiB);
  ca_sim_fail_nth(CA_OP_stream_query, 1);
  cr_assert_eq(freed_and_sealed(p, nb, false), 2, "the legacy stream's event and nb's");
  CHECK_CONSISTENT();
}
