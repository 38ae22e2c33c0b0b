/* Fences on a real device (bench/gpu-check.sh, section fences): no block is
 * handed out again while a kernel still uses it. Run preloaded with a small
 * cap (CUDALLOC_CONF=memory_cap_mb:64), so that the allocator must reuse
 * the freed block, or wait, rather than grow.
 *
 *   fence_check [--expect-cudalloc]   with the flag: every block must be
 *                                     cudalloc's and each scenario must
 *                                     have reused memory (else it proved
 *                                     nothing); without it (the plain run,
 *                                     the driver's allocator) only the
 *                                     kernel's verdict counts
 *
 * The device-side check: a guard kernel fills its block with a pattern,
 * spins for GUARD_MS, then counts the words that changed. While it spins,
 * the block is freed and blocks of the same size are allocated and written
 * at once on another non-blocking stream; if one of them is the guarded
 * memory (same addresses, or its pages mapped elsewhere), the guard counts
 * the writes. A control run writes the guarded block itself during the
 * spin, and the guard must see it: otherwise the check cannot fail.
 *
 * Scenarios:
 *   free_nonblocking   cudaFree against work on a non-blocking stream
 *   free_blocking      cudaFree against work on a blocking stream
 *   async_across       cudaFreeAsync on one stream, cudaMallocAsync on another
 *   malloc_after_async cudaMalloc after cudaFreeAsync on the legacy stream
 * Each prints "fence_check: <name>: ok|FAIL ..."; last line "fence_check: ok"
 * (exit 0), or exit 1. */
#include "progs.h"

#include <cuda_runtime.h>
#include <unistd.h>

enum { GUARD_MS = 250, SETTLE_MS = 30, TRIES = 12 };
static const size_t BYTES = (size_t)8 << 20;

__device__ unsigned pattern(size_t i, unsigned seed) { return seed ^ (unsigned)(i * 2654435761u); }

__global__ void guard(unsigned *block, size_t n, unsigned seed, long long spin_ns, unsigned long long *bad) {
  size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
  for (size_t i = first; i < n; i += step) block[i] = pattern(i, seed);
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < spin_ns);
  unsigned long long changed = 0;
  const volatile unsigned *v = block;
  for (size_t i = first; i < n; i += step) changed += v[i] != pattern(i, seed);
  if (changed) atomicAdd(bad, changed);
}

static int expect_cudalloc;
static unsigned long long *bad_dev;
static cudaStream_t writer;   /* non-blocking: ordered after nothing */
static int failures;

static void start_guard(void *p, cudaStream_t s, unsigned seed) {
  CUDA_OK(cudaMemset(bad_dev, 0, sizeof *bad_dev));
  CUDA_OK(cudaDeviceSynchronize());
  guard<<<16, 256, 0, s>>>((unsigned *)p, BYTES / sizeof(unsigned), seed, (long long)GUARD_MS * 1000000, bad_dev);
  CUDA_OK(cudaGetLastError());
  usleep(SETTLE_MS * 1000);   /* the fill is done; the guard spins */
}

static unsigned long long guard_verdict(void) {
  unsigned long long bad = 0;
  CUDA_OK(cudaDeviceSynchronize());   /* a fault in the guard (unmapped pages) fails here */
  CUDA_OK(cudaMemcpy(&bad, bad_dev, sizeof bad, cudaMemcpyDeviceToHost));
  return bad;
}

static long long page_moves(void) {
  cudalloc_stats_t st;
  return cudalloc_stats_of(0, &st) ? st.num_page_moves.total : 0;
}

static int overlaps(const void *a, const void *b) {
  const char *x = (const char *)a, *y = (const char *)b;
  return x < y + BYTES && y < x + BYTES;
}

typedef void *(*alloc_fn)(cudaStream_t s);
typedef void (*free_fn)(void *p, cudaStream_t s);

static void *alloc_sync(cudaStream_t s) {
  void *p = NULL;
  (void)s;
  return cudaMalloc(&p, BYTES) == cudaSuccess ? p : NULL;
}
static void *alloc_async(cudaStream_t s) {
  void *p = NULL;
  return cudaMallocAsync(&p, BYTES, s) == cudaSuccess ? p : NULL;
}
static void free_sync(void *p, cudaStream_t s) { (void)s; CUDA_OK(cudaFree(p)); }
static void free_async(void *p, cudaStream_t s) { CUDA_OK(cudaFreeAsync(p, s)); }

static void check_owned(const char *name, const void *p) {
  if (expect_cudalloc && !owned_by_cudalloc(p)) {
    printf("fence_check: %s: FAIL: %p was not allocated by cudalloc\n", name, p);
    failures++;
  }
}

/* One scenario: p from first_alloc on guard_stream, guarded, freed with
 * first_free while the guard runs; then blocks from next_alloc on
 * next_stream, each written at once on the writer stream. */
static void scenario(const char *name, alloc_fn first_alloc, free_fn first_free, cudaStream_t guard_stream,
                     alloc_fn next_alloc, free_fn next_free, cudaStream_t next_stream) {
  void *p = first_alloc(guard_stream), *q[TRIES];
  int n = 0, same = 0;
  CHECK(p != NULL);
  check_owned(name, p);
  CUDA_OK(cudaStreamSynchronize(guard_stream));
  long long moves0 = page_moves();
  start_guard(p, guard_stream, 0x5eed0000u);
  first_free(p, guard_stream);
  cudaError_t last = cudaSuccess;
  while (n < TRIES && !same) {
    q[n] = next_alloc(next_stream);
    if (!q[n]) { last = cudaGetLastError(); break; }
    check_owned(name, q[n]);
    same = overlaps(p, q[n]);
    CUDA_OK(cudaMemsetAsync(q[n], 0xff, BYTES, writer));
    n++;
  }
  unsigned long long bad = guard_verdict();
  long long moved = page_moves() - moves0;
  for (int i = 0; i < n; i++) next_free(q[i], next_stream);
  CUDA_OK(cudaDeviceSynchronize());
  int reused = same || moved > 0;
  const char *verdict = bad ? "FAIL" : expect_cudalloc && !reused ? "FAIL" : "ok";
  printf("fence_check: %s: %s: %llu guarded words overwritten; %d blocks allocated while the guard ran, "
         "reuse: %s%s%s\n",
         name, verdict, bad, n, same ? "the same addresses" : moved > 0 ? "pages moved" : "none",
         last != cudaSuccess ? "; the last allocation failed: " : "",
         last != cudaSuccess ? cudaGetErrorName(last) : "");
  if (expect_cudalloc && !reused && !bad)
    printf("fence_check: %s: the cap did not force reuse, so this scenario proved nothing\n", name);
  failures += strcmp(verdict, "ok") != 0;
}

/* The guard must see a write into its block during its run. */
static void control(cudaStream_t s) {
  void *p = alloc_sync(s);
  CHECK(p != NULL);
  start_guard(p, s, 0xc0ffee00u);
  CUDA_OK(cudaMemsetAsync(p, 0xff, BYTES, writer));
  unsigned long long bad = guard_verdict();
  CUDA_OK(cudaFree(p));
  printf("fence_check: control: %s: the guard saw %llu overwritten words when its block was written during "
         "its run (must be > 0)\n", bad ? "ok" : "FAIL", bad);
  if (!bad) failures++;
}

int main(int argc, char **argv) {
  expect_cudalloc = argc > 1 && strcmp(argv[1], "--expect-cudalloc") == 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  cudaStream_t nb, blocking;
  CUDA_OK(cudaMalloc((void **)&bad_dev, sizeof *bad_dev));
  CUDA_OK(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreate(&blocking));
  control(nb);
  scenario("free_nonblocking", alloc_sync, free_sync, nb, alloc_sync, free_sync, nb);
  scenario("free_blocking", alloc_sync, free_sync, blocking, alloc_sync, free_sync, blocking);
  scenario("async_across", alloc_async, free_async, nb, alloc_async, free_async, writer);
  scenario("malloc_after_async", alloc_async, free_async, cudaStreamLegacy, alloc_sync, free_sync, nb);
  CUDA_OK(cudaStreamDestroy(nb));
  CUDA_OK(cudaStreamDestroy(blocking));
  CUDA_OK(cudaStreamDestroy(writer));
  CUDA_OK(cudaFree(bad_dev));
  if (failures) {
    printf("fence_check: %d check(s) failed\n", failures);
    return 1;
  }
  printf("fence_check: ok\n");
  return 0;
}
