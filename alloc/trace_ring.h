/* "trace_ring.c": the last N events (trace_ring:N), kept in memory until
 * a dump writes them. */
#ifndef CUDALLOC_TRACE_RING_H
#define CUDALLOC_TRACE_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "trace_log.h"

/* Makes room for n events; false when there is no memory for it. */
bool ca_trace_ring_start(uint64_t n);
/* Appends ev (held: trace_log.h) of thread, overwriting the oldest once the ring is full. Lock-free. */
void ca_trace_ring_put(const ca_trace_event_t *ev, uint32_t thread);
/* Writes the ring's events, oldest first, to tf; returns how many of the
 * events ever put are not in it (overwritten, or being written just now). */
uint64_t ca_trace_ring_write(ca_trace_file_t *tf);
void ca_trace_ring_stop(void);

#endif /* CUDALLOC_TRACE_RING_H */
