/* The address map (addr_map.h): linear probing, grown at half full. */
#include "addr_map.h"

#include <stdlib.h>
#include <string.h>

enum { EMPTY, USED, DELETED };

static size_t slot_of(uint64_t key, size_t cap) {
  key ^= key >> 33;   /* device addresses differ in their middle bits: mix them down */
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (size_t)key & (cap - 1);
}

void ca_addr_map_init(ca_addr_map_t *m) { memset(m, 0, sizeof *m); }

void ca_addr_map_free(ca_addr_map_t *m) {
  free(m->keys);
  free(m->vals);
  free(m->state);
  ca_addr_map_init(m);
}

/* The slot holding key, or (with insert) the first free one on its path. */
static size_t find(const ca_addr_map_t *m, uint64_t key, bool insert, bool *found) {
  size_t i = slot_of(key, m->cap), first_free = SIZE_MAX;
  for (;; i = (i + 1) & (m->cap - 1)) {
    if (m->state[i] == USED && m->keys[i] == key) {
      *found = true;
      return i;
    }
    if (m->state[i] == DELETED && first_free == SIZE_MAX) first_free = i;
    if (m->state[i] == EMPTY) {
      *found = false;
      return insert && first_free != SIZE_MAX ? first_free : i;
    }
  }
}

static bool grow(ca_addr_map_t *m) {
  ca_addr_map_t bigger = {0};
  bigger.cap = m->cap ? m->cap * 2 : 64;
  if (m->used * 4 < m->cap) bigger.cap = m->cap;   /* mostly tombstones: rehash in place */
  bigger.keys = malloc(bigger.cap * sizeof *bigger.keys);
  bigger.vals = malloc(bigger.cap * sizeof *bigger.vals);
  bigger.state = calloc(bigger.cap, 1);
  if (!bigger.keys || !bigger.vals || !bigger.state) {
    ca_addr_map_free(&bigger);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->state[i] == USED) ca_addr_map_put(&bigger, m->keys[i], m->vals[i]);
  ca_addr_map_free(m);
  *m = bigger;
  return true;
}

bool ca_addr_map_put(ca_addr_map_t *m, uint64_t key, uint64_t val) {
  if ((m->used + m->tombs + 1) * 2 > m->cap && !grow(m)) return false;
  bool found;
  size_t i = find(m, key, true, &found);
  if (!found) {
    if (m->state[i] == DELETED) m->tombs--;
    m->state[i] = USED;
    m->keys[i] = key;
    m->used++;
  }
  m->vals[i] = val;
  return true;
}

bool ca_addr_map_get(const ca_addr_map_t *m, uint64_t key, uint64_t *val) {
  if (!m->cap) return false;
  bool found;
  size_t i = find(m, key, false, &found);
  if (found && val) *val = m->vals[i];
  return found;
}

bool ca_addr_map_del(ca_addr_map_t *m, uint64_t key) {
  if (!m->cap) return false;
  bool found;
  size_t i = find(m, key, false, &found);
  if (!found) return false;
  m->state[i] = DELETED;
  m->used--;
  m->tombs++;
  return true;
}
