/* The memory of a recorded run, event by event: what is live, what waits
 * for device work (pending), what is mapped and reserved, per device. Every
 * export walks a log through it, so that the viewers' counters and blocks
 * agree with each other and with the recorded run's statistics. */
#ifndef CUDALLOC_TRACE_MODEL_H
#define CUDALLOC_TRACE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_read.h"

#define MODEL_MAX_DEVICES 64

/* A block as the exports show it: span = its bytes as rounded. */
typedef struct {
  uint64_t addr, span, requested, stream;
  uint32_t site;
} model_block_t;

typedef struct {
  uint64_t lo, hi;
} model_range_t;

/* A freed block waiting for device work, and what of it still waits. */
typedef struct {
  model_block_t b;
  uint64_t waiting;   /* bytes of the block not yet completed or reused */
  bool done;          /* completed, or reused (in part) by its stream */
} model_pending_t;

typedef struct {
  int64_t allocated, reserved, mapped, pending;   /* bytes now */
  int64_t peak_allocated, peak_reserved, peak_pending;
  uint64_t allocs, frees, ooms, steps;
  model_block_t *live;
  size_t nlive, live_cap;
  model_pending_t *pend;          /* entries; waiting 0 = done */
  size_t npend, pend_cap;
  struct { model_range_t r; size_t entry; } *waits;   /* pending ranges */
  size_t nwaits, waits_cap;
  model_range_t *mapped_ranges;
  size_t nmapped, mapped_cap;
  bool classic;                   /* segments are whole driver allocations, not pages */
} model_device_t;

typedef struct {
  model_device_t dev[MODEL_MAX_DEVICES];
  int ndevices;                   /* 1 + the highest device seen */
} model_t;

/* Called once for each pending free, at the event that ends its wait:
 * when its every byte completed, or when its stream reuses any of it (as
 * PyTorch completes a block before it hands it out again). What is left
 * of a block reused in part still counts as pending bytes, as the
 * allocator's statistics count it. */
typedef void (*model_done_fn)(const model_block_t *b, int device, const ca_trace_event_t *at, void *arg);

void model_init(model_t *m);
/* Applies one event; false (with a message) when the log contradicts
 * itself (a free of what is not live, a device out of range). */
bool model_apply(model_t *m, const ca_trace_event_t *ev, model_done_fn done, void *arg, char *err, size_t cap);
void model_free(model_t *m);

#endif /* CUDALLOC_TRACE_MODEL_H */
