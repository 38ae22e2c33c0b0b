/* Per-thread blocks on the heap (thread_heap.h). */
#include "thread_heap.h"

#include <stdlib.h>

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;   /* once per kind of block */

static bool has_key(ca_thread_heap_t *h) {
  int state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
  if (state) return state > 0;
  pthread_mutex_lock(&keys_lock);
  if (!h->state) __atomic_store_n(&h->state, pthread_key_create(&h->key, h->drop) ? -1 : 1, __ATOMIC_RELEASE);
  state = h->state;
  pthread_mutex_unlock(&keys_lock);
  return state > 0;
}

void *ca_thread_heap_new(ca_thread_heap_t *h, size_t size) {
  if (!has_key(h)) return NULL;
  void *block = calloc(1, size);
  if (block && pthread_setspecific(h->key, block)) {
    free(block);
    block = NULL;
  }
  return block;
}
