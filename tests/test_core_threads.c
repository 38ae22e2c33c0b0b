/* Several threads allocating and freeing at once (run under ThreadSanitizer
 * by `make test-tsan`), with blocks handed between threads, each thread on
 * its own stream, and statistics and checks read meanwhile. */
#include "core_testing.h"

#include <pthread.h>

#define THREADS 6
#define OPS 1500
#define SLOTS 32

typedef struct worker_s {
  int id;
  ca_stream_t stream;
  uint64_t rng;
  int failures;
} worker_t;

/* Blocks another thread may free: a handful of shared slots. */
static void *shared[8];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;

static void *work(void *arg) {
  worker_t *w = arg;
  if (ca_ready()) ca_state.be->set_device(0);   /* ca_ready() orders the read of be after init wrote it */
  unsigned char *mine[SLOTS] = {0};
  size_t sizes[SLOTS] = {0};
  for (int op = 0; op < OPS; op++) {
    int k = (int)(rng_next(&w->rng) % SLOTS);
    if (mine[k]) {
      if (mine[k][0] != (unsigned char)w->id || mine[k][sizes[k] - 1] != (unsigned char)w->id) w->failures++;
      cudaError_t rc = rng_next(&w->rng) % 2 ? cudalloc_free(mine[k], (cudaStream_t)w->stream) : cudalloc_free_sync(mine[k]);
      if (rc != cudaSuccess) w->failures++;
      mine[k] = NULL;
    } else {
      sizes[k] = 1 + rng_next(&w->rng) % (rng_next(&w->rng) % 4 ? 64 * 1024 : 4 * MiB);
      if (cudalloc_malloc((void **)&mine[k], sizes[k], (cudaStream_t)w->stream) != cudaSuccess) {
        w->failures++;
        continue;
      }
      mine[k][0] = mine[k][sizes[k] - 1] = (unsigned char)w->id;
    }
    if (op % 64 == 0) {   /* hand a block to whoever comes next */
      void *p = NULL;
      pthread_mutex_lock(&shared_lock);
      int s = (int)(rng_next(&w->rng) % 8);
      void *old = shared[s];
      if (!old && cudalloc_malloc(&p, 1000, NULL) == cudaSuccess) shared[s] = p;
      else shared[s] = NULL;
      pthread_mutex_unlock(&shared_lock);
      if (old && cudalloc_free_sync(old) != cudaSuccess) w->failures++;
    }
  }
  for (int k = 0; k < SLOTS; k++)
    if (mine[k]) cudalloc_free_sync(mine[k]);
  return NULL;
}

static void *observe(void *arg) {
  int *bad = arg;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    cudalloc_stats_t s;
    if (cudalloc_get_stats(0, &s) != cudaSuccess || s.allocated_bytes.current < 0) (*bad)++;
    if (cudalloc_check()) (*bad)++;
  }
  return NULL;
}

TestSuite(core_threads, .fini = core_fini, .timeout = 120);

Test(core_threads, many_threads_allocate_and_free_at_once) {
  core_start("sim_capacity_mb:1024");
  pthread_t t[THREADS], obs;
  worker_t w[THREADS];
  int bad = 0;
  pthread_create(&obs, NULL, observe, &bad);
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_t){.id = i + 1, .rng = 1000 + (uint64_t)i};
    w[i].stream = test_stream(i % 2);
    ca_stream_created(w[i].stream, i % 2);
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  pthread_join(obs, NULL);
  for (int s = 0; s < 8; s++)
    if (shared[s]) cudalloc_free_sync(shared[s]);
  for (int i = 0; i < THREADS; i++) cr_assert_eq(w[i].failures, 0, "thread %d saw %d failures", i, w[i].failures);
  cr_assert_eq(bad, 0, "the observer saw an inconsistent allocator %d times", bad);
  CHECK_CONSISTENT();
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.num_allocs.total, s.num_frees.total);
}

Test(core_threads, threads_start_the_allocator_together) {
  /* No cudalloc_init: the first calls race to start it from the environment. */
  setenv("CUDALLOC_CONF", test_on_cuda() ? "backend:cuda" : "backend:sim", 1);
  pthread_t t[THREADS];
  worker_t w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_t){.id = i + 1, .rng = 7 + (uint64_t)i};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int s = 0; s < 8; s++)
    if (shared[s]) cudalloc_free_sync(shared[s]);
  for (int i = 0; i < THREADS; i++) cr_assert_eq(w[i].failures, 0);
  CHECK_CONSISTENT();
}
