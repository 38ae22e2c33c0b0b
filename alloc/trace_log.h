/* "trace_log.c": the event log's file (header, records, end record,
 * call-site table) and the call-site ids its records carry. */
#ifndef CUDALLOC_TRACE_LOG_H
#define CUDALLOC_TRACE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cudalloc_trace.h"

/* The id of a call site (a ca_track_site pointer) in the log's table, 1
 * on; 0 for NULL or when no memory was left to remember it. Ids last until
 * ca_trace_log_forget_sites. */
uint32_t ca_trace_log_site_id(const void *site);
void ca_trace_log_forget_sites(void);

/* An event as the recorder holds it until it is written: the file's
 * record, but for its site and thread fields, whose 8 bytes hold the call
 * site's pointer (ca_track_site). They become the site's id and the thread
 * as the record is written, so that the hot path does neither lookup. */
_Static_assert(offsetof(ca_trace_event_t, site) % 8 == 0 &&
               offsetof(ca_trace_event_t, thread) == offsetof(ca_trace_event_t, site) + 4 && sizeof(void *) <= 8,
               "a held event keeps its site's pointer in its site and thread fields");

static inline void ca_trace_hold_site(ca_trace_event_t *ev, const void *site) {
  uint64_t w = (uint64_t)(uintptr_t)site;
  memcpy(&ev->site, &w, sizeof w);
}

/* A log file being written: header first, then records. */
/* Written through its own buffer, not stdio: a fork child must be able to
 * drop the parent's unwritten bytes (stdio would write them at its exit). */
#define CA_TRACE_FILE_BUF (64u << 10)
typedef struct ca_trace_file_s {
  int fd;            /* -1: closed */
  uint64_t events;   /* records written */
  bool failed;       /* a write failed (said once) */
  size_t used;
  unsigned char buf[CA_TRACE_FILE_BUF];
} ca_trace_file_t;

/* Creates path and writes the header and the clock's start pairs
 * (trace_clock.h); false (said on stderr) when it cannot. */
bool ca_trace_file_open(ca_trace_file_t *tf, const char *path, uint32_t flags);
void ca_trace_file_write(ca_trace_file_t *tf, const ca_trace_event_t *ev, size_t n);
/* Writes n held events (ca_trace_hold_site), made records in place: their
 * sites made ids, their thread the one given, or threads[i] when threads
 * is not NULL. A batch bigger than the file's buffer is written from where
 * it is, not copied. */
void ca_trace_file_write_held(ca_trace_file_t *tf, ca_trace_event_t *ev, size_t n, uint32_t thread,
                              const uint32_t *threads);
/* Writes a calibration pair of the clock taken now (CA_EV_CLOCK). */
void ca_trace_file_clock(ca_trace_file_t *tf);
/* Writes the buffered bytes to the file. */
void ca_trace_file_flush(ca_trace_file_t *tf);
/* Writes a last calibration pair, the end record (lost: events the
 * recorder could not keep) and the call-site table, and closes; false when
 * any write failed. */
bool ca_trace_file_close(ca_trace_file_t *tf, uint64_t lost);

#endif /* CUDALLOC_TRACE_LOG_H */
