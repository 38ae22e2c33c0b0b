/* "qtable.c": a device's stream queues, found by (stream, owner) in a
 * hash, and three lists of them: every queue, the queues with open blocks
 * (what a seal visits) and the queues with sealed fences (what a poll and a
 * wait visit), so that no path costs O(streams). d is locked. */
#ifndef CUDALLOC_QTABLE_H
#define CUDALLOC_QTABLE_H

#include "types.h"

/* The live (not destroyed) queue of stream and owner, or NULL, from the
 * hash (and remembered as the last found). */
ca_queue_t *ca_qtable_lookup(ca_device_t *d, ca_stream_t stream, uint64_t owner);
/* The same. A program allocates and frees on one stream at a time: the
 * last queue found answers most lookups with one compare. It is forgotten
 * with its queue, so it is always a queue of the table. */
static inline ca_queue_t *ca_qtable_get(ca_device_t *d, ca_stream_t stream, uint64_t owner) {
  ca_queue_t *q = d->qtable_last;
  if (q && q->stream == stream && q->owner == owner) return q;
  return ca_qtable_lookup(d, stream, owner);
}
/* Files a new queue in the hash and the list of all; false: no memory. */
bool ca_qtable_put(ca_device_t *d, ca_queue_t *q);
/* Takes q out of the hash (a destroyed stream's value may be reused). */
void ca_qtable_forget(ca_device_t *d, ca_queue_t *q);
/* Takes q out of the hash and every list. */
void ca_qtable_remove(ca_device_t *d, ca_queue_t *q);
void ca_qtable_free(ca_device_t *d);

/* Puts q on list l once; takes it off (when it is on). */
void ca_qlist_add(ca_device_t *d, ca_qlist_id_t l, ca_queue_t *q);
void ca_qlist_del(ca_device_t *d, ca_qlist_id_t l, ca_queue_t *q);
static inline ca_queue_t *ca_qlist_first(const ca_device_t *d, ca_qlist_id_t l) { return d->qlists[l]; }
static inline ca_queue_t *ca_qlist_next(const ca_queue_t *q, ca_qlist_id_t l) { return q->link[l].next; }

#endif /* CUDALLOC_QTABLE_H */
