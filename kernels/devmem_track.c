/* Bookkeeping of the device memory layer: a table of live blocks (pointer to
 * size, open addressing with linear probing) and the counters the workload
 * prints. The program is single-threaded; the tests use one thread too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"

typedef struct slot_s {
  void *ptr;   /* NULL: empty; TOMBSTONE: freed */
  size_t bytes;
} slot_t;

#define TOMBSTONE ((void *)1)

static slot_t *table;
static size_t capacity, used; /* used counts live entries and tombstones */
static dev_counters_t counters;

static size_t slot_of(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (capacity - 1);
}

static void insert(void *p, size_t bytes) {
  size_t i = slot_of(p);
  while (table[i].ptr && table[i].ptr != TOMBSTONE) i = (i + 1) & (capacity - 1);
  if (!table[i].ptr) used++;
  table[i].ptr = p;
  table[i].bytes = bytes;
}

/* Rebuilds the table twice as large (or the same size, to drop tombstones). */
static void grow(void) {
  slot_t *old = table;
  size_t old_cap = capacity;
  capacity = capacity ? (counters.live_blocks * 4 > capacity ? capacity * 2 : capacity) : 256;
  table = calloc(capacity, sizeof(slot_t));
  if (!table) {
    fprintf(stderr, "devmem: out of host memory for the block table\n");
    abort();
  }
  used = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].ptr && old[i].ptr != TOMBSTONE) insert(old[i].ptr, old[i].bytes);
  free(old);
}

static slot_t *find(const void *p) {
  if (!capacity) return NULL;
  for (size_t i = slot_of(p);; i = (i + 1) & (capacity - 1)) {
    if (!table[i].ptr) return NULL;
    if (table[i].ptr == p) return &table[i];
  }
}

void dev_track_alloc(void *p, size_t bytes) {
  if (find(p)) {
    fprintf(stderr, "devmem: %p handed out twice (the allocator gave a live block again)\n", p);
    abort();
  }
  if ((used + 1) * 2 > capacity) grow();
  insert(p, bytes);
  counters.live_bytes += bytes;
  counters.live_blocks++;
  counters.total_allocs++;
  if (counters.live_bytes > counters.peak_bytes) counters.peak_bytes = counters.live_bytes;
}

size_t dev_track_free(void *p, const char *file, int line) {
  slot_t *s = find(p);
  if (!s) {
    fprintf(stderr, "devmem: free of %p at %s:%d, which is not a live block\n", p, file, line);
    abort();
  }
  size_t bytes = s->bytes;
  s->ptr = TOMBSTONE;
  counters.live_bytes -= bytes;
  counters.live_blocks--;
  counters.total_frees++;
  return bytes;
}

void dev_track_reset(void) {
  free(table);
  table = NULL;
  capacity = used = 0;
}

void dev_counters(dev_counters_t *out) { *out = counters; }

void dev_reset_peak(void) { counters.peak_bytes = counters.live_bytes; }
