/* An event list in memory: what every importer fills and the replay walks.
 * The records are the event log's own (cudalloc_trace.h), so that a log
 * cudalloc recorded and a snapshot another allocator wrote are replayed
 * the same way.
 *
 * Events [0, pre_end) are the blocks that were live before the trace
 * began (a ring-buffer snapshot starts mid-run: those blocks appear only in
 * the snapshot's segments); the replay allocates them first. */
#ifndef CUDALLOC_TRACE_EVENTS_H
#define CUDALLOC_TRACE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cudalloc_trace.h"

#define CA_TRACE_MAX_DEVICES 16

/* What the allocator that produced a snapshot said of its own run (PyTorch:
 * from its segment events and blocks), to set beside cudalloc's figures. */
typedef struct {
  bool known;
  uint64_t peak_reserved;   /* highest sum of its segments along the trace */
  uint64_t peak_live;       /* highest sum of requested bytes of live blocks */
  uint64_t live_end;        /* requested bytes live when the snapshot was taken */
  uint64_t segment_maps;    /* segment_alloc/segment_map events along the trace */
} ca_trace_origin_t;

typedef struct {
  ca_trace_event_t *ev;
  size_t n, cap;
  size_t pre_end;                                /* see above */
  int ndevices;                                  /* highest device in the events + 1 */
  size_t skipped;                                /* entries of kinds nothing replays ("snapshot") */
  const char *format;                            /* the importer's name */
  ca_trace_origin_t origin[CA_TRACE_MAX_DEVICES];
} ca_trace_t;

void ca_trace_init(ca_trace_t *t);
void ca_trace_dispose(ca_trace_t *t);
/* Appends e; false when memory runs out or e's device is out of range. */
bool ca_trace_push(ca_trace_t *t, const ca_trace_event_t *e);
/* Events of device dev after the pre-trace blocks (what the trace recorded). */
size_t ca_trace_count(const ca_trace_t *t, int dev);

/* An importer's error: the place in the input and what is wrong there. */
typedef struct {
  char msg[256];
} ca_import_error_t;

/* Formats an error into err (printf-like); returns -1, an importer's failure. */
int ca_import_fail(ca_import_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
