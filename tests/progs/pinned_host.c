/* Pinned host memory under the preload: every entry point, the program's
 * malloc left alone, no malloc on the hot path, async copies in flight.
 *
 *   pinned_host            the checks but the copies'
 *   pinned_host copies     async copies in flight (simulated device with
 *                          sim_events:manual)
 *   pinned_host malloc     only that malloc is glibc's (run with another
 *                          allocator preloaded too, it must fail)
 *
 * The program counts its own malloc calls: it defines malloc, calloc,
 * realloc and free (forwarding to glibc's __libc_* functions), which the
 * dynamic linker binds every library's calls to, cudalloc's included.
 */
#include "progs.h"

#include <cuda.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static volatile unsigned long mallocs;   /* calls of the program's malloc family */

void *malloc(size_t n) { mallocs++; return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { mallocs++; return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { mallocs++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

/* The malloc the process resolves, from the program's view and from the
 * next library's (RTLD_NEXT: what a library that calls malloc gets after
 * this program): glibc's (or, in a sanitizer build, the sanitizer
 * runtime's, CUDALLOC_SAN_RUNTIME), not jemalloc's. */
static void malloc_is_glibcs(void) {
  Dl_info info;
  void *next = dlsym(RTLD_NEXT, "malloc");
  CHECK(next && dladdr(next, &info) && info.dli_fname);
  /* a sanitizer build preloads its runtime first, which brings its malloc */
  const char *san = getenv("CUDALLOC_SAN_RUNTIME"), *base = san ? strrchr(san, '/') : NULL;
  int sanitizer = base && base[1] && strstr(info.dli_fname, base + 1);
  if (!strstr(info.dli_fname, "libc.so") && !sanitizer) {
    fprintf(stderr, "pinned_host: malloc after this program is %s's, not glibc's\n", info.dli_fname);
    exit(1);
  }
  CHECK(dlsym(RTLD_DEFAULT, "mallocx") == NULL || !served_by_cudalloc(dlsym(RTLD_DEFAULT, "mallocx")));
  CHECK(dlsym(RTLD_DEFAULT, "mallctl") == NULL || !served_by_cudalloc(dlsym(RTLD_DEFAULT, "mallctl")));
  CHECK(dlsym(RTLD_DEFAULT, "je_malloc") == NULL);
}

typedef CUresult (*alloc_host_t)(void **, size_t);
typedef CUresult (*host_alloc_t)(void **, size_t, unsigned);
typedef CUresult (*free_host_t)(void *);

/* Every entry point: the pointer is cudalloc's, and writable. */
static void entry_points(void) {
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
  CUDA_OK(cudaMallocHost(&a, 1000));
  CUDA_OK(cudaHostAlloc(&b, 5 << 20, cudaHostAllocPortable | cudaHostAllocMapped));
  alloc_host_t cu_alloc_host = (alloc_host_t)dlsym(RTLD_DEFAULT, "cuMemAllocHost_v2");
  host_alloc_t cu_host_alloc = (host_alloc_t)dlsym(RTLD_DEFAULT, "cuMemHostAlloc");
  free_host_t cu_free_host = (free_host_t)dlsym(RTLD_DEFAULT, "cuMemFreeHost");
  CHECK(served_by_cudalloc((void *)cu_alloc_host) && served_by_cudalloc((void *)cu_host_alloc));
  CHECK(cu_alloc_host(&c, 4096) == CUDA_SUCCESS);
  CHECK(cu_host_alloc(&d, 12345, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
  CHECK(cu_alloc_host(&e, 0) == CUDA_ERROR_INVALID_VALUE && cu_alloc_host(NULL, 16) == CUDA_ERROR_INVALID_VALUE);
  void *all[] = {a, b, c, d};
  for (int i = 0; i < 4; i++) {
    CHECK(all[i] != NULL);
    memset(all[i], i, 1000);
  }
  CHECK((uintptr_t)b % 4096 == 0 && (uintptr_t)c % 4096 == 0);
  CUDA_OK(cudaFreeHost(a));
  CUDA_OK(cudaFreeHost(c));   /* either API frees either's blocks */
  CHECK(cu_free_host(b) == CUDA_SUCCESS && cu_free_host(d) == CUDA_SUCCESS);
  CHECK(cu_free_host(d) == CUDA_ERROR_INVALID_VALUE);
}

static void bad_inputs(void) {
  void *p = NULL, *keep = NULL;
  CUDA_EXPECT(cudaMallocHost(NULL, 64), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaHostAlloc(&p, 64, 0x40), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaHostAlloc(&p, (size_t)1 << 62, 0), cudaErrorMemoryAllocation);
  CUDA_OK(cudaMallocHost(&keep, 256));
  CUDA_OK(cudaMallocHost(&p, 256));
  CUDA_OK(cudaFreeHost(p));
  CUDA_EXPECT(cudaFreeHost(p), cudaErrorInvalidValue);          /* double free */
  CUDA_EXPECT(cudaFreeHost((char *)keep + 8), cudaErrorInvalidValue);
  void *heap = malloc(64);
  CUDA_EXPECT(cudaFreeHost(heap), cudaErrorInvalidValue);       /* foreign: the "real" free says no */
  free(heap);
  CUDA_OK(cudaFreeHost(NULL));
  if (on_simulated_device()) CUDA_EXPECT(cudaHostAlloc(&p, 64, cudaHostAllocWriteCombined), cudaErrorNotSupported);
  CUDA_OK(cudaFreeHost(keep));
  (void)cudaGetLastError();
}

/* Cached pairs after a warm-up: no call of the program's malloc. */
static void no_malloc_on_the_hot_path(void) {
  unsigned long before = mallocs;
  free(malloc(16));
  CHECK(mallocs == before + 1);   /* the counter counts */
  void *dev = NULL, *host = NULL;
  for (int round = 0; round < 2; round++) {
    before = mallocs;
    for (int i = 0; i < 5000; i++) {
      CUDA_OK(cudaMalloc(&dev, 4096 + (size_t)(i % 7) * 512));
      CUDA_OK(cudaFree(dev));
      CUDA_OK(cudaHostAlloc(&host, 100 + (size_t)(i % 13) * 1000, 0));
      CUDA_OK(cudaFreeHost(host));
    }
  }
  if (mallocs != before) {
    fprintf(stderr, "pinned_host: %lu calls of the program's malloc in 10000 cached pairs\n", mallocs - before);
    exit(1);
  }
}

/* A block freed while an async copy reads it is not handed out until the
 * copy's stream has completed (manual events: the stream completes when
 * the program synchronizes it). */
static void copies_in_flight(void) {
  if (!on_simulated_device()) return;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  void *dev = NULL, *p = NULL, *q[4];
  CUDA_OK(cudaMalloc(&dev, 8192));
  CUDA_OK(cudaHostAlloc(&p, 8192, 0));
  pattern_fill(p, 8192, 3);
  CUDA_OK(cudaMemcpyAsync(dev, p, 8192, cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaFreeHost(p));
  for (int i = 0; i < 4; i++) {
    CUDA_OK(cudaHostAlloc(&q[i], 8192, 0));
    CHECK(q[i] != p);
  }
  for (int i = 0; i < 4; i++) CUDA_OK(cudaFreeHost(q[i]));
  CUDA_OK(cudaStreamSynchronize(s));
  int reused = 0;
  for (int i = 0; i < 4; i++) {
    CUDA_OK(cudaHostAlloc(&q[i], 8192, 0));
    reused |= q[i] == p;
  }
  CHECK(reused);
  for (int i = 0; i < 4; i++) CUDA_OK(cudaFreeHost(q[i]));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

int main(int argc, char **argv) {
  malloc_is_glibcs();
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "copies") == 0) {
    copies_in_flight();
  } else if (strcmp(mode, "malloc") != 0) {
    entry_points();
    bad_inputs();
    no_malloc_on_the_hot_path();
  }
  printf("pinned_host: ok\n");
  return 0;
}
