/* PyTorch memory snapshots (torch.cuda.memory._snapshot(), pickled): the
 * per-device `device_traces` become events; `segments` give the blocks
 * that were live before the trace began (ring-buffer snapshots start
 * mid-run, and a block allocated before recording began appears only
 * there), and PyTorch's own figures (reserved, live) for comparison.
 *
 * Device d's trace is device_traces[d]; entries are dicts with action,
 * addr, size, stream and (in newer files) time_us. Sizes are what the
 * program requested. */
#include "importers.h"

#include <stdio.h>
#include <string.h>

#include "addr_map.h"
#include "pickle.h"

typedef struct {
  const pk_value_t *root, *segments, *traces;
  ca_trace_t *out;
  ca_import_error_t *err;
} snap_t;

static bool is_list(const pk_value_t *v) { return v && v->kind == PK_LIST; }

/* An integer field of dict (where: how the error names the dict). */
static int int_field(snap_t *s, const pk_value_t *dict, const char *key, const char *where, size_t i,
                     int64_t *out) {
  const pk_value_t *v = pk_get(dict, key);
  if (!v || (v->kind != PK_INT && v->kind != PK_BOOL))
    return ca_import_fail(s->err, "pytorch snapshot: %s[%zu]: '%s' is missing or not an integer", where, i, key);
  *out = v->i;
  return 0;
}

/* A size or address: an integer that is not negative. */
static int u64_field(snap_t *s, const pk_value_t *dict, const char *key, const char *where, size_t i,
                     uint64_t *out) {
  int64_t v = 0;
  if (int_field(s, dict, key, where, i, &v)) return -1;
  if (v < 0) return ca_import_fail(s->err, "pytorch snapshot: %s[%zu]: '%s' is negative", where, i, key);
  *out = (uint64_t)v;
  return 0;
}

static int push(snap_t *s, ca_trace_kind_t kind, int dev, uint64_t addr, uint64_t size, uint64_t stream,
                uint64_t time_us) {
  ca_trace_event_t e = {.time_ns = time_us * 1000, .addr = addr, .size = size, .stream = stream,
                  .kind = (uint16_t)kind, .device = (int16_t)dev};
  return ca_trace_push(s->out, &e) ? 0 : ca_import_fail(s->err, "pytorch snapshot: out of memory");
}

static ca_trace_kind_t kind_of(const pk_value_t *action) {
  static const struct {
    const char *name;
    ca_trace_kind_t kind;
  } map[] = {
      {"alloc", CA_EV_ALLOC},           {"free_requested", CA_EV_FREE_ASYNC}, {"free_completed", CA_EV_FREE_COMPLETED},
      {"segment_alloc", CA_EV_SEGMENT_MAP}, {"segment_map", CA_EV_SEGMENT_MAP}, {"segment_free", CA_EV_SEGMENT_UNMAP},
      {"segment_unmap", CA_EV_SEGMENT_UNMAP}, {"empty_cache", CA_EV_EMPTY_CACHE}, {"oom", CA_EV_OOM},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (pk_str_is(action, map[i].name)) return map[i].kind;
  return CA_EV_KIND_END;   /* "snapshot" and kinds newer than this reader: not replayed */
}

/* One trace entry, checked: its kind and fields. */
typedef struct {
  ca_trace_kind_t kind;
  uint64_t addr, size, stream, time_us;
} entry_t;

static int read_entry(snap_t *s, const pk_value_t *e, const char *where, size_t i, entry_t *out) {
  if (!e || e->kind != PK_DICT) return ca_import_fail(s->err, "pytorch snapshot: %s[%zu] is not a dict", where, i);
  const pk_value_t *action = pk_get(e, "action");
  if (!action || action->kind != PK_STR)
    return ca_import_fail(s->err, "pytorch snapshot: %s[%zu]: 'action' is missing or not a string", where, i);
  memset(out, 0, sizeof *out);
  out->kind = kind_of(action);
  if (out->kind == CA_EV_KIND_END) return 0;
  if (pk_get(e, "time_us") && u64_field(s, e, "time_us", where, i, &out->time_us)) return -1;
  if (out->kind == CA_EV_EMPTY_CACHE) return 0;
  if (u64_field(s, e, "size", where, i, &out->size)) return -1;
  if (out->kind == CA_EV_OOM) return 0;   /* its addr is the device's free memory, not a block */
  return u64_field(s, e, "addr", where, i, &out->addr) || u64_field(s, e, "stream", where, i, &out->stream) ? -1 : 0;
}

// ----------------------------------------------------------------------------
// The segments: blocks live at the snapshot, PyTorch's reserved memory
// ----------------------------------------------------------------------------

typedef struct {
  uint64_t reserved_end, live_end;
} seg_totals_t;

/* Calls fn for every block of device dev in segments that is allocated. */
typedef int (*block_fn)(snap_t *s, int dev, uint64_t addr, uint64_t requested, uint64_t stream, void *ctx);

static int walk_segments(snap_t *s, int dev, seg_totals_t *tot, block_fn fn, void *ctx) {
  memset(tot, 0, sizeof *tot);
  for (size_t i = 0; i < s->segments->seq.n; i++) {
    const pk_value_t *seg = s->segments->seq.items[i];
    int64_t sdev = 0;
    uint64_t total = 0, stream = 0;
    if (!seg || seg->kind != PK_DICT) return ca_import_fail(s->err, "pytorch snapshot: segments[%zu] is not a dict", i);
    if (int_field(s, seg, "device", "segments", i, &sdev) || u64_field(s, seg, "total_size", "segments", i, &total) ||
        u64_field(s, seg, "stream", "segments", i, &stream))
      return -1;
    if (sdev != dev) continue;
    tot->reserved_end += total;
    const pk_value_t *blocks = pk_get(seg, "blocks");
    if (!is_list(blocks)) return ca_import_fail(s->err, "pytorch snapshot: segments[%zu]: 'blocks' is not a list", i);
    for (size_t j = 0; j < blocks->seq.n; j++) {
      const pk_value_t *b = blocks->seq.items[j];
      uint64_t addr, req;
      if (!b || b->kind != PK_DICT) return ca_import_fail(s->err, "pytorch snapshot: segments[%zu].blocks[%zu] is not a dict", i, j);
      if (!pk_str_is(pk_get(b, "state"), "active_allocated")) continue;
      /* requested_size is newer than size: older files say only size */
      const char *key = pk_get(b, "requested_size") ? "requested_size" : "size";
      if (u64_field(s, b, "address", "blocks", j, &addr) || u64_field(s, b, key, "blocks", j, &req)) return -1;
      tot->live_end += req;
      if (fn && fn(s, dev, addr, req, stream, ctx)) return -1;
    }
  }
  return 0;
}

// ----------------------------------------------------------------------------
// Blocks live before the trace began
// ----------------------------------------------------------------------------

typedef struct {
  ca_addr_map_t touched;   /* every block address the trace names */
  ca_addr_map_t live;      /* address -> requested size, along the trace */
  uint64_t live_bytes;
} pre_t;

static int pre_from_segment(snap_t *s, int dev, uint64_t addr, uint64_t req, uint64_t stream, void *ctx) {
  pre_t *p = ctx;
  if (ca_addr_map_get(&p->touched, addr, NULL)) return 0;   /* the trace allocates or frees it itself */
  if (!ca_addr_map_put(&p->live, addr, req)) return ca_import_fail(s->err, "pytorch snapshot: out of memory");
  p->live_bytes += req;
  return push(s, CA_EV_ALLOC, dev, addr, req, stream, 0);
}

static bool block_event(ca_trace_kind_t k) {
  return k == CA_EV_ALLOC || k == CA_EV_FREE_ASYNC || k == CA_EV_FREE_COMPLETED;
}

/* Device dev's pre-trace blocks: allocated blocks of its segments that the
 * trace never names, and blocks the trace frees before allocating them.
 * Leaves in p what the origin figures start from. */
static int pre_trace_blocks(snap_t *s, int dev, const pk_value_t *trace, pre_t *p) {
  char where[32];
  snprintf(where, sizeof where, "device_traces[%d]", dev);
  entry_t e;
  for (size_t i = 0; i < trace->seq.n; i++) {
    if (read_entry(s, trace->seq.items[i], where, i, &e)) return -1;
    if (block_event(e.kind) && !ca_addr_map_put(&p->touched, e.addr, 1)) return ca_import_fail(s->err, "out of memory");
  }
  seg_totals_t tot;
  if (walk_segments(s, dev, &tot, pre_from_segment, p)) return -1;
  ca_addr_map_t seen = {0};   /* allocated by the trace so far */
  int rc = 0;
  for (size_t i = 0; i < trace->seq.n && !rc; i++) {
    read_entry(s, trace->seq.items[i], where, i, &e);
    if (e.kind == CA_EV_ALLOC) rc = ca_addr_map_put(&seen, e.addr, 1) ? 0 : -1;
    else if (e.kind == CA_EV_FREE_ASYNC && !ca_addr_map_get(&seen, e.addr, NULL) &&
             !ca_addr_map_get(&p->live, e.addr, NULL)) {
      rc = ca_addr_map_put(&p->live, e.addr, e.size) ? push(s, CA_EV_ALLOC, dev, e.addr, e.size, e.stream, 0) : -1;
      p->live_bytes += e.size;
    }
  }
  ca_addr_map_free(&seen);
  return rc ? (s->err->msg[0] ? -1 : ca_import_fail(s->err, "pytorch snapshot: out of memory")) : 0;
}

// ----------------------------------------------------------------------------
// The trace, and PyTorch's own figures along it
// ----------------------------------------------------------------------------

static int trace_events(snap_t *s, int dev, const pk_value_t *trace, pre_t *p, ca_trace_origin_t *o) {
  char where[32];
  snprintf(where, sizeof where, "device_traces[%d]", dev);
  seg_totals_t tot;
  if (walk_segments(s, dev, &tot, NULL, NULL)) return -1;
  /* the reserved memory when the trace began: the end's, less what the trace mapped, plus what it unmapped */
  int64_t reserved = (int64_t)tot.reserved_end;
  entry_t e;
  for (size_t i = 0; i < trace->seq.n; i++) {
    read_entry(s, trace->seq.items[i], where, i, &e);
    if (e.kind == CA_EV_SEGMENT_MAP) reserved -= (int64_t)e.size;
    if (e.kind == CA_EV_SEGMENT_UNMAP) reserved += (int64_t)e.size;
  }
  uint64_t live = p->live_bytes, size;
  o->known = true;
  o->live_end = tot.live_end;
  o->peak_live = live;
  o->peak_reserved = reserved > 0 ? (uint64_t)reserved : 0;
  for (size_t i = 0; i < trace->seq.n; i++) {
    read_entry(s, trace->seq.items[i], where, i, &e);
    if (e.kind == CA_EV_KIND_END) {
      s->out->skipped++;
      continue;
    }
    if (e.kind == CA_EV_SEGMENT_MAP) o->segment_maps++;
    if (e.kind == CA_EV_SEGMENT_MAP && (reserved += (int64_t)e.size) > (int64_t)o->peak_reserved)
      o->peak_reserved = (uint64_t)reserved;
    if (e.kind == CA_EV_SEGMENT_UNMAP) reserved -= (int64_t)e.size;
    if (e.kind == CA_EV_ALLOC && ca_addr_map_put(&p->live, e.addr, e.size) && (live += e.size) > o->peak_live)
      o->peak_live = live;
    if (e.kind == CA_EV_FREE_COMPLETED && ca_addr_map_get(&p->live, e.addr, &size)) {
      live -= size;
      ca_addr_map_del(&p->live, e.addr);
    }
    if (push(s, e.kind, dev, e.addr, e.size, e.stream, e.time_us)) return -1;
  }
  return 0;
}

static int check_shape(snap_t *s) {
  if (!s->root || s->root->kind != PK_DICT) return ca_import_fail(s->err, "pytorch snapshot: the pickle is not a dict");
  s->segments = pk_get(s->root, "segments");
  s->traces = pk_get(s->root, "device_traces");
  if (!is_list(s->segments) || !is_list(s->traces))
    return ca_import_fail(s->err, "pytorch snapshot: 'segments' and 'device_traces' must be lists "
                                  "(was the snapshot taken with _record_memory_history() on?)");
  if (s->traces->seq.n > CA_TRACE_MAX_DEVICES)
    return ca_import_fail(s->err, "pytorch snapshot: %zu device traces (at most %d)", s->traces->seq.n, CA_TRACE_MAX_DEVICES);
  for (size_t d = 0; d < s->traces->seq.n; d++)
    if (!is_list(s->traces->seq.items[d])) return ca_import_fail(s->err, "pytorch snapshot: device_traces[%zu] is not a list", d);
  return 0;
}

int ca_import_pytorch(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err) {
  pk_doc_t doc;
  if (pk_parse(&doc, data, n)) {
    ca_import_fail(err, "pytorch snapshot: %s", doc.error);
    pk_free(&doc);
    return -1;
  }
  snap_t s = {.root = doc.root, .out = out, .err = err};
  int ndev = 0, rc = check_shape(&s);
  if (!rc) ndev = (int)s.traces->seq.n;
  pre_t pre[CA_TRACE_MAX_DEVICES];
  memset(pre, 0, sizeof pre);
  for (int d = 0; d < ndev && !rc; d++) rc = pre_trace_blocks(&s, d, s.traces->seq.items[d], &pre[d]);
  out->pre_end = out->n;
  for (int d = 0; d < ndev && !rc; d++) rc = trace_events(&s, d, s.traces->seq.items[d], &pre[d], &out->origin[d]);
  for (int d = 0; d < CA_TRACE_MAX_DEVICES; d++) {
    ca_addr_map_free(&pre[d].touched);
    ca_addr_map_free(&pre[d].live);
  }
  if (!rc && ndev > out->ndevices) out->ndevices = ndev;
  out->format = "pytorch-snapshot";
  pk_free(&doc);
  return rc;
}
