/* The event log's reader: checks every field it relies on and says where
 * a malformed log goes wrong, so that a torn or foreign file is an error
 * message, never a crash. */
#include "trace_read.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES_CONVERTED 32768   /* a record's device is an int16 */
#define MAX_NS 4611686018427387904.0   /* 2^62 ns (146 years): a converted time beyond is an error */

static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (cap) vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

const char *ca_trace_kind_name(unsigned kind) {
  static const char *const names[CA_EV_KIND_END] = {
    [CA_EV_ALLOC] = "alloc", [CA_EV_FREE] = "free", [CA_EV_FREE_ASYNC] = "free_async",
    [CA_EV_FREE_COMPLETED] = "free_completed", [CA_EV_SEGMENT_MAP] = "segment_map",
    [CA_EV_SEGMENT_UNMAP] = "segment_unmap", [CA_EV_PAGE_MOVE] = "page_move",
    [CA_EV_EMPTY_CACHE] = "empty_cache", [CA_EV_STEP] = "step", [CA_EV_OOM] = "oom",
    [CA_EV_RESERVE] = "reserve", [CA_EV_RELEASE] = "release",
  };
  return kind < CA_EV_KIND_END && names[kind] ? names[kind] : "?";
}

/* A cursor over the bytes, that never reads past their end. */
typedef struct {
  const unsigned char *p;
  size_t size, at;
} cursor_t;

static bool take(cursor_t *c, void *out, size_t n) {
  if (c->size - c->at < n) return false;
  memcpy(out, c->p + c->at, n);
  c->at += n;
  return true;
}

static int read_header(cursor_t *c, ca_trace_data_t *t, char *err, size_t cap) {
  if (!take(c, &t->header, sizeof t->header))
    return fail(err, cap, "offset 0: %zu bytes, shorter than a log's header (%zu bytes)", c->size,
                sizeof t->header);
  const ca_trace_header_t *h = &t->header;
  if (memcmp(h->magic, CA_TRACE_MAGIC, sizeof CA_TRACE_MAGIC))
    return fail(err, cap, "offset 0: not a cudalloc event log (no \"%s\" magic)", CA_TRACE_MAGIC);
  if (h->version != CA_TRACE_VERSION && h->version != 1)
    return fail(err, cap, "offset 12: format version %u; this reader knows versions 1 to %d", h->version,
                CA_TRACE_VERSION);
  if (h->version >= 2 && h->clock != CA_TRACE_CLOCK_MONOTONIC && h->clock != CA_TRACE_CLOCK_TSC)
    return fail(err, cap, "offset %zu: the clock %u is none this reader knows", offsetof(ca_trace_header_t, clock),
                h->clock);
  if (h->record_size != sizeof(ca_trace_event_t) || h->header_size < sizeof *h || h->header_size > c->size)
    return fail(err, cap, "offset 16: header size %u / record size %u are not this version's (%zu / %zu)",
                h->header_size, h->record_size, sizeof *h, sizeof(ca_trace_event_t));
  c->at = h->header_size;
  return 0;
}

/* A device's times are strictly increasing (the recorder makes them so):
 * only events of different devices can tie. */
static int by_time(const void *a, const void *b) {
  const ca_trace_event_t *x = a, *y = b;
  if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
  return (x->device > y->device) - (x->device < y->device);
}

/* The clock's calibration pairs, as the log holds them. */
typedef struct {
  uint64_t raw, ns;
} pair_t;

typedef struct {
  pair_t *p;
  size_t n;
} pairs_t;

static int read_events(cursor_t *c, ca_trace_data_t *t, pairs_t *pairs, ca_trace_event_t *end, char *err,
                       size_t cap) {
  size_t most = (c->size - c->at) / sizeof(ca_trace_event_t);
  if (!(t->events = malloc((most ? most : 1) * sizeof *t->events)) ||
      !(pairs->p = malloc((most ? most : 1) * sizeof *pairs->p)))
    return fail(err, cap, "out of memory");
  for (;;) {
    size_t at = c->at;
    if (at == c->size) return 0;   /* no end record: the process died */
    ca_trace_event_t ev;
    if (!take(c, &ev, sizeof ev))
      return fail(err, cap, "offset %zu: a torn record (%zu bytes left, a record is %zu)", at, c->size - at, sizeof ev);
    if (ev.kind == CA_EV_LOG_END) {
      *end = ev;
      t->complete = true;
      return 0;
    }
    if (ev.kind == CA_EV_CLOCK && t->header.version >= 2) {
      pairs->p[pairs->n++] = (pair_t){ev.time_ns, ev.addr};
      continue;
    }
    if (ev.kind == 0 || ev.kind >= CA_EV_KIND_END)
      return fail(err, cap, "offset %zu: record %zu has the unknown kind %u", at, t->nevents + pairs->n, ev.kind);
    if (ev.device < 0)
      return fail(err, cap, "offset %zu: record %zu names device %d", at, t->nevents + pairs->n, ev.device);
    t->events[t->nevents++] = ev;
  }
}

static int read_sites(cursor_t *c, ca_trace_data_t *t, uint64_t n, char *err, size_t cap) {
  if (n > (c->size - c->at) / 8) return fail(err, cap, "offset %zu: the end record says %llu sites, more than the bytes left hold", c->at, (unsigned long long)n);
  if (!(t->sites = calloc(n ? n : 1, sizeof *t->sites))) return fail(err, cap, "out of memory");
  for (uint64_t i = 0; i < n; i++) {
    size_t at = c->at;
    uint32_t id, nframes;
    if (!take(c, &id, 4) || !take(c, &nframes, 4)) return fail(err, cap, "offset %zu: site %llu is torn", at, (unsigned long long)i + 1);
    if (id != i + 1) return fail(err, cap, "offset %zu: site %llu carries the id %u", at, (unsigned long long)i + 1, id);
    if (nframes > (c->size - c->at) / 12) return fail(err, cap, "offset %zu: site %u says %u frames, more than the bytes left hold", at, id, nframes);
    ca_trace_site_t *s = &t->sites[t->nsites++];
    if (!(s->frames = calloc(nframes ? nframes : 1, sizeof *s->frames))) return fail(err, cap, "out of memory");
    for (uint32_t k = 0; k < nframes; k++) {
      uint32_t len;
      at = c->at;
      if (!take(c, &s->frames[k].pc, 8) || !take(c, &len, 4) || len > c->size - c->at)
        return fail(err, cap, "offset %zu: frame %u of site %u is torn", at, k, id);
      if (!(s->frames[k].text = malloc(len + 1))) return fail(err, cap, "out of memory");
      take(c, s->frames[k].text, len);
      s->frames[k].text[len] = 0;
      s->nframes = k + 1;
    }
  }
  if (c->at != c->size) return fail(err, cap, "offset %zu: %zu bytes after the call-site table", c->at, c->size - c->at);
  return 0;
}

static int by_raw(const void *a, const void *b) {
  const pair_t *x = a, *y = b;
  return (x->raw > y->raw) - (x->raw < y->raw);
}

/* Raw times to ns (version 2): each time interpolated between the two
 * calibration pairs around it, or beyond the ends on the nearest two's
 * slope (a log cut short). Both sides of every pair only grow, so the
 * conversion keeps the order; a device's times, strictly increasing raw,
 * are kept strictly increasing where two raw ticks round to one ns. The
 * events are sorted by raw time. */
static int convert_times(ca_trace_data_t *t, pairs_t *pairs, char *err, size_t cap) {
  qsort(pairs->p, pairs->n, sizeof *pairs->p, by_raw);
  size_t n = 0;   /* pairs of one raw time but the first dropped: a slope needs two raw times */
  for (size_t i = 0; i < pairs->n; i++)
    if (!n || pairs->p[i].raw != pairs->p[n - 1].raw) pairs->p[n++] = pairs->p[i];
  for (size_t i = 1; i < n; i++)
    if (pairs->p[i].ns < pairs->p[i - 1].ns)
      return fail(err, cap, "the clock's calibration pairs go back in time (raw %llu: %llu ns, raw %llu: %llu ns)",
                  (unsigned long long)pairs->p[i - 1].raw, (unsigned long long)pairs->p[i - 1].ns,
                  (unsigned long long)pairs->p[i].raw, (unsigned long long)pairs->p[i].ns);
  if (n < 2)
    return t->nevents ? fail(err, cap, "the log holds %zu clock calibration pairs of distinct times; its times "
                                       "need two to convert", n)
                      : 0;
  uint64_t *last = calloc(MAX_DEVICES_CONVERTED, sizeof *last);   /* a device's last time + 1; 0: none yet */
  if (!last) return fail(err, cap, "out of memory");
  size_t k = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    ca_trace_event_t *e = &t->events[i];
    while (k + 2 < n && e->time_ns >= pairs->p[k + 1].raw) k++;   /* events come in raw order */
    const pair_t *a = &pairs->p[k], *b = &pairs->p[k + 1];
    double ns = (double)a->ns + ((double)e->time_ns - (double)a->raw) * ((double)(b->ns - a->ns) / (double)(b->raw - a->raw));
    if (!(ns < MAX_NS)) {   /* also NaN: a time no run reaches, from pairs or a record gone wrong */
      free(last);
      return fail(err, cap, "event %zu: its raw time %llu converts to %g ns, more than 2^62", i,
                  (unsigned long long)e->time_ns, ns);
    }
    uint64_t v = ns <= 0 ? 0 : (uint64_t)ns;
    if (last[e->device] && v < last[e->device]) v = last[e->device];   /* the device's last + 1 */
    last[e->device] = v + 1;
    e->time_ns = v;
  }
  free(last);
  return 0;
}

int ca_trace_read_mem(const void *data, size_t size, ca_trace_data_t *t, char *err, size_t cap) {
  memset(t, 0, sizeof *t);
  cursor_t c = {data, size, 0};
  ca_trace_event_t end = {0};
  pairs_t pairs = {0};
  int rc = read_header(&c, t, err, cap);
  if (!rc) rc = read_events(&c, t, &pairs, &end, err, cap);
  if (!rc && t->complete && end.size != t->nevents + pairs.n)
    rc = fail(err, cap, "offset %zu: the end record says %llu records were written, the log holds %zu",
              c.at - sizeof end, (unsigned long long)end.size, t->nevents + pairs.n);
  if (!rc && t->complete) {
    t->lost = end.stream;
    rc = read_sites(&c, t, end.addr, err, cap);
  }
  for (size_t i = 0; !rc && i < t->nevents; i++)
    if (t->events[i].site > t->nsites && t->complete)
      rc = fail(err, cap, "record %zu names site %u; the table has %zu", i, t->events[i].site, t->nsites);
  if (!rc) {
    qsort(t->events, t->nevents, sizeof *t->events, by_time);
    if (t->header.version >= 2) rc = convert_times(t, &pairs, err, cap);
  }
  free(pairs.p);
  if (rc) ca_trace_data_free(t);
  return rc;
}

int ca_trace_read(const char *path, ca_trace_data_t *t, char *err, size_t cap) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, cap, "%s: cannot open it", path);
  size_t n = 0, room = 1 << 16;
  unsigned char *buf = malloc(room);
  for (size_t got; buf && (got = fread(buf + n, 1, room - n, f)) > 0;) {
    n += got;
    if (n == room) {
      unsigned char *grown = realloc(buf, room *= 2);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  bool bad = ferror(f);
  fclose(f);
  if (!buf) return fail(err, cap, "%s: out of memory", path);
  if (bad) {
    free(buf);
    return fail(err, cap, "%s: a read failed", path);
  }
  int rc = ca_trace_read_mem(buf, n, t, err, cap);
  free(buf);
  return rc;
}

void ca_trace_data_free(ca_trace_data_t *t) {
  for (size_t i = 0; i < t->nsites; i++) {
    for (uint32_t k = 0; k < t->sites[i].nframes; k++) free(t->sites[i].frames[k].text);
    free(t->sites[i].frames);
  }
  free(t->sites);
  free(t->events);
  memset(t, 0, sizeof *t);
}

const ca_trace_site_t *ca_trace_site(const ca_trace_data_t *t, uint32_t id) {
  return id && id <= t->nsites ? &t->sites[id - 1] : NULL;
}
