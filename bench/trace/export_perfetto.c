/* Chrome trace event JSON, which Perfetto (ui.perfetto.dev) and
 * chrome://tracing open: one process per device, with counter tracks
 * "allocated", "reserved" and "pending" (bytes), one "site N: NAME" track
 * per top call site (its live bytes; site_tracks.h), and instant events
 * for out-of-memory and step marks. A counter is written when it changes. */
#include <inttypes.h>
#include <stdlib.h>

#include "exports.h"
#include "model.h"
#include "site_tracks.h"

/* s as a JSON string's contents: a symbolized frame may hold quotes,
 * backslashes, anything. */
static void json_text(FILE *out, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
}

static void site_counter(FILE *out, const ca_trace_data_t *t, uint32_t site, int dev, double us, int64_t v) {
  const ca_trace_site_t *s = ca_trace_site(t, site);
  fprintf(out, ",\n{\"name\":\"site %u: ", site);
  json_text(out, s && s->nframes ? s->frames[0].text : "?");
  fprintf(out, "\",\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"args\":{\"bytes\":%" PRId64 "}}", dev, us, v);
}

static void counter(FILE *out, const char *name, int dev, double us, int64_t v) {
  fprintf(out, ",\n{\"name\":\"%s\",\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"args\":{\"bytes\":%" PRId64 "}}",
          name, dev, us, v);
}

int export_perfetto(const ca_trace_data_t *t, FILE *out, char *err, size_t cap) {
  model_t *m = malloc(sizeof *m);
  if (!m) return snprintf(err, cap, "out of memory"), -1;
  site_tracks_t sites;
  if (site_tracks_pick(&sites, t, SITE_TRACKS_TOP, err, cap)) {
    free(m);
    return -1;
  }
  model_init(m);
  char host[sizeof t->header.host + 1];
  snprintf(host, sizeof host, "%s", t->header.host[0] ? t->header.host : "?");
  fprintf(out, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"recorded_by\":\"cudalloc\",\"host\":\"");
  json_text(out, host);
  fprintf(out, "\",\"pid\":%u},\n\"traceEvents\":[\n{\"name\":\"log\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{}}",
          t->header.pid);
  int rc = 0;
  bool named[MODEL_MAX_DEVICES] = {0};
  for (size_t i = 0; i < t->nevents && !rc; i++) {
    const ca_trace_event_t *ev = &t->events[i];
    int dev = ev->device;
    model_device_t before = dev < MODEL_MAX_DEVICES ? m->dev[dev] : (model_device_t){0};
    if (!model_apply(m, ev, NULL, NULL, err, cap)) {
      rc = -1;
      break;
    }
    const model_device_t *d = &m->dev[dev];
    double us = (double)ev->time_ns / 1000.0;
    if (!named[dev]) {
      named[dev] = true;
      fprintf(out, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"device %d\"}}", dev, dev);
    }
    if (d->allocated != before.allocated) counter(out, "allocated", dev, us, d->allocated);
    if (d->reserved != before.reserved) counter(out, "reserved", dev, us, d->reserved);
    if (d->pending != before.pending) counter(out, "pending", dev, us, d->pending);
    uint32_t site;
    int64_t bytes;
    if (site_tracks_apply(&sites, ev, &site, &bytes)) site_counter(out, t, site, dev, us, bytes);
    if (ev->kind == CA_EV_OOM)
      fprintf(out, ",\n{\"name\":\"out of memory\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,"
                   "\"args\":{\"size\":%" PRIu64 "}}", dev, ev->thread, us, ev->size);
    if (ev->kind == CA_EV_STEP)
      fprintf(out, ",\n{\"name\":\"step %" PRIu64 "\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f}",
              ev->addr, dev, ev->thread, us);
  }
  fprintf(out, "\n]}\n");
  site_tracks_free(&sites);
  model_free(m);
  free(m);
  return rc;
}
