/* "thread_heap.c": a thread's own block of memory on the heap, freed when
 * the thread exits, for per-thread state too large for a thread-local.
 *
 * Why not a thread-local: glibc gives a library that a program dlopens
 * (PyTorch's pluggable allocator, ctypes) static TLS only while its whole
 * TLS fits in glibc.rtld.optional_static_tls (512 bytes unless tuned); a
 * larger one is dynamic, and every access to it is a call to
 * _dl_tlsdesc_dynamic (17 instructions: five a PyTorch pair, 7% of it,
 * docs/benchmarks.md). So the library's thread-locals are small words, and
 * larger state is a thread-local pointer to a block made here (the
 * preload.dlopen_gets_static_tls test holds the size down). */
#ifndef CUDALLOC_THREAD_HEAP_H
#define CUDALLOC_THREAD_HEAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* One kind of block: its key, made on first use, and what an exiting
 * thread's block goes through (drop: point the owner's thread-local away
 * from the block, then free it). */
typedef struct ca_thread_heap_s {
  void (*drop)(void *block);
  pthread_key_t key;
  int state;   /* 0 no key yet, 1 the key, -1 no key could be made */
} ca_thread_heap_t;

#define CA_THREAD_HEAP_INIT(drop_fn) {(drop_fn), 0, 0}

/* A zeroed block of size for the calling thread, dropped when it exits;
 * NULL when there is no memory or no key (the caller works without). A
 * block made while the thread's destructors run (another destructor
 * allocated) is dropped in their next round, as glibc repeats them. */
void *ca_thread_heap_new(ca_thread_heap_t *h, size_t size);

/* The usual use: `get()`, a static function that returns the calling
 * thread's zeroed T, made on first use and kept in the thread-local
 * pointer `tls` (declared by the caller, static or not), or NULL without
 * memory. Until then, and again once the thread's exit freed the block,
 * `tls` holds `empty`: NULL, or (CA_THREAD_HEAP_OR) a shared block that
 * inline readers may read without a test, and that nothing writes. */
#define CA_THREAD_HEAP_OR(T, tls, get, empty)                                    \
  static void get##_drop(void *block) {                                          \
    tls = (empty);                                                               \
    free(block);                                                                 \
  }                                                                              \
  static ca_thread_heap_t get##_heap = CA_THREAD_HEAP_INIT(get##_drop);          \
  static T *get(void) {                                                          \
    T *mine_ = tls;                                                              \
    if (mine_ == (empty) && (mine_ = ca_thread_heap_new(&get##_heap, sizeof(T)))) tls = mine_; \
    return mine_ == (empty) ? NULL : mine_;                                      \
  }
#define CA_THREAD_HEAP(T, tls, get) CA_THREAD_HEAP_OR(T, tls, get, NULL)

#endif /* CUDALLOC_THREAD_HEAP_H */
