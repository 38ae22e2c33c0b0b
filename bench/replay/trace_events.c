/* The in-memory event list (trace_events.h). */
#include "trace_events.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ca_trace_init(ca_trace_t *t) { memset(t, 0, sizeof *t); }

void ca_trace_dispose(ca_trace_t *t) {
  free(t->ev);
  ca_trace_init(t);
}

bool ca_trace_push(ca_trace_t *t, const ca_trace_event_t *e) {
  if (e->device < 0 || e->device >= CA_TRACE_MAX_DEVICES) return false;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    ca_trace_event_t *v = realloc(t->ev, cap * sizeof *v);
    if (!v) return false;
    t->ev = v;
    t->cap = cap;
  }
  t->ev[t->n++] = *e;
  if (e->device >= t->ndevices) t->ndevices = e->device + 1;
  return true;
}

size_t ca_trace_count(const ca_trace_t *t, int dev) {
  size_t n = 0;
  for (size_t i = t->pre_end; i < t->n; i++) n += t->ev[i].device == dev;
  return n;
}

int ca_import_fail(ca_import_error_t *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return -1;
}
