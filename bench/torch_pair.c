/* PyTorch's pluggable-allocator entry points (cudalloc_torch_malloc,
 * cudalloc_torch_free) as PyTorch calls them: the library opened with
 * dlopen and the two functions found with dlsym, pairs of a window of 16
 * live blocks on one created stream of device 0. For instruction counts
 * under callgrind (docs/benchmarks.md, eighteenth session):
 *
 *   CUDALLOC_CONF=backend:sim valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     --toggle-collect=timed build/bench/torch_pair build/libcudalloc.so PAIRS tiny|gpu [preloaded]
 *
 * "Collected" / (PAIRS + 196,608) is a pair: the three warm-up passes of
 * the 65,536-size sequence run through the same function. With
 * "preloaded" (and LD_PRELOAD=build/libcudalloc.so) the library is the one
 * loaded at start, whose thread-locals are static; without, dlopen loads
 * it as PyTorch's CUDAPluggableAllocator does. Figures only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include "bench.h"

typedef void *(*torch_malloc_t)(ssize_t size, int device, void *stream);
typedef void (*torch_free_t)(void *ptr, ssize_t size, int device, void *stream);
typedef int (*stream_create_t)(void **stream);

#define WINDOW 16
#define SEQ BENCH_SEQ_N

static torch_malloc_t torch_malloc;
static torch_free_t torch_free;
static void *stream;
static uint32_t *sizes;
static void *live[WINDOW];
static ssize_t live_size[WINDOW];

__attribute__((noinline)) void timed(size_t first, size_t n) {
  for (size_t k = first; k < first + n; k++) {
    size_t i = k % WINDOW;
    if (live[i]) torch_free(live[i], live_size[i], 0, stream);
    live_size[i] = sizes[k % SEQ];
    if (!(live[i] = torch_malloc(live_size[i], 0, stream))) exit(4);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: torch_pair LIBRARY PAIRS tiny|gpu [preloaded]\n");
    return 2;
  }
  bool preloaded = argc > 4 && !strcmp(argv[4], "preloaded");
  void *lib = dlopen(argv[1], RTLD_NOW | (preloaded ? RTLD_NOLOAD : RTLD_LOCAL));
  if (!lib) {
    fprintf(stderr, "torch_pair: %s\n", dlerror());
    return 1;
  }
  torch_malloc = (torch_malloc_t)dlsym(lib, "cudalloc_torch_malloc");
  torch_free = (torch_free_t)dlsym(lib, "cudalloc_torch_free");
  stream_create_t stream_create = (stream_create_t)dlsym(lib, "cudaStreamCreate");
  if (!torch_malloc || !torch_free || !stream_create || stream_create(&stream)) return 1;
  sizes = bench_named_sizes(!strcmp(argv[3], "tiny") ? "tiny" : "gpu");
  if (!sizes) return 1;
  timed(0, 3 * SEQ);
  timed(3 * SEQ, strtoull(argv[2], NULL, 10));
  return 0;
}
