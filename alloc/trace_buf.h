/* "trace_buf.c": the full event log's path from the hot path to the file:
 * per-thread buffers, appended without a lock, written in batches by a
 * writer thread (or by a thread whose buffer is full). */
#ifndef CUDALLOC_TRACE_BUF_H
#define CUDALLOC_TRACE_BUF_H

#include <stdbool.h>
#include <stdint.h>

#include "trace_log.h"

/* Starts the writer thread, which writes every buffered event to tf. */
bool ca_trace_buf_start(ca_trace_file_t *tf);
/* The next record of the calling thread's buffer, to fill and then
 * commit (no copy on the hot path); NULL when the thread has no buffer and
 * none could be made (the event is lost, and counted). */
ca_trace_rec_t *ca_trace_buf_claim(void);
/* Publishes the record the last claim returned. */
void ca_trace_buf_commit(void);
/* Writes every buffered event now (on out-of-memory, on demand). */
void ca_trace_buf_flush(void);
/* Stops the writer after writing every event put before the call. */
void ca_trace_buf_stop(void);
/* In a fork child: the parent's writer is gone and its locks may be held;
 * forgets the buffers without touching them. */
void ca_trace_buf_abandon(void);

#endif /* CUDALLOC_TRACE_BUF_H */
