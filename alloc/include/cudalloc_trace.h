/* The event record of cudalloc's event log (`trace:PATH`), shared by the
 * recorder in the core and by the tools that import, export and replay
 * logs, so that a log written by one version is read the same way by all.
 *
 * A log file is a header (ca_trace_header_t: magic "CUDALLOCTRC", format
 * version) followed by fixed-size records (events and clock calibration
 * pairs), then an end record (CA_EV_LOG_END) and the call-site table; docs/trace.md is the format's
 * reference. Fixed size and no pointers: a log is read on another machine,
 * by another process, or mapped and walked without parsing. All integers
 * are little-endian. */
#ifndef CUDALLOC_TRACE_H
#define CUDALLOC_TRACE_H

#include <stdint.h>

#define CA_TRACE_MAGIC "CUDALLOCTRC"
#define CA_TRACE_VERSION 2   /* 2: raw clock and calibration pairs; 1: times in ns (still read) */

typedef enum {
  CA_EV_ALLOC = 1,          /* a block handed out: size requested, extra = rounding */
  CA_EV_FREE,               /* freed by a synchronous call (cudaFree); stream: the block's */
  CA_EV_FREE_ASYNC,         /* freed stream-ordered (cudaFreeAsync) on stream */
  CA_EV_FREE_COMPLETED,     /* pending frees' device work completed: [addr, addr+size) reusable */
  CA_EV_SEGMENT_MAP,        /* physical memory mapped at addr, size bytes */
  CA_EV_SEGMENT_UNMAP,      /* physical memory unmapped */
  CA_EV_PAGE_MOVE,          /* size bytes of pages taken out of free blocks, mapped again at addr */
  CA_EV_EMPTY_CACHE,        /* the program released the cache */
  CA_EV_STEP,               /* a step mark (addr: the step number) */
  CA_EV_OOM,                /* an allocation of size bytes finally failed */
  CA_EV_RESERVE,            /* size bytes of physical memory taken from the driver */
  CA_EV_RELEASE,            /* size bytes of physical memory given back to the driver */
  CA_EV_KIND_END,
  CA_EV_CLOCK = 0x7ffe,     /* not an event: a calibration pair of the log's clock (below) */
  CA_EV_LOG_END = 0x7fff    /* not an event: the record that ends the events (below) */
} ca_trace_kind_t;

/* One event (named ca_trace_event_t, not ca_event_t: that is the backend's
 * driver event, backend.h). time_ns: in the file, the log's raw clock
 * (the header's clock: TSC ticks, or CLOCK_MONOTONIC ns since the log
 * began); as a reader returns it (bench/trace/trace_read.h), CLOCK_MONOTONIC
 * ns since the log began, converted through the log's CA_EV_CLOCK pairs.
 * The events of one device are strictly increasing in time, raw and
 * converted (the log's order for a device). stream: the CUDA stream handle as the program saw it (1 legacy,
 * 2 per-thread). site: an index into the log's call-site table, 0 when none
 * was recorded (a free carries the site of its allocation). thread: the
 * thread's Linux id. extra: ALLOC and frees, the bytes the block spans
 * beyond size (its rounding); zero elsewhere. */
typedef struct {
  uint64_t time_ns;
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  uint32_t site;
  uint32_t thread;
  uint16_t kind;   /* ca_trace_kind_t */
  int16_t device;
  uint32_t extra;
} ca_trace_event_t;

_Static_assert(sizeof(ca_trace_event_t) == 48, "the log's record size is part of its format");

/* CA_EV_LOG_END's fields: size = records written before it (events and
 * clock pairs), addr = sites in the table that follows, stream = events
 * the recorder could not keep (ring mode: older than the ring; else none
 * may be lost), time_ns = when the log was closed (raw clock).
 *
 * CA_EV_CLOCK's fields: time_ns = the raw clock, addr = CLOCK_MONOTONIC ns
 * since the log began, read together; device -1. A log has two at its
 * start (1 ms apart on the TSC), one a second from the writer thread, and
 * one before its end record; a reader converts a raw time by interpolating
 * between the pairs around it (beyond the last, the last two's slope). */

/* The header, at offset 0. */
#define CA_TRACE_FLAG_RING 1u   /* the events are the last ones of a ring (trace_ring) */
#define CA_TRACE_CLOCK_MONOTONIC 0u   /* raw times are CLOCK_MONOTONIC ns since the log began */
#define CA_TRACE_CLOCK_TSC 1u         /* raw times are the invariant TSC's ticks */
typedef struct {
  char magic[12];          /* CA_TRACE_MAGIC and a NUL */
  uint32_t version;        /* CA_TRACE_VERSION */
  uint32_t header_size;    /* sizeof(ca_trace_header_t): the records start there */
  uint32_t record_size;    /* sizeof(ca_trace_event_t) */
  uint32_t flags;          /* CA_TRACE_FLAG_* */
  uint32_t pid;
  uint64_t start_unix_ns;  /* wall clock when the log's CLOCK_MONOTONIC ns were 0 */
  uint32_t clock;          /* CA_TRACE_CLOCK_*: the raw clock of the records' times (version 1: zero) */
  uint32_t reserved;       /* zero */
  char host[64];           /* gethostname, NUL-terminated */
} ca_trace_header_t;

_Static_assert(sizeof(ca_trace_header_t) == 112, "the header's size is part of the format");

/* The call-site table after CA_EV_LOG_END, one entry per site 1..n:
 *   uint32 id, uint32 nframes, then per frame: uint64 pc, uint32 len,
 *   len bytes of text (ca_track_symbolize's line, no NUL).
 * Frames are innermost first; frame 0 names the site (ca_track_name). */

#endif /* CUDALLOC_TRACE_H */
