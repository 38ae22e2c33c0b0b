/* Pinned host memory on the simulated device: anonymous mappings, counted
 * against a capacity of "pinned" bytes (sim_pinned_mb), as a machine
 * limits page-locked memory. Every live allocation is kept in a list so
 * that host_free of anything else is refused, as the driver refuses it,
 * without touching the memory. State is guarded by ca_sim.lock. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct sim_pinned_s {
  void *ptr;
  size_t size;
} sim_pinned_t;

static struct {
  size_t capacity, used;
  sim_pinned_t *live;
  size_t n, cap;
} host;

void ca_sim_host_open_locked(size_t capacity) { host.capacity = capacity; }

void ca_sim_host_teardown_locked(bool unmap) {
  for (size_t i = 0; unmap && i < host.n; i++) munmap(host.live[i].ptr, host.live[i].size);
  if (unmap) free(host.live);   /* else the fork child leaves the parent's list alone */
  host.live = NULL;
  host.n = host.cap = host.used = host.capacity = 0;
}

static bool page_multiple(size_t size) {
  return size && size % (size_t)sysconf(_SC_PAGESIZE) == 0;
}

static bool remember(void *ptr, size_t size) {
  if (host.n == host.cap) {
    size_t cap = host.cap ? host.cap * 2 : 64;
    sim_pinned_t *v = realloc(host.live, cap * sizeof *v);
    if (!v) return false;
    host.live = v;
    host.cap = cap;
  }
  host.live[host.n++] = (sim_pinned_t){ptr, size};
  return true;
}

CUresult ca_sim_host_alloc_locked(int dev, size_t size, void **ptr) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  if (!page_multiple(size)) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (size > host.capacity - host.used) return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!remember(p, size)) {
    munmap(p, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  host.used += size;
  *ptr = p;
  return CUDA_SUCCESS;
}

CUresult ca_sim_host_free_locked(void *ptr, size_t size) {
  for (size_t i = 0; i < host.n; i++) {
    if (host.live[i].ptr != ptr) continue;
    if (host.live[i].size != size) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
    munmap(ptr, size);
    host.used -= size;
    host.live[i] = host.live[--host.n];
    return CUDA_SUCCESS;
  }
  return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
}

bool ca_sim_host_range_locked(uintptr_t va, size_t n) {
  for (size_t i = 0; i < host.n; i++) {
    uintptr_t lo = (uintptr_t)host.live[i].ptr;
    if (va >= lo && va - lo < host.live[i].size) return n <= host.live[i].size - (va - lo);
  }
  return false;
}

size_t ca_sim_pinned_used(void) {
  pthread_mutex_lock(&ca_sim.lock);
  size_t used = host.used;
  pthread_mutex_unlock(&ca_sim.lock);
  return used;
}

size_t ca_sim_pinned_allocations(void) {
  pthread_mutex_lock(&ca_sim.lock);
  size_t n = host.n;
  pthread_mutex_unlock(&ca_sim.lock);
  return n;
}
