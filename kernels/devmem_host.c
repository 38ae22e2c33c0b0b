/* The device memory layer on host malloc: for the unit tests and
 * build/workload-host, which run the model with the C references and no
 * CUDA at all. It has no cache, so "reserved" is what is live. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"

/* A nominal device size, so that dev_mem_info answers like a driver. */
#define HOST_DEVICE_BYTES ((size_t)1 << 30)

/* cudaMalloc's contract on host memory: 256-byte alignment. */
static cudaError_t host_malloc(void **ptr, size_t bytes) {
  return posix_memalign(ptr, 256, bytes ? bytes : 1) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t (*const dev_malloc_fn)(void **ptr, size_t bytes) = host_malloc;

void dev_alloc_failed(cudaError_t err, size_t bytes, const char *file, int line) {
  fprintf(stderr, "devmem: out of host memory for %zu bytes at %s:%d (%d)\n", bytes, file, line,
          (int)err);
  exit(EXIT_FAILURE);
}

void dev_free_at(void *p, const char *file, int line) {
  if (!p) return;
  dev_track_free(p, file, line);
  free(p);
}

void dev_upload(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

void dev_use_side_stream(void) {}   /* no streams on host memory */

void dev_download(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

void dev_zero(void *dst, size_t bytes) { memset(dst, 0, bytes); }

void dev_sync(void) {}

int dev_mem_info(size_t *free_bytes, size_t *total_bytes) {
  dev_counters_t c;
  dev_counters(&c);
  *total_bytes = HOST_DEVICE_BYTES;
  *free_bytes = c.live_bytes < HOST_DEVICE_BYTES ? HOST_DEVICE_BYTES - c.live_bytes : 0;
  return 0;
}

const char *dev_impl_name(void) { return "host malloc"; }

int dev_host_addressable(void) { return 1; }
