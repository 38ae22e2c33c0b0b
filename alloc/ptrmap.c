/* Live blocks by start address: open addressing with linear probing and
 * backward-shift deletion (no tombstones, so lookups stay short under the
 * churn of a training loop). Keys are 512-byte aligned; 0 marks empty. */
#include "ptrmap.h"

#include <stdlib.h>

/* Fibonacci hashing: the product's top log2(cap) bits, so that no mask
 * is needed (cap >= 1024; the keys' 9 zero bits only shift the product). */
static size_t slot_of(uintptr_t key, unsigned shift) {
  return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> shift);
}

/* Out of line: an insertion that has room saves no registers. */
static __attribute__((noinline)) bool grow(ca_ptrmap_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  uintptr_t *keys = calloc(cap, sizeof *keys);
  ca_block_t **vals = calloc(cap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return false;
  }
  unsigned shift = (unsigned)__builtin_clzll((unsigned long long)cap) + 1;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(m->keys[i], shift);
    while (keys[j]) j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    vals[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  m->grow_at = cap / 2;
  m->shift = shift;
  return true;
}

bool ca_ptrmap_insert(ca_ptrmap_t *m, ca_block_t *b) {
  ca_assert(b->addr != 0);   /* 0 marks an empty slot */
  if (m->count >= m->grow_at && !grow(m)) return false;   /* at most half full */
  size_t i = slot_of(b->addr, m->shift);
  while (m->keys[i]) i = (i + 1) & (m->cap - 1);
  m->keys[i] = b->addr;
  m->vals[i] = b;
  m->count++;
  return true;
}

/* addr 0 finds an empty slot, whose value is NULL: no test for it. */
static inline size_t find_slot(const ca_ptrmap_t *m, uintptr_t addr) {
  if (!m->cap) return SIZE_MAX;
  for (size_t i = slot_of(addr, m->shift);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == addr) return i;
    if (!m->keys[i]) return SIZE_MAX;
  }
}

ca_block_t *ca_ptrmap_get(const ca_ptrmap_t *m, uintptr_t addr) {
  size_t i = find_slot(m, addr);
  return i == SIZE_MAX ? NULL : m->vals[i];
}

ca_block_t *ca_ptrmap_get_slot(const ca_ptrmap_t *m, uintptr_t addr, size_t *slot) {
  size_t i = *slot = find_slot(m, addr);
  return i == SIZE_MAX ? NULL : m->vals[i];
}

/* Inlined (into the free, under the shipped library's LTO): 6 instructions
 * a GPU-like pair. */
__attribute__((always_inline)) inline void ca_ptrmap_remove_slot(ca_ptrmap_t *m, size_t i) {
  ca_assert(i < m->cap && m->keys[i]);
  /* Shift later members of the probe run back so no gap breaks a lookup. */
  for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
    size_t home = slot_of(m->keys[j], m->shift);
    bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
    if (!movable) continue;
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    i = j;
  }
  m->keys[i] = 0;
  m->vals[i] = NULL;
  m->count--;
}

ca_block_t *ca_ptrmap_remove(ca_ptrmap_t *m, uintptr_t addr) {
  size_t i = find_slot(m, addr);
  ca_block_t *b = i == SIZE_MAX ? NULL : m->vals[i];
  if (b) ca_ptrmap_remove_slot(m, i);   /* NULL: not found, or addr 0 found an empty slot */
  return b;
}

void ca_ptrmap_free(ca_ptrmap_t *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->count = m->grow_at = 0;
  m->shift = 0;
}
