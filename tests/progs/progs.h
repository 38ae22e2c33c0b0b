/* Helpers of the test programs: plain CUDA programs (shared libcudart) that
 * tests/test_shim.c runs under LD_PRELOAD=libcudalloc.so. Each checks its
 * results, prints "<name>: ok" and exits 0, or names the failed check on
 * stderr and exits 1. They keep to what a GPU runs too (device memory is
 * reached through cudaMemcpy), unless their comment says otherwise. */
#ifndef CUDALLOC_PROGS_H
#define CUDALLOC_PROGS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "cudalloc.h"

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* A runtime call that must return `want`. */
#define CUDA_EXPECT(call, want)                                                  \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != (want)) {                                                          \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__,     \
              __LINE__, #call, cudaGetErrorName(e_), cudaGetErrorString(e_),     \
              cudaGetErrorName(want));                                           \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)
#define CUDA_OK(call) CUDA_EXPECT(call, cudaSuccess)

/* true when the program runs on cudalloc's simulated device: the checks
 * that only the simulation can make (fork, manual event completion) run
 * there, and are skipped on a GPU. */
static inline int on_simulated_device(void) {
  const char *conf = getenv("CUDALLOC_CONF");
  return conf && strstr(conf, "backend:sim") != NULL;
}

/* true when fn lives in libcudalloc.so: cudalloc serves that entry point. */
static inline int served_by_cudalloc(const void *fn) {
  Dl_info info;
  return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libcudalloc");
}

/* cudalloc's statistics of dev, when the library is loaded (preloaded);
 * returns 0 when it is not. */
static inline int cudalloc_stats_of(int dev, cudalloc_stats_t *out) {
  typedef cudaError_t (*get_stats_t)(int, cudalloc_stats_t *);
  get_stats_t f;
  *(void **)&f = dlsym(RTLD_DEFAULT, "cudalloc_get_stats");
  if (!f) return 0;
  CHECK(f(dev, out) == cudaSuccess);
  return 1;
}

/* 1 when cudalloc is loaded and ptr lies in its memory. */
static inline int owned_by_cudalloc(const void *ptr) {
  int (*owns)(const void *);
  *(void **)&owns = dlsym(RTLD_DEFAULT, "cudalloc_owns");
  return owns && owns(ptr);
}

/* Fills n bytes with a pattern that depends on seed. */
static inline void pattern_fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31u + seed);
}

static inline int pattern_ok(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31u + seed)) return 0;
  return 1;
}

#endif /* CUDALLOC_PROGS_H */
