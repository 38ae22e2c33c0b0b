/* "trace.c": the event log's recorder (trace:PATH, trace_ring:N). The
 * core calls one hook at each of its choke points; each is a load and a
 * branch while recording is off. Every hook is called with the device's
 * lock held, which orders the device's events. */
#ifndef CUDALLOC_TRACE_REC_H
#define CUDALLOC_TRACE_REC_H

#include <stdbool.h>

#include "line.h"
#include "types.h"
#include "cudalloc_trace.h"

extern ca_alone_bool_t ca_trace_recording;   /* .v read atomically */

static inline bool ca_trace_on(void) { return __atomic_load_n(&ca_trace_recording.v, __ATOMIC_RELAXED); }

void ca_trace_block_event(ca_device_t *d, ca_trace_kind_t kind, const ca_block_t *b, ca_stream_t stream);
void ca_trace_mem_event(ca_device_t *d, ca_trace_kind_t kind, uintptr_t addr, size_t size);

/* A block handed out (after its size and site are set). */
static inline void ca_trace_alloc(ca_device_t *d, const ca_block_t *b) {
  if (ca_trace_on()) ca_trace_block_event(d, CA_EV_ALLOC, b, b->stream);
}
/* A live block freed, synchronously (cudaFree) or on stream. */
static inline void ca_trace_free(ca_device_t *d, const ca_block_t *b, ca_stream_t stream, bool sync) {
  if (ca_trace_on()) ca_trace_block_event(d, sync ? CA_EV_FREE : CA_EV_FREE_ASYNC, b, sync ? b->stream : stream);
}
/* A pending block whose fence completed: reusable by every stream. */
static inline void ca_trace_free_completed(ca_device_t *d, const ca_block_t *b) {
  if (ca_trace_on()) ca_trace_mem_event(d, CA_EV_FREE_COMPLETED, b->addr, b->size);
}
/* Mappings, physical memory, page moves, cache releases, step marks (addr:
 * the step), out-of-memory (size: the request). */
static inline void ca_trace_mem(ca_device_t *d, ca_trace_kind_t kind, uintptr_t addr, size_t size) {
  if (ca_trace_on()) ca_trace_mem_event(d, kind, addr, size);
}

/* Starts recording when the configuration asks (ca_init, lock held). */
void ca_trace_start(void);
/* Stops appending; the caller then lets every device's lock go round once
 * (so that no hook is still appending) and calls ca_trace_stop. */
void ca_trace_pause(void);
/* Appending again after a pause (bench/bench_trace.c times the same pairs
 * with recording on and off, in turn, in one run). */
void ca_trace_resume(void);
/* Writes what is left, the call-site table, and closes the log. */
void ca_trace_stop(void);
/* Writes the ring (trace_ring) to path (NULL: the log's own path), or in
 * full mode writes every buffered event to the log (path must be NULL).
 * Returns 0, or CUDA_ERROR_INVALID_VALUE / CUDA_ERROR_NOT_INITIALIZED
 * (not recording) / CUDA_ERROR_UNKNOWN (the file could not be written). */
CUresult ca_trace_dump(const char *path);
/* In a fork child: recording stops (the parent's log is the parent's). */
void ca_trace_fork_child(void);

#endif /* CUDALLOC_TRACE_REC_H */
