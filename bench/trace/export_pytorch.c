/* PyTorch's memory snapshot, as torch.cuda.memory._snapshot() returns it:
 *   {"segments": [{device, address, total_size, allocated_size, active_size,
 *     requested_size, stream, segment_type, segment_pool_id, is_expandable,
 *     frames, blocks: [{address, size, requested_size, state, frames}]}],
 *    "device_traces": [[{action, addr, size, stream, time_us, frames}]],
 *    "allocator_settings": {...}}
 * with the actions alloc, free_requested, free_completed, segment_map,
 * segment_unmap and oom. Segments and blocks are the state at the log's
 * end; frames come from the log's call-site table. */
#include <stdlib.h>
#include <string.h>

#include "exports.h"
#include "model.h"
#include "pickle_write.h"

/* A frame's line ("fn+0x1c [0x...] in prog" or, when the symbolizer knows
 * it, "fn file.c:12 ..."): name is its first word, filename:line the first
 * word of the form path:number, else the module after " in ". */
static void frame(pk_writer_t *w, const char *text) {
  char name[256], file[256] = "??";
  long line = 0;
  snprintf(name, sizeof name, "%.*s", (int)strcspn(text, " "), text);
  for (const char *p = text; *p; p += strcspn(p, " "), p += strspn(p, " ")) {
    size_t n = strcspn(p, " ");
    const char *colon = memchr(p, ':', n);
    char *end;
    if (colon && colon > p && colon[1] >= '0' && colon[1] <= '9' && (line = strtol(colon + 1, &end, 10), end == p + n)) {
      snprintf(file, sizeof file, "%.*s", (int)(colon - p), p);
      break;
    }
    line = 0;
  }
  const char *in = strstr(text, " in ");
  if (!strcmp(file, "??") && in) snprintf(file, sizeof file, "%s", in + 4);
  pk_dict(w);
  pk_str(w, "name"), pk_str(w, name);
  pk_str(w, "filename"), pk_str(w, file);
  pk_str(w, "line"), pk_int(w, line);
  pk_end(w);
}

static void frames(pk_writer_t *w, const ca_trace_data_t *t, uint32_t site) {
  const ca_trace_site_t *s = ca_trace_site(t, site);
  pk_list(w);
  for (uint32_t k = 0; s && k < s->nframes; k++) frame(w, s->frames[k].text);
  pk_end(w);
}

typedef struct {
  pk_writer_t *w;
  const ca_trace_data_t *t;
} ctx_t;

static void entry(ctx_t *c, const char *action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site,
                  const ca_trace_event_t *at) {
  pk_writer_t *w = c->w;
  pk_dict(w);
  pk_str(w, "action"), pk_str(w, action);
  pk_str(w, "addr"), pk_uint(w, addr);
  pk_str(w, "size"), pk_uint(w, size);
  pk_str(w, "stream"), pk_uint(w, stream);
  pk_str(w, "time_us"), pk_uint(w, (c->t->header.start_unix_ns + at->time_ns) / 1000);
  pk_str(w, "frames"), frames(w, c->t, site);
  pk_end(w);
}

static void completed(const model_block_t *b, int device, const ca_trace_event_t *at, void *arg) {
  (void)device;
  entry(arg, "free_completed", b->addr, b->requested, b->stream, b->site, at);
}

/* One device's trace; its model is left at the log's end. */
static int device_trace(ctx_t *c, model_t *m, int dev, char *err, size_t cap) {
  const ca_trace_data_t *t = c->t;
  pk_list(c->w);
  for (size_t i = 0; i < t->nevents; i++) {
    const ca_trace_event_t *ev = &t->events[i];
    if (ev->device != dev) continue;
    /* free_completed entries of stream reuse come before the alloc that reuses */
    if (!model_apply(m, ev, completed, c, err, cap)) return -1;
    switch (ev->kind) {
    case CA_EV_ALLOC: entry(c, "alloc", ev->addr, ev->size, ev->stream, ev->site, ev); break;
    case CA_EV_FREE:
    case CA_EV_FREE_ASYNC: entry(c, "free_requested", ev->addr, ev->size, ev->stream, ev->site, ev); break;
    case CA_EV_SEGMENT_MAP: entry(c, "segment_map", ev->addr, ev->size, 0, 0, ev); break;
    case CA_EV_SEGMENT_UNMAP: entry(c, "segment_unmap", ev->addr, ev->size, 0, 0, ev); break;
    case CA_EV_OOM: entry(c, "oom", 0, ev->size, ev->stream, 0, ev); break;
    default: break;
    }
  }
  pk_end(c->w);
  return 0;
}

typedef struct {
  uint64_t addr, size, requested, stream;
  uint32_t site;
  const char *state;
} block_t;

static int by_addr(const void *a, const void *b) {
  const block_t *x = a, *y = b;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

static void block(pk_writer_t *w, const ca_trace_data_t *t, const block_t *b) {
  pk_dict(w);
  pk_str(w, "address"), pk_uint(w, b->addr);
  pk_str(w, "size"), pk_uint(w, b->size);
  pk_str(w, "requested_size"), pk_uint(w, b->requested);
  pk_str(w, "state"), pk_str(w, b->state);
  pk_str(w, "frames"), frames(w, t, b->site);
  pk_end(w);
}

/* One segment (a mapped range) and the blocks that tile it: live ones,
 * pending ones, and the gaps between them, inactive. */
static int segment(pk_writer_t *w, const ca_trace_data_t *t, const model_device_t *d, int dev, model_range_t r) {
  size_t n = 0, cap = d->nlive + d->npend + 1;
  block_t *bs = malloc(cap * sizeof *bs);
  if (!bs) return -1;
  uint64_t allocated = 0, active = 0, requested = 0;
  for (size_t i = 0; i < d->nlive; i++) {
    const model_block_t *b = &d->live[i];
    if (b->addr < r.lo || b->addr >= r.hi) continue;
    bs[n++] = (block_t){b->addr, b->span, b->requested, b->stream, b->site, "active_allocated"};
    allocated += b->span, active += b->span, requested += b->requested;
  }
  for (size_t i = 0; i < d->npend; i++) {
    const model_block_t *b = &d->pend[i].b;
    if (d->pend[i].done || d->pend[i].waiting != b->span || b->addr < r.lo || b->addr >= r.hi) continue;   /* whole ones only */
    bs[n++] = (block_t){b->addr, b->span, b->requested, b->stream, b->site, "active_awaiting_free"};
    active += b->span;
  }
  qsort(bs, n, sizeof *bs, by_addr);
  pk_dict(w);
  pk_str(w, "device"), pk_int(w, dev);
  pk_str(w, "address"), pk_uint(w, r.lo);
  pk_str(w, "total_size"), pk_uint(w, r.hi - r.lo);
  pk_str(w, "allocated_size"), pk_uint(w, allocated);
  pk_str(w, "active_size"), pk_uint(w, active);
  pk_str(w, "requested_size"), pk_uint(w, requested);
  pk_str(w, "stream"), pk_int(w, 0);
  pk_str(w, "segment_type"), pk_str(w, r.hi - r.lo <= (2u << 20) && d->classic ? "small" : "large");
  pk_str(w, "segment_pool_id"), pk_tuple(w), pk_int(w, 0), pk_int(w, 0), pk_end(w);
  pk_str(w, "is_expandable"), pk_bool(w, !d->classic);
  pk_str(w, "frames"), pk_list(w), pk_end(w);
  pk_str(w, "blocks"), pk_list(w);
  uint64_t at = r.lo;
  for (size_t i = 0; i < n; i++) {
    if (bs[i].addr > at) block(w, t, &(block_t){at, bs[i].addr - at, 0, 0, 0, "inactive"});
    block(w, t, &bs[i]);
    at = bs[i].addr + bs[i].size;
  }
  if (at < r.hi) block(w, t, &(block_t){at, r.hi - at, 0, 0, 0, "inactive"});
  pk_end(w);
  pk_end(w);
  free(bs);
  return 0;
}

int export_pytorch(const ca_trace_data_t *t, FILE *out, char *err, size_t cap) {
  pk_writer_t w;
  ctx_t c = {&w, t};
  model_t *m = malloc(sizeof *m);
  if (!m) return snprintf(err, cap, "out of memory"), -1;
  model_init(m);
  int ndev = 0;
  for (size_t i = 0; i < t->nevents; i++)
    if (t->events[i].device >= ndev) ndev = t->events[i].device + 1;
  pk_begin(&w, out);
  pk_dict(&w);
  pk_str(&w, "device_traces");
  pk_list(&w);
  int rc = 0;
  for (int dev = 0; !rc && dev < ndev; dev++) rc = device_trace(&c, m, dev, err, cap);
  pk_end(&w);
  pk_str(&w, "segments");
  pk_list(&w);
  for (int dev = 0; !rc && dev < ndev; dev++)
    for (size_t i = 0; !rc && i < m->dev[dev].nmapped; i++)
      if (segment(&w, t, &m->dev[dev], dev, m->dev[dev].mapped_ranges[i])) {
        snprintf(err, cap, "out of memory");
        rc = -1;
      }
  pk_end(&w);
  pk_str(&w, "allocator_settings");
  pk_dict(&w);
  pk_str(&w, "expandable_segments"), pk_bool(&w, ndev && !m->dev[0].classic);
  pk_str(&w, "recorded_by"), pk_str(&w, "cudalloc");
  pk_end(&w);
  pk_end(&w);
  if (!pk_finish(&w) && !rc) {
    snprintf(err, cap, "writing the pickle failed");
    rc = -1;
  }
  model_free(m);
  free(m);
  return rc;
}
