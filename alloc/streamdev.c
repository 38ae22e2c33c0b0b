/* The device of a stream handle, remembered per thread.
 *
 * Each thread keeps the answers it got, stamped with a process-wide
 * generation; anything that can make an answer wrong (a handle destroyed
 * and its value reused by a stream of another device, a reset) moves the
 * generation on, and every thread's answers are then asked again. A
 * destroyed stream the core was not told of stays answered: the shim tells
 * it of every destruction it intercepts, and a program that links the
 * library calls cudalloc_stream_unregister (docs/usage.md). */
#include "streamdev.h"

#include <stdlib.h>
#include <string.h>

#include "thread_heap.h"

ca_alone_u64_t ca_streamdev_generation = {.v = 1};   /* a thread's zeroed memory names none */

/* On the heap (thread_heap.h says why). Other destructors (the front
 * cache's) may still ask after the thread's answers were dropped: they get
 * fresh answers, freed in the next round of destructors. */
__thread ca_streamdev_tls_t *ca_streamdev_tls;
CA_THREAD_HEAP(ca_streamdev_tls_t, ca_streamdev_tls, my_answers)

/* The thread's answers, emptied when the generation moved on; NULL when
 * there is no memory for them (the backend is asked every time). */
static ca_streamdev_tls_t *answers(void) {
  ca_streamdev_tls_t *t = my_answers();
  if (!t) return NULL;
  uint64_t gen = __atomic_load_n(&ca_streamdev_generation.v, __ATOMIC_ACQUIRE);
  if (t->gen != gen && !CA_DEBUG(stale_stream_devices)) {
    memset(t, 0, sizeof *t);
    t->gen = gen;
  }
  return t;
}

CUresult ca_stream_device_asked(ca_stream_t stream, int *dev) {
  ca_streamdev_tls_t *t = answers();
  if (!t) return ca_state.be->stream_device(stream, dev);
  bool dflt = ca_streamdev_is_default(stream);
  unsigned w = ca_streamdev_way(stream);
  void *ctx = dflt ? ca_streamdev_context() : NULL;
  bool same_ctx = ctx && (t->ctx == ctx || (CA_DEBUG(stale_stream_devices) && t->ctx));
  if (dflt ? same_ctx : stream && t->stream[w] == stream) {
    *dev = dflt ? t->ctx_dev : t->dev[w];
    return CUDA_SUCCESS;
  }
  CUresult rc = ca_state.be->stream_device(stream, dev);
  if (rc) return rc;
  if (!dflt) {
    t->stream[w] = stream;
    t->dev[w] = *dev;
  } else if ((ctx = ca_streamdev_context())) {   /* asked again: the call may have given the thread a context */
    t->ctx = ctx;
    t->ctx_dev = *dev;
  }
  return CUDA_SUCCESS;
}

void ca_streamdev_forget(void) { __atomic_add_fetch(&ca_streamdev_generation.v, 1, __ATOMIC_ACQ_REL); }
