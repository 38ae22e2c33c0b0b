/* RMM's CSV (rmm::mr::logging_resource_adaptor), which RMM's replay
 * benchmark reads: one line per allocation, free and failed allocation.
 * Time: seconds since the epoch; Pointer and Stream in hex. A free's
 * line is the program's free (RMM has no pending state). */
#include <inttypes.h>

#include "exports.h"

int export_rmm(const ca_trace_data_t *t, FILE *out, char *err, size_t cap) {
  (void)err, (void)cap;
  fprintf(out, "Thread,Time,Action,Pointer,Size,Stream\n");
  for (size_t i = 0; i < t->nevents; i++) {
    const ca_trace_event_t *ev = &t->events[i];
    const char *action = ev->kind == CA_EV_ALLOC ? "allocate"
                       : ev->kind == CA_EV_FREE || ev->kind == CA_EV_FREE_ASYNC ? "free"
                       : ev->kind == CA_EV_OOM ? "allocate failure" : NULL;
    if (!action) continue;
    uint64_t ns = t->header.start_unix_ns + ev->time_ns;
    fprintf(out, "%u,%" PRIu64 ".%06" PRIu64 ",%s,%#" PRIx64 ",%" PRIu64 ",%#" PRIx64 "\n", ev->thread,
            ns / 1000000000u, ns % 1000000000u / 1000u, action, ev->addr, ev->size, ev->stream);
  }
  return ferror(out) ? -1 : 0;
}
