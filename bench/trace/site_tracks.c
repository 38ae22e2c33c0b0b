/* Per-site live bytes for the Perfetto export (site_tracks.h). A free
 * carries its allocation's site (the recorder writes the block's), so
 * each event moves one site's bytes: + on alloc, - on a free. */
#include "site_tracks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* The site whose bytes ev moves, and by how much; false for other events
 * and for devices beyond the table (the model refuses those). */
static bool moves(const site_tracks_t *s, const ca_trace_event_t *ev, size_t *at, int64_t *delta) {
  if (ev->device < 0 || ev->device >= s->ndevices || ev->site >= s->stride) return false;
  int64_t span = (int64_t)(ev->size + ev->extra);
  if (ev->kind == CA_EV_ALLOC) *delta = span;
  else if (ev->kind == CA_EV_FREE || ev->kind == CA_EV_FREE_ASYNC) *delta = -span;
  else return false;
  *at = (size_t)ev->device * s->stride + ev->site;
  return true;
}

int site_tracks_pick(site_tracks_t *s, const ca_trace_data_t *t, int top, char *err, size_t cap) {
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < t->nevents; i++)
    if (t->events[i].device >= s->ndevices && t->events[i].device < MODEL_MAX_DEVICES)
      s->ndevices = t->events[i].device + 1;
  s->stride = t->nsites + 1;
  size_t n = (size_t)s->ndevices * s->stride;
  s->live = calloc(n ? n : 1, sizeof *s->live);
  s->peak = calloc(n ? n : 1, sizeof *s->peak);
  s->tracked = calloc(n ? n : 1, sizeof *s->tracked);
  if (!s->live || !s->peak || !s->tracked) {
    site_tracks_free(s);
    return snprintf(err, cap, "out of memory"), -1;
  }
  for (size_t i = 0; i < t->nevents; i++) {
    size_t at;
    int64_t delta;
    if (!moves(s, &t->events[i], &at, &delta)) continue;
    s->live[at] += delta;
    if (s->live[at] > s->peak[at]) s->peak[at] = s->live[at];
  }
  for (int dev = 0; dev < s->ndevices; dev++) {
    const int64_t *peak = &s->peak[(size_t)dev * s->stride];
    bool *tracked = &s->tracked[(size_t)dev * s->stride];
    for (int k = 0; k < top; k++) {   /* top is small: a pass per pick */
      size_t best = 0;
      for (size_t id = 1; id < s->stride; id++)
        if (!tracked[id] && peak[id] > 0 && (!best || peak[id] > peak[best])) best = id;
      if (!best) break;
      tracked[best] = true;
    }
  }
  memset(s->live, 0, n * sizeof *s->live);   /* the export's walk counts again */
  return 0;
}

bool site_tracks_apply(site_tracks_t *s, const ca_trace_event_t *ev, uint32_t *site, int64_t *bytes) {
  size_t at;
  int64_t delta;
  if (!moves(s, ev, &at, &delta)) return false;
  s->live[at] += delta;
  if (!s->tracked[at]) return false;
  *site = ev->site;
  *bytes = s->live[at];
  return true;
}

void site_tracks_free(site_tracks_t *s) {
  free(s->live);
  free(s->peak);
  free(s->tracked);
  memset(s, 0, sizeof *s);
}
