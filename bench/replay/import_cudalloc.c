/* cudalloc's own event log (trace:PATH, docs/trace.md) as a replay's
 * event list, read by the recorder's reader (bench/trace/trace_read.h),
 * which converts the log's raw clock (TSC ticks in format version 2) to
 * ns and keeps the clock's calibration pairs out of the events.
 *
 * The log records the allocator's decisions too (maps, page moves,
 * reserve and release): only the program's own calls are replayed. Its
 * frees are replayed as PyTorch's are: a free is stream-ordered on the
 * block's stream (a cudaFree'd block was usable by no other stream until
 * its work completed either way), and the log's free_completed, which
 * says when that work completed, completes the block's stream. */
#include "importers.h"

#include <stdio.h>
#include <stdlib.h>

#include "addr_map.h"
#include "trace_read.h"

static bool replayed(unsigned kind) {
  return kind == CA_EV_ALLOC || kind == CA_EV_FREE || kind == CA_EV_FREE_ASYNC || kind == CA_EV_FREE_COMPLETED ||
         kind == CA_EV_EMPTY_CACHE || kind == CA_EV_STEP || kind == CA_EV_OOM;
}

int ca_import_cudalloc(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err) {
  ca_trace_data_t log;
  if (ca_trace_read_mem(data, n, &log, err->msg, sizeof err->msg)) {
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return ca_import_fail(err, "cudalloc trace: %s", why);
  }
  out->format = "cudalloc-trace";
  ca_addr_map_t stream_of = {0};   /* (device, address) of a live block -> its stream */
  int rc = 0;
  for (size_t i = 0; i < log.nevents && !rc; i++) {
    ca_trace_event_t e = log.events[i];
    if (!replayed(e.kind)) continue;
    if (e.device < 0 || e.device >= CA_TRACE_MAX_DEVICES) {
      rc = ca_import_fail(err, "cudalloc trace: event %zu: device %d", i, e.device);
      break;
    }
    uint64_t key = e.addr ^ ((uint64_t)(uint16_t)e.device << 56), stream;
    if (e.kind == CA_EV_ALLOC && !ca_addr_map_put(&stream_of, key, e.stream)) rc = -1;
    if (e.kind == CA_EV_FREE) e.kind = CA_EV_FREE_ASYNC;
    if (e.kind == CA_EV_FREE_COMPLETED && ca_addr_map_get(&stream_of, key, &stream)) {
      e.stream = stream;
      ca_addr_map_del(&stream_of, key);
    }
    if (rc || !ca_trace_push(out, &e)) rc = ca_import_fail(err, "cudalloc trace: event %zu: out of memory", i);
  }
  ca_addr_map_free(&stream_of);
  ca_trace_data_free(&log);
  return rc;
}
