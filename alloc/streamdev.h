/* "streamdev.c": the device a stream handle belongs to, as the backend
 * says, remembered by each thread so that the hot path asks the backend
 * nothing (the strict device made every stream-ordered call ask). */
#ifndef CUDALLOC_STREAMDEV_H
#define CUDALLOC_STREAMDEV_H

#include "line.h"
#include "types.h"

/* The backend's stream_device(stream), answered from the calling thread's
 * memory while nothing changed since it was asked: for the default
 * handles, while the thread's current context (the backend's context_key)
 * is the one it was asked under; for a created stream, until some stream
 * is created or destroyed, a device reset, shutdown or fork. Only answers
 * that succeeded are remembered. */
static inline CUresult ca_stream_device(ca_stream_t stream, int *dev);
/* The same, asking the backend when the thread's memory has no answer. */
CUresult ca_stream_device_asked(ca_stream_t stream, int *dev);
/* Forgets every thread's answers (what the shim and the core see change:
 * a stream created or destroyed, a device reset, shutdown, fork). */
void ca_streamdev_forget(void);

#define CA_STREAMDEV_LOG2 8   /* created streams remembered per thread: 256, direct-mapped */
#define CA_STREAMDEV_WAYS (1 << CA_STREAMDEV_LOG2)

/* A thread's answers (streamdev.c's): inline so that the hot path's
 * answer for a created stream is a few loads. */
typedef struct {
  uint64_t gen;
  void *ctx;                      /* the default handles' answer holds under this context */
  int ctx_dev;
  ca_stream_t stream[CA_STREAMDEV_WAYS];
  int dev[CA_STREAMDEV_WAYS];
} ca_streamdev_tls_t;

extern __thread ca_streamdev_tls_t *ca_streamdev_tls;
extern ca_alone_u64_t ca_streamdev_generation;   /* .v atomic */

static inline unsigned ca_streamdev_way(ca_stream_t s) {
  return (unsigned)((uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull >> (64 - CA_STREAMDEV_LOG2));
}

/* The calling thread's current context as the backend keys it (NULL: none,
 * or no key): what a default handle's remembered device holds under. One
 * cheap call (on CUDA, cuCtxGetCurrent alone), so that a context changed
 * behind the shim's back (cuCtxSetCurrent, a push or pop) is seen. */
static inline void *ca_streamdev_context(void) { return ca_state.be->context_key(); }

/* A default handle (NULL, legacy, per-thread): its device is the current
 * context's, not the handle's (the same test as streams.c's, inline). */
static inline bool ca_streamdev_is_default(ca_stream_t s) {
  return s == NULL || s == CA_STREAM_LEGACY || s == CA_STREAM_PER_THREAD;
}

static inline CUresult ca_stream_device(ca_stream_t stream, int *dev) {
  ca_streamdev_tls_t *t = ca_streamdev_tls;
  unsigned w = ca_streamdev_way(stream);
  if (t && stream && t->stream[w] == stream && !CA_DEBUG(stale_stream_devices) &&
      t->gen == __atomic_load_n(&ca_streamdev_generation.v, __ATOMIC_ACQUIRE)) {
    *dev = t->dev[w];
    return CUDA_SUCCESS;
  }
  return ca_stream_device_asked(stream, dev);
}

#endif /* CUDALLOC_STREAMDEV_H */
