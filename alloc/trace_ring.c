/* The ring of trace_ring:N: one array for every thread, so that "the last
 * N events" has one meaning (the last N appended, in the order appended)
 * as in PyTorch's max_entries. A writer claims an index with one atomic
 * add; each slot carries the index it holds, so that a dump running
 * beside writers takes only slots that are whole (a seqlock per slot,
 * every access atomic so that the sanitizers see no race). */
#include "trace_ring.h"

#include <stdlib.h>
#include <string.h>

#define WORDS (sizeof(ca_trace_event_t) / sizeof(uint64_t) + 1)   /* the event, and its thread */

typedef struct {
  uint64_t seq;        /* index + 1 of the event held; 0 while being written */
  uint64_t w[WORDS];
} slot_t;

_Static_assert(sizeof(slot_t) == 64, "a slot is one cache line");

static slot_t *slots;  /* in slots_mem, aligned to a cache line */
static void *slots_mem;
static uint64_t keep;  /* N: the events a dump writes */
static uint64_t mask;  /* the slots, a power of two >= N, less one: an index is a mask, not a division */
static uint64_t head;  /* events ever put */

bool ca_trace_ring_start(uint64_t n) {
  uint64_t cap = 1;
  while (cap < n) cap *= 2;
  /* calloc, not aligned_alloc and memset: a big ring's pages stay untouched until used */
  if (!(slots_mem = calloc(cap + 1, sizeof *slots))) return false;
  slots = (slot_t *)(((uintptr_t)slots_mem + 63) & ~(uintptr_t)63);
  keep = n;
  mask = cap - 1;
  __atomic_store_n(&head, 0, __ATOMIC_RELAXED);
  return true;
}

void ca_trace_ring_put(const ca_trace_event_t *ev, uint32_t thread) {
  uint64_t i = __atomic_fetch_add(&head, 1, __ATOMIC_RELAXED);
  slot_t *s = &slots[i & mask];
  uint64_t w[WORDS];
  memcpy(w, ev, sizeof *ev);
  w[WORDS - 1] = thread;
  /* The exchange keeps the words' stores after the slot is marked torn. */
  __atomic_exchange_n(&s->seq, 0, __ATOMIC_ACQ_REL);
  for (size_t k = 0; k < WORDS; k++) __atomic_store_n(&s->w[k], w[k], __ATOMIC_RELAXED);
  __atomic_store_n(&s->seq, i + 1, __ATOMIC_RELEASE);
}

/* Copies slot i's event; false when it is torn or holds another index. */
static bool read_slot(uint64_t i, ca_trace_event_t *ev, uint32_t *thread) {
  slot_t *s = &slots[i & mask];
  if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != i + 1) return false;
  uint64_t w[WORDS];
  for (size_t k = 0; k < WORDS; k++) w[k] = __atomic_load_n(&s->w[k], __ATOMIC_RELAXED);
  /* A read-modify-write, not a fence: the loads above stay before it. */
  if (__atomic_fetch_add(&s->seq, 0, __ATOMIC_ACQ_REL) != i + 1) return false;
  memcpy(ev, w, sizeof *ev);
  *thread = (uint32_t)w[WORDS - 1];
  return true;
}

uint64_t ca_trace_ring_write(ca_trace_file_t *tf) {
  uint64_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE), lo = h > keep ? h - keep : 0, kept = 0;
  ca_trace_event_t batch[256];
  uint32_t threads[256];
  size_t n = 0;
  for (uint64_t i = lo; i < h; i++) {
    if (!read_slot(i, &batch[n], &threads[n])) continue;
    kept++;
    if (++n == sizeof batch / sizeof *batch) {
      ca_trace_file_write_held(tf, batch, n, 0, threads);
      n = 0;
    }
  }
  ca_trace_file_write_held(tf, batch, n, 0, threads);
  return h - kept;
}

void ca_trace_ring_stop(void) {
  free(slots_mem);
  slots = slots_mem = NULL;
  keep = mask = 0;
}
