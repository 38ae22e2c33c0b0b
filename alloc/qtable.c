/* Stream queues by (stream, owner): open addressing with linear probing,
 * at most half full, deletion by backward shift (no tombstones), so that a
 * lookup touches one or two slots and the queue it finds, whatever the
 * number of streams (the list it replaced made 64 streams cost 3x one). */
#include "qtable.h"

#include <stdlib.h>

static size_t home(const ca_device_t *d, ca_stream_t s, uint64_t owner) {
  uint64_t h = ((uint64_t)(uintptr_t)s ^ owner * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
  return (size_t)(h >> 32) & (d->qtable_cap - 1);
}

ca_queue_t *ca_qtable_lookup(ca_device_t *d, ca_stream_t stream, uint64_t owner) {
  if (!d->qtable_cap) return NULL;
  for (size_t i = home(d, stream, owner);; i = (i + 1) & (d->qtable_cap - 1)) {
    ca_queue_t *q = d->qtable[i];
    if (!q) return NULL;
    if (q->stream == stream && q->owner == owner) return d->qtable_last = q;
  }
}

static void insert(ca_device_t *d, ca_queue_t *q) {
  size_t i = home(d, q->stream, q->owner);
  while (d->qtable[i]) i = (i + 1) & (d->qtable_cap - 1);
  d->qtable[i] = q;
  d->qtable_count++;
}

static bool grow(ca_device_t *d) {
  size_t old_cap = d->qtable_cap, cap = old_cap ? old_cap * 2 : 16;
  ca_queue_t **old = d->qtable, **t = calloc(cap, sizeof *t);
  if (!t) return false;
  d->qtable = t;
  d->qtable_cap = cap;
  d->qtable_count = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i]) insert(d, old[i]);
  free(old);
  return true;
}

bool ca_qtable_put(ca_device_t *d, ca_queue_t *q) {
  if (2 * (d->qtable_count + 1) > d->qtable_cap && !grow(d)) return false;
  insert(d, q);
  ca_qlist_add(d, CA_QL_ALL, q);
  return true;
}

/* Linear probing's deletion: later entries of the run move back over the
 * hole unless their home lies cyclically after it. */
void ca_qtable_forget(ca_device_t *d, ca_queue_t *q) {
  size_t m = d->qtable_cap - 1, i = d->qtable_cap ? home(d, q->stream, q->owner) : 0;
  if (!d->qtable_cap) return;
  if (d->qtable_last == q && !CA_DEBUG(qtable_keep_last)) d->qtable_last = NULL;
  while (d->qtable[i] && d->qtable[i] != q) i = (i + 1) & m;
  if (!d->qtable[i]) return;
  d->qtable[i] = NULL;
  d->qtable_count--;
  if (CA_DEBUG(qtable_no_shift)) return;
  for (size_t j = (i + 1) & m; d->qtable[j]; j = (j + 1) & m) {
    size_t k = home(d, d->qtable[j]->stream, d->qtable[j]->owner);
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    d->qtable[i] = d->qtable[j];
    d->qtable[j] = NULL;
    i = j;
  }
}

void ca_qtable_remove(ca_device_t *d, ca_queue_t *q) {
  ca_qtable_forget(d, q);
  for (int l = 0; l < CA_QL_COUNT; l++) ca_qlist_del(d, (ca_qlist_id_t)l, q);
}

void ca_qtable_free(ca_device_t *d) {
  free(d->qtable);
  d->qtable = NULL;
  d->qtable_last = NULL;
  d->qtable_cap = d->qtable_count = 0;
  for (int l = 0; l < CA_QL_COUNT; l++) d->qlists[l] = NULL;
}

void ca_qlist_add(ca_device_t *d, ca_qlist_id_t l, ca_queue_t *q) {
  if (q->on_list >> l & 1) return;
  q->on_list |= (uint8_t)(1u << l);
  q->link[l].prev = NULL;
  q->link[l].next = d->qlists[l];
  if (d->qlists[l]) d->qlists[l]->link[l].prev = q;
  d->qlists[l] = q;
}

void ca_qlist_del(ca_device_t *d, ca_qlist_id_t l, ca_queue_t *q) {
  if (!(q->on_list >> l & 1)) return;
  q->on_list &= (uint8_t)~(1u << l);
  if (q->link[l].prev) q->link[l].prev->link[l].next = q->link[l].next;
  else d->qlists[l] = q->link[l].next;
  if (q->link[l].next) q->link[l].next->link[l].prev = q->link[l].prev;
  q->link[l].prev = q->link[l].next = NULL;
}
