/* Reading cudalloc's own event log (trace:PATH, docs/trace.md) into
 * memory: the exporter (cudalloc-trace) and the replay read logs through
 * this one reader. */
#ifndef CUDALLOC_TRACE_READ_H
#define CUDALLOC_TRACE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cudalloc_trace.h"

typedef struct {
  uint64_t pc;
  char *text;            /* ca_track_symbolize's line, NUL-terminated */
} ca_trace_frame_t;

typedef struct {
  uint32_t nframes;      /* innermost first */
  ca_trace_frame_t *frames;
} ca_trace_site_t;

typedef struct {
  ca_trace_header_t header;
  ca_trace_event_t *events;  /* in time order (a device's events in its order) */
  size_t nevents;
  ca_trace_site_t *sites;    /* sites[id - 1] */
  size_t nsites;
  uint64_t lost;             /* events the recorder could not keep (ring: older ones) */
  bool complete;             /* false: the log ends before its end record (the process died) */
} ca_trace_data_t;

/* Reads a log. Returns 0, or -1 with a message naming the byte offset of
 * the problem in err (bad magic, another version, a torn or unknown
 * record, a count that disagrees with the end record, a torn table). A log
 * without its end record (a process that was killed) reads as far as its
 * last whole record, with complete false. */
int ca_trace_read(const char *path, ca_trace_data_t *out, char *err, size_t cap);
int ca_trace_read_mem(const void *data, size_t size, ca_trace_data_t *out, char *err, size_t cap);
void ca_trace_data_free(ca_trace_data_t *t);

/* Site id's frames (NULL, 0 frames for id 0 or an id not in the table). */
const ca_trace_site_t *ca_trace_site(const ca_trace_data_t *t, uint32_t id);
/* The event kind's name ("alloc", "free", ...), or "?". */
const char *ca_trace_kind_name(unsigned kind);

#endif /* CUDALLOC_TRACE_READ_H */
