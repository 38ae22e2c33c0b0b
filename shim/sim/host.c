/* Pinned host memory on the simulated device, where host memory is all
 * there is: page-aligned
 * anonymous mappings, each with a header page in front that lets
 * cudaFreeHost recognize its own pointers. Live ones are kept on a list so
 * that a pointer this file did not hand out is refused, as the runtime
 * refuses it, without being dereferenced.
 */
#define _GNU_SOURCE
#include "sim_runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct host_block_s {
  struct host_block_s *prev, *next;
  size_t mapped;             /* bytes of the mapping, header page included */
} host_block_t;

static struct {
  pthread_mutex_t lock;
  host_block_t *live;
} host = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

cudaError_t ca_sim_rt_host_alloc(void **ptr, size_t size) {
  if (!ptr) return ca_rt_error(cudaErrorInvalidValue);
  size_t page = page_size(), mapped;
  if (__builtin_add_overflow(size, 2 * page - 1, &mapped)) return ca_rt_error(cudaErrorMemoryAllocation);
  mapped &= ~(page - 1);
  void *m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return ca_rt_error(cudaErrorMemoryAllocation);
  host_block_t *b = m;
  b->mapped = mapped;
  pthread_mutex_lock(&host.lock);
  b->prev = NULL;
  b->next = host.live;
  if (host.live) host.live->prev = b;
  host.live = b;
  pthread_mutex_unlock(&host.lock);
  *ptr = (char *)m + page;
  return cudaSuccess;
}

/* Unlinks and returns the live block whose memory begins at ptr. */
static host_block_t *sim_host_take(void *ptr) {
  host_block_t *found = NULL;
  pthread_mutex_lock(&host.lock);
  for (host_block_t *b = host.live; b && !found; b = b->next)
    if ((char *)b + page_size() == (char *)ptr) found = b;
  if (found) {
    if (found->prev) found->prev->next = found->next;
    else host.live = found->next;
    if (found->next) found->next->prev = found->prev;
  }
  pthread_mutex_unlock(&host.lock);
  return found;
}

cudaError_t ca_sim_rt_host_free(void *ptr) {
  if (!ptr) return cudaSuccess;
  host_block_t *b = sim_host_take(ptr);
  if (!b) return ca_rt_error(cudaErrorInvalidValue);
  munmap(b, b->mapped);
  return cudaSuccess;
}
