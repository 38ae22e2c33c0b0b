/* The event record of cudalloc's event log (`trace:PATH`), shared by the
 * recorder in the core and by the tools that import, export and replay
 * logs, so that a log written by one version is read the same way by all.
 *
 * A log file is a header (magic "CUDALLOCTRC", format version) followed
 * by fixed-size records, then the call-site table; docs/trace.md is the
 * format's reference. Fixed size and no pointers: a log is read on another
 * machine, by another process, or mapped and walked without parsing. */
#ifndef CUDALLOC_TRACE_H
#define CUDALLOC_TRACE_H

#include <stdint.h>

#define CA_TRACE_MAGIC "CUDALLOCTRC"
#define CA_TRACE_VERSION 1

typedef enum {
  CA_EV_ALLOC = 1,          /* a block handed out */
  CA_EV_FREE,               /* freed by a synchronous call (cudaFree) */
  CA_EV_FREE_ASYNC,         /* freed stream-ordered (cudaFreeAsync) on stream */
  CA_EV_FREE_COMPLETED,     /* a pending free's device work completed: reusable */
  CA_EV_SEGMENT_MAP,        /* physical memory mapped at addr, size bytes */
  CA_EV_SEGMENT_UNMAP,      /* physical memory unmapped */
  CA_EV_PAGE_MOVE,          /* a page moved out of a free hole (addr: its new place) */
  CA_EV_EMPTY_CACHE,        /* the program released the cache */
  CA_EV_STEP,               /* a step mark (addr: the step number) */
  CA_EV_OOM,                /* an allocation of size bytes finally failed */
  CA_EV_KIND_END
} ca_trace_kind_t;

/* One event (named ca_trace_event_t, not ca_event_t: that is the backend's
 * driver event, backend.h). time_ns: CLOCK_MONOTONIC since the log began. stream: the
 * CUDA stream handle as the program saw it (0 legacy, 2 per-thread). site:
 * an index into the log's call-site table, 0 when none was recorded. */
typedef struct {
  uint64_t time_ns;
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  uint32_t site;
  uint32_t thread;
  uint16_t kind;   /* ca_trace_kind_t */
  int16_t device;
  uint32_t reserved; /* zero; room for flags without a new version */
} ca_trace_event_t;

_Static_assert(sizeof(ca_trace_event_t) == 48, "the log's record size is part of its format");

#endif /* CUDALLOC_TRACE_H */
