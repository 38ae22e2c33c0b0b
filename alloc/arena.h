/* "arena.c": a device's arenas, as the core below the device module sees
 * them. With arenas:N an ordinal is N sibling devices (a ca_device_t each:
 * lock, reservation, pools, queues, pointer map, statistics; types.h's
 * slots), so that the core runs unchanged inside one and threads on
 * different streams take different locks. Here: finding an arena, naming
 * it in reports, and the ordinal-wide cap on reserved memory that growth
 * charges. siblings.h has what crosses arenas above the core (routing,
 * squeezing a sibling, the folds). A free finds its arena by address
 * (ca_device_lock_owner); a block's arena is its slot (b->slot). */
#ifndef CUDALLOC_ARENA_H
#define CUDALLOC_ARENA_H

#include <stdio.h>

#include "debug.h"
#include "types.h"

/* " arena k" for a sibling, "" for an ordinal's first arena: what the
 * reports add after "device N", so that arenas:1 prints as before. */
static inline const char *ca_arena_label(const ca_device_t *d, char buf[16]) {
  buf[0] = 0;
  if (d->arena) snprintf(buf, 16, " arena %d", d->arena);
  return buf;
}

/* Arena k of ordinal (NULL: not made yet). */
static inline ca_device_t *ca_arena_at(int ordinal, int k) {
  return __atomic_load_n(&ca_state.devices[k * CA_MAX_DEVICES + ordinal], __ATOMIC_ACQUIRE);
}

/* fn on every ready arena of d's ordinal but d, that arena's lock alone
 * held (never two arena locks at once: their order is not defined); with
 * d_locked, d's lock is let go meanwhile and taken again at the end. */
void ca_arena_each_sibling(ca_device_t *d, bool d_locked, void (*fn)(ca_device_t *, void *), void *arg);

/* Growth's charge of bytes against the ordinal's limit, for all its
 * arenas together: false (nothing charged) when it would pass it. The
 * refund gives bytes back (pages released, a create that failed). */
bool ca_arena_charge(ca_device_t *d, size_t bytes);
void ca_arena_refund(ca_device_t *d, size_t bytes);
/* An arena short of memory squeezes its siblings with its own lock let go
 * (never two arena locks at once), and their threads, whose frees were
 * pending, grew into what the squeeze gave back before the arena could:
 * it failed with the device almost empty of live memory (test_stress_
 * threads' classic run under load: 3.4 MiB allocated of 500 MiB reserved).
 * So it first claims the bytes its growth needs: until it lets the claim
 * go, the other arenas' charges leave them out of the limit and fail, and
 * their threads wait for their own frees instead. One claim an ordinal at
 * a time. Returns the claim's token, 0 when another arena holds one. */
uint64_t ca_arena_claim(ca_device_t *d, size_t bytes);
/* Lets the claim of token go (0: none); ordinal's, as d may be gone. */
void ca_arena_unclaim(int ordinal, uint64_t token);
/* Another arena of d's ordinal holds a claim. */
bool ca_arena_claimed_elsewhere(const ca_device_t *d);
/* cudalloc_reset_peaks (d: the ordinal's first arena, locked): the
 * ordinal's peaks of reserved bytes (and of allocated and requested bytes,
 * when kept) are their currents. */
void ca_arena_reset_peak(const ca_device_t *d);
/* The highest the ordinal's reserved bytes were (since the last reset). */
static inline size_t ca_arena_reserved_peak(const ca_device_t *d) {
  return __atomic_load_n(&ca_state.reserved_peak[d->ordinal], __ATOMIC_ACQUIRE);
}
/* Every arena's reserved bytes on d's ordinal. */
static inline size_t ca_arena_reserved(const ca_device_t *d) {
  return __atomic_load_n(&ca_state.reserved[d->ordinal], __ATOMIC_ACQUIRE);
}

/* Exact ordinal peaks of allocated and requested bytes with no line that
 * every allocation of two threads writes. Each arena's statistics peak
 * apart, and the sum of their peaks says more than the ordinal ever held
 * (test_trace's threaded log, arenas:2: 91 MB where the replay read 68);
 * an ordinal-wide counter moved by every core allocation and free made
 * two GPU-like threads 1.4x one where they made 1.85x (its line moves
 * between the CPUs twice a pair). So each arena holds a lease: how far its
 * bytes may rise without asking. The leases sum to at most the peak, so
 * while every arena stays within its own the sum cannot pass the peak,
 * and nothing is shared. An arena that would pass its lease asks
 * (ca_arena_live_ask, under the ordinal's mutex): from the headroom left,
 * or else by revoking the others' leases and reading their bytes, which
 * gives the sum at one moment, a new peak if it is higher, and new
 * leases. A revoked arena's next rise asks too, and waits for the mutex.
 * Kept from the moment the ordinal's second arena is made (before, arena
 * 0's own figures are the ordinal's): a load and a branch until then. */
void ca_arena_live_ask(const ca_device_t *d);
static inline void ca_arena_live(const ca_device_t *d, int64_t bytes, int64_t requested) {
  if (!d->live_leased) return;
  ca_lease_t *l = &ca_state.leases[d->slot];   /* its bytes are written under d's lock alone */
  int64_t a = __atomic_load_n(&l->bytes[0], __ATOMIC_RELAXED) + bytes;
  int64_t r = __atomic_load_n(&l->bytes[1], __ATOMIC_RELAXED) + requested;
  if (bytes <= 0 && requested <= 0) {   /* a fall passes no lease */
    __atomic_store_n(&l->bytes[0], a, __ATOMIC_RELAXED);
    __atomic_store_n(&l->bytes[1], r, __ATOMIC_RELAXED);
    return;
  }
  /* The rise before the look at the lease, as a revoker writes the lease
   * before it reads the bytes (all sequentially consistent: a fence would
   * do on x86, and ThreadSanitizer models none): one sees the other's. */
  __atomic_store_n(&l->bytes[0], a, __ATOMIC_SEQ_CST);
  __atomic_store_n(&l->bytes[1], r, __ATOMIC_SEQ_CST);
  if ((a > __atomic_load_n(&l->lease[0], __ATOMIC_SEQ_CST) || r > __atomic_load_n(&l->lease[1], __ATOMIC_SEQ_CST)) &&
      !CA_DEBUG(arena_lease_never_asks))
    ca_arena_live_ask(d);
}
/* Before sibling d of its ordinal's first arena (ready) is set up (d
 * locked): the leases start from the first arena's figures, under its
 * lock (all the headroom its own), so that none of its changes is missed;
 * d's own count in them from its first. */
void ca_arena_keep_live(ca_device_t *d);
/* The ordinal's exact peaks into a fold of its arenas' statistics (false:
 * not kept: one arena has ever allocated, whose peaks are exact). */
bool ca_arena_live_peaks(int ordinal, int64_t *allocated, int64_t *requested);

#endif /* CUDALLOC_ARENA_H */
