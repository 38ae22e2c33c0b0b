/* "legacyq.c": while the program has used no stream but the legacy one,
 * cudaFree'd blocks wait in the legacy stream's queue (legacy_queue:auto). */
#ifndef CUDALLOC_LEGACYQ_H
#define CUDALLOC_LEGACYQ_H

#include "calm.h"
#include "types.h"

/* The mode's state is the calm word's CA_STIR_LEGACYQ bit (calm.h): clear
 * once the mode is over (or off), the one test the hot path makes. */
static inline bool ca_legacyq_is_over(void) { return !ca_stirred_by(CA_STIR_LEGACYQ); }

ca_stream_t ca_legacyq_alloc_stream_other(bool ordered, ca_stream_t stream);
void ca_legacyq_saw_slow(ca_stream_t stream);

/* The tag of the one thread the mode has seen (0: none yet), and the
 * calling thread's (0 until legacyq.c gives it one): inline, so that the
 * mode's common case costs two loads and no call. */
extern uint64_t ca_legacyq_owner;            /* atomic */
extern __thread uint64_t ca_legacyq_my_tag;

/* true when stream is the legacy one and the calling thread the mode's
 * owner: what the mode has seen already, nothing to do. An owner is taken
 * only while the mode is available, and ca_legacyq_reset forgets it. */
static inline bool ca_legacyq_owners_own(ca_stream_t stream) {
  uint64_t owner = __atomic_load_n(&ca_legacyq_owner, __ATOMIC_ACQUIRE);
  return (stream == NULL || stream == CA_STREAM_LEGACY) && owner && owner == ca_legacyq_my_tag;
}

/* The stream an allocation takes pending blocks of (called before any
 * device lock): a stream-ordered one's own (NULL normalized to the legacy
 * stream, and noted as by ca_legacyq_saw); for one that is not
 * stream-ordered, the legacy stream while the mode holds, else NULL (free
 * blocks only). */
static inline ca_stream_t ca_legacyq_over_stream(bool ordered, ca_stream_t stream) {
  return !ordered ? NULL : stream ? stream : CA_STREAM_LEGACY;
}
/* The same while the mode's bit is set (the caller tested it): the
 * owner's legacy stream inline, anything else through legacyq.c. */
static inline ca_stream_t ca_legacyq_alloc_stream_slow(bool ordered, ca_stream_t stream) {
  if (!ca_legacyq_owners_own(ordered ? stream : CA_STREAM_LEGACY))
    return ca_legacyq_alloc_stream_other(ordered, stream);
  /* not stream-ordered: the legacy queue only while the mode holds (read again) */
  return ordered || !ca_legacyq_is_over() ? CA_STREAM_LEGACY : NULL;
}
static inline ca_stream_t ca_legacyq_alloc_stream(bool ordered, ca_stream_t stream) {
  if (!ca_legacyq_is_over()) return ca_legacyq_alloc_stream_slow(ordered, stream);
  return ca_legacyq_over_stream(ordered, stream);
}

/* The program used stream from the calling thread (called before any
 * device lock): a stream other than the legacy one, or a second thread
 * (whose default stream may be a per-thread one), ends the mode. */
static inline void ca_legacyq_saw(ca_stream_t stream) {
  if (!ca_legacyq_is_over() && !ca_legacyq_owners_own(stream)) ca_legacyq_saw_slow(stream);
}
/* Something the legacy stream does not order has appeared (a stream, a
 * peer device, a capture): the mode ends for good. The legacy queue's
 * open blocks go under cudaFree's fence, and every device is
 * synchronized once (outside a capture), which proves complete the work
 * on the blocks handed out of that queue before. No device locked. */
void ca_legacyq_end(void);
/* The queue cudaFree'd block waits in while the mode holds (d locked);
 * NULL otherwise. */
ca_queue_t *ca_legacyq_free_queue(ca_device_t *d);
/* true when synchronizing stream proves complete all work issued before
 * on the device: the mode holds, and stream is the legacy one. */
bool ca_legacyq_sync_proves(ca_stream_t stream);
/* Back to the start (shutdown, fork child). */
void ca_legacyq_reset(void);

#endif /* CUDALLOC_LEGACYQ_H */
