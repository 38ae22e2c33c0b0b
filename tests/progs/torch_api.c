/* PyTorch's way in: dlopen libcudalloc.so and call the two functions that
 * CUDAPluggableAllocator names, on every device (two at most).
 *
 *   torch_api [libcudalloc.so]   default: the preloaded copy
 *
 * The test runs it without preload on the simulated device with two
 * devices (CUDALLOC_CONF=backend:sim,sim_devices:2). */
#include "progs.h"

#include <sys/types.h>

#define MiB ((size_t)1 << 20)

typedef void *(*torch_malloc_t)(ssize_t, int, cudaStream_t);
typedef void (*torch_free_t)(void *, ssize_t, int, cudaStream_t);
typedef cudaError_t (*get_stats_t)(int, cudalloc_stats_t *);
typedef cudaError_t (*int_query_t)(int *);
typedef cudaError_t (*memset_t)(void *, int, size_t);
typedef cudaError_t (*stream_create_t)(cudaStream_t *);

static void *lib;

/* An entry point of the library itself (its cudaGetDevice serves the
 * simulated device, or forwards to the real runtime). */
static void *entry(const char *name) {
  void *f = dlsym(lib, name);
  CHECK(f != NULL);
  return f;
}

static void *open_library(int argc, char **argv) {
  Dl_info info;
  const char *path = argc > 1 ? argv[1] : NULL;
  void *preloaded = dlsym(RTLD_DEFAULT, "cudalloc_torch_malloc");
  if (!path && preloaded && dladdr(preloaded, &info)) path = info.dli_fname;
  if (!path) {
    fprintf(stderr, "torch_api: name libcudalloc.so, or preload it\n");
    exit(1);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) fprintf(stderr, "torch_api: %s\n", dlerror());
  CHECK(h != NULL);
  return h;
}

int main(int argc, char **argv) {
  lib = open_library(argc, argv);
  torch_malloc_t tmalloc;
  torch_free_t tfree;
  get_stats_t stats;
  int_query_t get_device, device_count;
  memset_t fill;
  *(void **)&tmalloc = entry("cudalloc_torch_malloc");
  *(void **)&tfree = entry("cudalloc_torch_free");
  *(void **)&stats = entry("cudalloc_get_stats");
  *(void **)&get_device = entry("cudaGetDevice");
  *(void **)&device_count = entry("cudaGetDeviceCount");
  *(void **)&fill = entry("cudaMemset");

  int ndev = 0, dev = -1;
  CHECK(device_count(&ndev) == cudaSuccess && ndev >= 1);
  if (ndev > 2) ndev = 2;
  void *p[2];
  for (int d = 0; d < ndev; d++) {
    p[d] = tmalloc((ssize_t)((3 + 2 * (size_t)d) * MiB), d, NULL);
    CHECK(p[d] != NULL);
    CHECK(fill(p[d], 0xab, (3 + 2 * (size_t)d) * MiB) == cudaSuccess);
  }
  CHECK(get_device(&dev) == cudaSuccess && dev == 0);   /* restored after device 1 */
  for (int d = 0; d < ndev; d++) {
    cudalloc_stats_t st;
    CHECK(stats(d, &st) == cudaSuccess);
    CHECK(st.requested_bytes.current == (int64_t)((3 + 2 * (size_t)d) * MiB));
  }
  CHECK(tmalloc(-1, 0, NULL) == NULL);
  CHECK(tmalloc((ssize_t)1 << 60, 0, NULL) == NULL);   /* PyTorch reports out of memory */

  /* A block freed on its allocation stream: PyTorch's free says nothing of
   * the side streams that used it (record_stream does not reach a pluggable
   * allocator), so by default it waits like cudaFree's; torch_free:stream
   * reuses it at once on that stream. */
  stream_create_t stream_create;
  *(void **)&stream_create = entry("cudaStreamCreate");
  cudaStream_t s;
  CHECK(stream_create(&s) == cudaSuccess);
  void *a = tmalloc((ssize_t)MiB, 0, s);
  CHECK(a != NULL);
  tfree(a, (ssize_t)MiB, 0, s);
  void *b = tmalloc((ssize_t)MiB, 0, s);
  CHECK(b != NULL);
  printf("torch_api: reused at once on its stream: %s\n", a == b ? "yes" : "no");
  tfree(b, (ssize_t)MiB, 0, s);

  for (int d = ndev - 1; d >= 0; d--) tfree(p[d], (ssize_t)((3 + 2 * (size_t)d) * MiB), d, NULL);
  for (int d = 0; d < ndev; d++) {
    cudalloc_stats_t st;
    CHECK(stats(d, &st) == cudaSuccess && st.num_live_blocks.current == 0);
  }
  printf("torch_api: ok (%d device%s)\n", ndev, ndev > 1 ? "s" : "");
  return 0;
}
