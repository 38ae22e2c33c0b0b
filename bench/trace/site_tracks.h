/* The per-site counter tracks of the Perfetto export: live bytes (as
 * rounded, as the "allocated" counter counts them) of each call site, per
 * device, for the sites with the highest peaks. A first walk over the log
 * picks the sites; the export's walk then applies each event again. */
#ifndef CUDALLOC_TRACE_SITE_TRACKS_H
#define CUDALLOC_TRACE_SITE_TRACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_read.h"

#define SITE_TRACKS_TOP 8   /* tracks per device */

typedef struct {
  int ndevices;
  size_t stride;        /* site ids 0..nsites: nsites + 1 */
  int64_t *live, *peak; /* [device * stride + site] */
  bool *tracked;        /* the top sites by peak, per device (site 0, none recorded, never) */
} site_tracks_t;

/* Walks the log once and picks, per device, the top sites by peak live
 * bytes (ties: the lower id); 0, or -1 with a message (no memory). */
int site_tracks_pick(site_tracks_t *s, const ca_trace_data_t *t, int top, char *err, size_t cap);
/* Applies an event of the export's walk; true when it changed a tracked
 * site's live bytes, then *site and *bytes say which and to what. */
bool site_tracks_apply(site_tracks_t *s, const ca_trace_event_t *ev, uint32_t *site, int64_t *bytes);
void site_tracks_free(site_tracks_t *s);

#endif /* CUDALLOC_TRACE_SITE_TRACKS_H */
