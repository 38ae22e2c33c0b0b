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
/* A thread's buffer (trace_buf.c). */
typedef struct tbuf_s ca_trace_buf_t;

/* The next record of the calling thread's buffer, to fill (held:
 * trace_log.h) and then commit, with no copy on the hot path; *buf is the
 * buffer, for the commit (one thread-local lookup per event, which costs a
 * call in the shared library). NULL when the thread has no buffer and none
 * could be made (the event is lost, and counted). */
ca_trace_event_t *ca_trace_buf_claim(ca_trace_buf_t **buf);
/* Publishes the record the claim of buf returned. */
void ca_trace_buf_commit(ca_trace_buf_t *buf);
/* Writes every buffered event now (on out-of-memory, on demand). */
void ca_trace_buf_flush(void);
/* Stops the writer after writing every event put before the call. */
void ca_trace_buf_stop(void);
/* In a fork child: the parent's writer is gone and its locks may be held;
 * forgets the buffers without touching them. */
void ca_trace_buf_abandon(void);

#endif /* CUDALLOC_TRACE_BUF_H */
