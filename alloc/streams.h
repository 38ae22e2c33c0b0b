/* "streams.c": what the core knows of the program's streams: whether a
 * handle names a stream of a device, and the non-blocking streams that
 * cudaFree's fence covers (each device's registry, and the streams whose
 * device is not known yet). */
#ifndef CUDALLOC_STREAMS_H
#define CUDALLOC_STREAMS_H

#include "streamdev.h"
#include "types.h"

bool ca_stream_is_default(ca_stream_t stream);
/* 0 when stream may order work on d's memory: a default stream, or one of
 * d's; else CUDA_ERROR_INVALID_HANDLE (or the backend's error). The
 * default handles order work on d's own streams (the backend records
 * there), whichever device is current. Inline: every stream-ordered free
 * of the core asks (the call and its register saves were 9 of its 28
 * instructions on the GPU-like pair). */
static inline CUresult ca_stream_check(ca_device_t *d, ca_stream_t stream) {
  if (ca_streamdev_is_default(stream)) return CUDA_SUCCESS;
  int dev;
  CUresult rc = ca_stream_device(stream, &dev);
  return rc ? rc : dev == d->ordinal ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
/* Adds a non-blocking stream to d's registry (d locked). */
void ca_stream_register_on(ca_device_t *d, ca_stream_t stream);
/* Keeps a non-blocking stream whose device could not be learned. */
void ca_stream_defer(ca_stream_t stream);
/* The non-blocking streams registered on an ordinal, for all its arenas
 * (arena.h): noted by ca_stream_created before it registers the stream on
 * the arenas made so far, dropped by ca_stream_destroyed before it visits
 * them, copied by an arena at its set-up once it is ready (so that a
 * destruction meanwhile either is not copied or visits the new arena).
 * The lock is a leaf: taken under an arena's lock, never around one. */
void ca_streams_note_nonblocking(int ordinal, ca_stream_t stream);
void ca_streams_drop_nonblocking(int ordinal, ca_stream_t stream);   /* ordinal -1: every one */
/* out: CA_MAX_FENCE_EVENTS - 1; *overflow: more were noted than out holds */
int ca_streams_copy_nonblocking(int ordinal, ca_stream_t *out, bool *overflow);
void ca_stream_forget_deferred(ca_stream_t stream);
/* Files the deferred streams that turn out to be d's; true when some
 * stream's device is still unknown (d's fence must then cover it by
 * synchronizing the device). d is locked. */
bool ca_streams_place(ca_device_t *d);
/* Forgets every deferred stream (shutdown; in a fork child, without
 * trusting the lock). */
void ca_streams_forget(bool after_fork);

#endif /* CUDALLOC_STREAMS_H */
