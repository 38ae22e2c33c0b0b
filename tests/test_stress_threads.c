/* Threads stress: blocks cross threads and streams. Every worker allocates
 * on its own stream and writes a cookie (its id, a sequence number, a
 * pattern) over the head and tail of each block; blocks are handed to
 * other threads through a mailbox and freed there, on the freeing
 * thread's stream (a cross-stream free) or with cudaFree's promise. A
 * "device" thread completes the simulated streams' work at random, so
 * fences seal and complete while the workers run. A cookie that changed
 * between allocation and free means two live blocks overlapped. Run under
 * ThreadSanitizer and AddressSanitizer by make test-tsan / test-asan. */
#include "core_testing.h"

#include <pthread.h>

#define WORKERS 4
#define ROUNDS 4000
#define MAILBOX 16
#define COOKIE 48

typedef struct cookie_s {
  uint32_t owner, seq;
  size_t size;
} cookie_t;

static struct {
  pthread_mutex_t lock;
  void *slot[MAILBOX];
} mailbox = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ca_stream_t streams[WORKERS];
static int running;

static size_t cookie_len(size_t size) { return size < COOKIE ? size : COOKIE; }

static void stamp(unsigned char *p, size_t size, uint32_t owner, uint32_t seq) {
  cookie_t c = {owner, seq, size};
  size_t n = cookie_len(size);
  memset(p, (int)(owner * 17 + seq), n);
  memset(p + size - n, (int)(owner * 17 + seq), n);
  if (size >= sizeof c) memcpy(p, &c, sizeof c);
}

/* true when the block still holds the cookie stamped at allocation. */
static bool intact(const unsigned char *p, size_t size) {
  cookie_t c;
  size_t n = cookie_len(size);
  if (size < sizeof c) return true;   /* too small to name its owner */
  memcpy(&c, p, sizeof c);
  if (c.size != size) return false;
  unsigned char v = (unsigned char)(c.owner * 17 + c.seq);
  for (size_t i = sizeof c; i < n; i++)
    if (p[i] != v) return false;
  for (size_t i = size - n > sizeof c ? size - n : sizeof c; i < size; i++)
    if (p[i] != v) return false;
  return true;
}

typedef struct worker_s {
  uint32_t id;
  uint64_t rng;
  int broken, failed;
} worker_t;

static size_t block_size(uint64_t r) { return r % 8 ? 24 + (r >> 8) % 60000 : (1u << 20) + (r >> 8) % (3u << 20); }

static void release(worker_t *w, void *p, uint64_t r) {
  cookie_t c;
  memcpy(&c, p, sizeof c);
  if (!intact(p, c.size)) w->broken++;
  cudaError_t err = r % 3 ? cudalloc_free(p, (cudaStream_t)streams[w->id]) : cudalloc_free_sync(p);
  if (err != cudaSuccess) w->failed++;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  for (uint32_t seq = 0; seq < ROUNDS; seq++) {
    uint64_t r = rng_next(&w->rng);
    size_t size = block_size(r);
    void *p = NULL;
    if (cudalloc_malloc(&p, size, (cudaStream_t)streams[w->id]) != cudaSuccess) {
      w->failed++;
      continue;
    }
    stamp(p, size, w->id, seq);
    pthread_mutex_lock(&mailbox.lock);   /* swap with whatever another thread left */
    int k = (int)((r >> 40) % MAILBOX);
    void *other = mailbox.slot[k];
    mailbox.slot[k] = p;
    pthread_mutex_unlock(&mailbox.lock);
    if (other) release(w, other, r >> 20);
  }
  return NULL;
}

static void *device(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  while (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) {
    ca_sim_stream_complete(streams[rng_next(&rng) % WORKERS]);
    if (rng_next(&rng) % 8 == 0) ca_sim_stream_complete(CA_STREAM_LEGACY);
    sched_yield();
  }
  return NULL;
}

TestSuite(stress_threads, .fini = cudalloc_shutdown, .timeout = 300);

static void stress(const char *conf) {
  SKIP_ON_CUDA("the simulated device's manual events");
  core_start(conf);
  for (int i = 0; i < WORKERS; i++) {
    streams[i] = test_stream(i % 2);
    ca_stream_created(streams[i], i % 2);
  }
  worker_t w[WORKERS];
  pthread_t t[WORKERS], dev;
  __atomic_store_n(&running, 1, __ATOMIC_RELEASE);
  pthread_create(&dev, NULL, device, (void *)(uintptr_t)99);
  for (int i = 0; i < WORKERS; i++) {
    w[i] = (worker_t){.id = (uint32_t)i, .rng = 500 + (uint64_t)i};
    pthread_create(&t[i], NULL, worker, &w[i]);
  }
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
  pthread_join(dev, NULL);
  worker_t last = {.id = 0};
  for (int k = 0; k < MAILBOX; k++)
    if (mailbox.slot[k]) release(&last, mailbox.slot[k], 1), mailbox.slot[k] = NULL;
  for (int i = 0; i < WORKERS; i++) {
    cr_expect_eq(w[i].broken, 0, "worker %d found %d blocks whose cookie changed", i, w[i].broken);
    cr_expect_eq(w[i].failed, 0, "worker %d saw %d failed calls", i, w[i].failed);
  }
  cr_assert_eq(last.broken + last.failed, 0);
  CHECK_CONSISTENT();
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.num_allocs.total, s.num_frees.total);
}

Test(stress_threads, blocks_cross_threads_and_streams) { stress("sim_events:manual,sim_capacity_mb:512"); }

Test(stress_threads, blocks_cross_threads_and_streams_classic) {
  stress("sim_events:manual,sim_capacity_mb:512,expandable_segments:false");
}

/* The cookie check is what finds overlap: a cookie overwritten by another
 * block's stamp is reported. */
Test(stress_threads, an_overwritten_cookie_is_caught) {
  unsigned char a[256];
  stamp(a, sizeof a, 1, 2);
  cr_assert(intact(a, sizeof a));
  stamp(a + 128, 128, 3, 4);   /* a second block laid over the tail */
  cr_assert_not(intact(a, sizeof a));
}
