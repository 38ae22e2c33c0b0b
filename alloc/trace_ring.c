/* The ring of trace_ring:N: one array for every thread, so that "the last
 * N events" has one meaning (the last N appended, in the order appended)
 * as in PyTorch's max_entries. A writer claims an index with one atomic
 * add; each slot carries the index it holds, so that a dump running
 * beside writers takes only slots that are whole (a seqlock per slot,
 * every access atomic so that the sanitizers see no race). */
#include "trace_ring.h"

#include <stdlib.h>
#include <string.h>

#define WORDS (sizeof(ca_trace_event_t) / sizeof(uint64_t))

typedef struct {
  uint64_t seq;        /* index + 1 of the event held; 0 while being written */
  uint64_t w[WORDS];
} slot_t;

static slot_t *slots;
static uint64_t cap;
static uint64_t head;  /* events ever put */

bool ca_trace_ring_start(uint64_t n) {
  if (!(slots = calloc(n, sizeof *slots))) return false;
  cap = n;
  __atomic_store_n(&head, 0, __ATOMIC_RELAXED);
  return true;
}

void ca_trace_ring_put(const ca_trace_event_t *ev) {
  uint64_t i = __atomic_fetch_add(&head, 1, __ATOMIC_RELAXED);
  slot_t *s = &slots[i % cap];
  uint64_t w[WORDS];
  memcpy(w, ev, sizeof w);
  /* The exchange keeps the words' stores after the slot is marked torn. */
  __atomic_exchange_n(&s->seq, 0, __ATOMIC_ACQ_REL);
  for (size_t k = 0; k < WORDS; k++) __atomic_store_n(&s->w[k], w[k], __ATOMIC_RELAXED);
  __atomic_store_n(&s->seq, i + 1, __ATOMIC_RELEASE);
}

/* Copies slot i's event; false when it is torn or holds another index. */
static bool read_slot(uint64_t i, ca_trace_event_t *ev) {
  slot_t *s = &slots[i % cap];
  if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != i + 1) return false;
  uint64_t w[WORDS];
  for (size_t k = 0; k < WORDS; k++) w[k] = __atomic_load_n(&s->w[k], __ATOMIC_RELAXED);
  /* A read-modify-write, not a fence: the loads above stay before it. */
  if (__atomic_fetch_add(&s->seq, 0, __ATOMIC_ACQ_REL) != i + 1) return false;
  memcpy(ev, w, sizeof w);
  return true;
}

uint64_t ca_trace_ring_write(ca_trace_file_t *tf) {
  uint64_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE), lo = h > cap ? h - cap : 0, kept = 0;
  ca_trace_event_t batch[256];
  size_t n = 0;
  for (uint64_t i = lo; i < h; i++) {
    if (!read_slot(i, &batch[n])) continue;
    kept++;
    if (++n == sizeof batch / sizeof *batch) {
      ca_trace_file_write(tf, batch, n);
      n = 0;
    }
  }
  ca_trace_file_write(tf, batch, n);
  return h - kept;
}

void ca_trace_ring_stop(void) {
  free(slots);
  slots = NULL;
  cap = 0;
}
