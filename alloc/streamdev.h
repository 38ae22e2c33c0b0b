/* "streamdev.c": the device a stream handle belongs to, as the backend
 * says, remembered by each thread so that the hot path asks the backend
 * nothing (the strict device made every stream-ordered call ask). */
#ifndef CUDALLOC_STREAMDEV_H
#define CUDALLOC_STREAMDEV_H

#include "types.h"

/* The backend's stream_device(stream), answered from the calling thread's
 * memory while nothing changed since it was asked: for the default
 * handles, while the thread's current context (the backend's context_key)
 * is the one it was asked under; for a created stream, until some stream
 * is created or destroyed, a device reset, shutdown or fork. Only answers
 * that succeeded are remembered. */
CUresult ca_stream_device(ca_stream_t stream, int *dev);
/* Forgets every thread's answers (what the shim and the core see change:
 * a stream created or destroyed, a device reset, shutdown, fork). */
void ca_streamdev_forget(void);

#endif /* CUDALLOC_STREAMDEV_H */
