/* The figures a test compares with the recorded run's own statistics:
 * "kind <name> <count>" per event kind, then per device
 * "device <d> <figure> <value>" from the model. */
#include <inttypes.h>
#include <stdlib.h>

#include "exports.h"
#include "model.h"

int export_summary(const ca_trace_data_t *t, FILE *out, char *err, size_t cap) {
  uint64_t kinds[CA_EV_KIND_END] = {0};
  model_t *m = malloc(sizeof *m);
  if (!m) return snprintf(err, cap, "out of memory"), -1;
  model_init(m);
  int rc = 0;
  for (size_t i = 0; i < t->nevents && !rc; i++) {
    kinds[t->events[i].kind]++;
    if (!model_apply(m, &t->events[i], NULL, NULL, err, cap)) rc = -1;
  }
  fprintf(out, "events %zu\nlost %" PRIu64 "\ncomplete %d\nsites %zu\n", t->nevents, t->lost, t->complete, t->nsites);
  for (unsigned k = 1; k < CA_EV_KIND_END; k++) fprintf(out, "kind %s %" PRIu64 "\n", ca_trace_kind_name(k), kinds[k]);
  for (int dev = 0; !rc && dev < m->ndevices; dev++) {
    const model_device_t *d = &m->dev[dev];
    fprintf(out, "device %d allocated %" PRId64 "\ndevice %d peak_allocated %" PRId64 "\n", dev, d->allocated, dev, d->peak_allocated);
    fprintf(out, "device %d reserved %" PRId64 "\ndevice %d peak_reserved %" PRId64 "\n", dev, d->reserved, dev, d->peak_reserved);
    fprintf(out, "device %d mapped %" PRId64 "\ndevice %d pending %" PRId64 "\n", dev, d->mapped, dev, d->pending);
    fprintf(out, "device %d allocs %" PRIu64 "\ndevice %d frees %" PRIu64 "\ndevice %d live %zu\n", dev, d->allocs, dev, d->frees, dev, d->nlive);
  }
  model_free(m);
  free(m);
  return rc;
}
