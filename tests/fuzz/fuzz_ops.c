/* libFuzzer target: operation sequences against a tiny simulated device
 * whose work lags behind (up to 64 calls) unless the sequence completes it, with backend faults
 * injected at chosen calls. After every operation: the invariant checker
 * is clean, no two live blocks overlap, and every live block still holds
 * what was written to it, and the simulated device's reuse oracle saw no
 * block handed out while a kernel (a touch on its stream, made at every
 * allocation) could still write it. Allocations are cudalloc_malloc's, and one in
 * four PyTorch's uncached kind. After the sequence, freeing everything, letting
 * the device finish and emptying the cache leaves no physical handle and
 * no mapping behind. Any break aborts, which libFuzzer reports. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "core.h"
#include "cudalloc.h"

#define SLOTS 48
#define NSTREAMS 4

#define REQUIRE(cond, ...)                                                   \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_ops: broken: %s: ", #cond);                      \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
      abort();                                                               \
    }                                                                        \
  } while (0)

typedef struct slot_s {
  unsigned char *p;
  size_t size;
  int stream;
  unsigned char tag;
} slot_t;

typedef struct run_s {
  const uint8_t *data;
  size_t size, at;
  slot_t slot[SLOTS];
  cudaStream_t streams[NSTREAMS];   /* [0]: the legacy stream */
} run_t;

static unsigned next(run_t *r) { return r->at < r->size ? r->data[r->at++] : 0; }

static size_t pick_size(run_t *r) {
  unsigned a = next(r), b = next(r);
  switch (a % 6) {
  case 0: return 1 + b % 64;
  case 1: return 1 + (size_t)b * 37;
  case 2: return 4096 + (size_t)b * 1021;
  case 3: return (64u << 10) + (size_t)b * 8191;
  case 4: return (1u << 20) + (size_t)b * 16381;
  default: return (size_t)(1 + b % 8) << 20;
  }
}

/* The head and the tail of a block carry its tag. */
static size_t probe(size_t size) { return size < 64 ? size : 64; }

static void stamp(slot_t *s) {
  memset(s->p, s->tag, probe(s->size));
  memset(s->p + s->size - probe(s->size), s->tag, probe(s->size));
}

static void verify(const slot_t *s, int k) {
  for (size_t i = 0; i < probe(s->size); i++) {
    REQUIRE(s->p[i] == s->tag, "slot %d: head byte %zu changed", k, i);
    REQUIRE(s->p[s->size - 1 - i] == s->tag, "slot %d: tail byte %zu changed", k, i);
  }
}

static void check_all(run_t *r) {
  REQUIRE(cudalloc_check() == 0, "cudalloc_check");
  REQUIRE(ca_sim_oracle_violations() == 0, "the reuse oracle: %s", ca_sim_oracle_report(0));
  for (int i = 0; i < SLOTS; i++) {
    slot_t *a = &r->slot[i];
    if (!a->p) continue;
    verify(a, i);
    for (int j = i + 1; j < SLOTS; j++) {
      slot_t *b = &r->slot[j];
      if (b->p) REQUIRE(a->p + a->size <= b->p || b->p + b->size <= a->p, "slots %d and %d overlap", i, j);
    }
  }
}

static void do_alloc(run_t *r, int k) {
  slot_t *s = &r->slot[k];
  if (s->p) return;
  size_t size = pick_size(r);
  int stream = (int)(next(r) % NSTREAMS);
  void *p = NULL;
  /* one in four as PyTorch's blocks are by default: stream-ordered, outside
   * the front cache (CA_ALLOC_ASYNC_UNCACHED); every free below may meet it */
  cudaError_t err = next(r) % 4 == 0
                        ? ca_cuda_error(ca_malloc_on(-1, &p, size, (ca_stream_t)r->streams[stream],
                                                     CA_ALLOC_ASYNC_UNCACHED, NULL))
                        : cudalloc_malloc(&p, size, r->streams[stream]);
  if (err != cudaSuccess) {
    /* out of memory, or the error of an injected fault as the runtime names it */
    REQUIRE(err == cudaErrorMemoryAllocation || err == cudaErrorLaunchFailure || err == cudaErrorUnknown ||
                err == cudaErrorInvalidValue || err == cudaErrorDeviceUninitialized ||
                err == cudaErrorInvalidResourceHandle,
            "malloc of %zu failed with %d", size, (int)err);
    return;
  }
  REQUIRE(p != NULL, "malloc of %zu returned NULL", size);
  *s = (slot_t){p, size, stream, (unsigned char)(1 + (r->at & 0xfe))};
  stamp(s);
  /* a kernel on the block's stream writes it: pending work the oracle watches */
  REQUIRE(ca_sim_touch((ca_stream_t)r->streams[stream], p, size, 1) == CUDA_SUCCESS, "touch");
}

static void do_free(run_t *r, int k, unsigned how) {
  slot_t *s = &r->slot[k];
  if (!s->p) return;
  verify(s, k);
  cudaError_t err;
  if (how == 1) {   /* freed on another stream once its own work is done, as a program must */
    ca_sim_stream_complete((ca_stream_t)r->streams[s->stream]);
    err = cudalloc_free(s->p, r->streams[(s->stream + 1) % NSTREAMS]);
  } else {
    err = how == 0 ? cudalloc_free(s->p, r->streams[s->stream]) : cudalloc_free_sync(s->p);
  }
  REQUIRE(err == cudaSuccess, "free of slot %d failed with %d", k, (int)err);
  s->p = NULL;
}

static void do_fault(run_t *r) {
  ca_backend_op_t op = (ca_backend_op_t)(1 + next(r) % (CA_OP_COUNT - 1));   /* never init */
  ca_sim_fail_nth(op, 1 + next(r) % 8);
}

static void step(run_t *r) {
  unsigned op = next(r);
  int k = (int)(next(r) % SLOTS);
  switch (op % 10) {
  case 0: case 1: case 2: do_alloc(r, k); break;
  case 3: case 4: do_free(r, k, op / 10 % 3); break;
  case 5: ca_sim_stream_complete(r->streams[next(r) % NSTREAMS]); break;
  case 6: cudalloc_step(); break;
  case 7: cudalloc_empty_cache(); break;
  case 8: do_fault(r); break;
  default: ca_sim_complete_all(); break;
  }
  check_all(r);
}

/* Everything freed, the device idle and the cache emptied: nothing held.
 * The step seals the frees' fences (records their events) first, so that
 * the device's finishing completes them: empty_cache itself never waits. */
static void drain(run_t *r) {
  for (int op = 0; op < CA_OP_COUNT; op++) ca_sim_fail_nth((ca_backend_op_t)op, 0);
  for (int k = 0; k < SLOTS; k++)
    if (r->slot[k].p) do_free(r, k, 2);
  cudalloc_step();
  ca_sim_complete_all();
  REQUIRE(cudalloc_empty_cache() == cudaSuccess, "empty_cache");
  check_all(r);
  REQUIRE(ca_sim_live_handles(0) == 0, "%d physical handles left after emptying the cache",
          ca_sim_live_handles(0));
  REQUIRE(ca_sim_mapped_bytes(0) == 0, "%zu bytes left mapped after emptying the cache", ca_sim_mapped_bytes(0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_t r = {.data = data, .size = size};
  const char *modes[] = {"expandable_segments:true", "expandable_segments:false"};
  /* the front cache as shipped, with its large classes on, or small enough
   * that its caps refuse and trim (a cap for each of two streams) */
  const char *caches[] = {"", ",thread_cache_large_mb:4", ",thread_cache_kb:16,thread_cache_streams:2", ""};
  unsigned first = size ? data[0] : 0;
  char conf[320];
  snprintf(conf, sizeof conf,
           "backend:sim,sim_capacity_mb:24,sim_granularity_kb:64,sim_events:lag,sim_lag_ops:64,quiet:true,"
           "track:off,oom_report:off,%s%s",   /* out-of-memory is an expected outcome: no report files */
           modes[first & 1], caches[first >> 1 & 3]);
  REQUIRE(cudalloc_init(conf) == cudaSuccess, "init");
  ca_sim_thread_init(); /* a runtime thread's context: the default streams need one */
  r.streams[0] = 0;
  for (int i = 1; i < NSTREAMS; i++)
    REQUIRE(ca_sim_stream_create((ca_stream_t *)&r.streams[i], i == NSTREAMS - 1) == CUDA_SUCCESS, "stream");
  /* the non-blocking stream is registered as the shim registers it (or as a
   * program linked with the library does, cudalloc_stream_register) */
  REQUIRE(cudalloc_stream_register(r.streams[NSTREAMS - 1], cudaStreamNonBlocking) == cudaSuccess, "register");
  r.at = 1;
  while (r.at < r.size) step(&r);
  drain(&r);
  cudalloc_stream_unregister(r.streams[NSTREAMS - 1]);
  for (int i = 1; i < NSTREAMS; i++) ca_sim_stream_destroy(r.streams[i]);
  cudalloc_shutdown();
  return 0;
}
