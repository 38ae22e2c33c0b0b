/* A device's arenas: the ordinal-wide charge of reserved memory (arena.h). */
#include "arena.h"

// ----------------------------------------------------------------------------
// The ordinal's cap
// ----------------------------------------------------------------------------

/* The ordinal's peak, exact where the arenas' peaks only add up to a bound
 * (they need not peak at once). A charge counts from just before its
 * driver call: a create that fails raises it too. */
static void raise_peak(int ordinal, size_t now) {
  size_t *peak = &ca_state.reserved_peak[ordinal], was = __atomic_load_n(peak, __ATOMIC_ACQUIRE);
  while (now > was && !__atomic_compare_exchange_n(peak, &was, now, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
}

bool ca_arena_charge(ca_device_t *d, size_t bytes) {
  size_t *total = &ca_state.reserved[d->ordinal];
  if (CA_DEBUG(arena_cap_per_arena)) {   /* the planted fault: each arena against the whole limit */
    if ((size_t)d->stats.reserved_bytes.current + bytes > d->limit) return false;
    raise_peak(d->ordinal, __atomic_add_fetch(total, bytes, __ATOMIC_ACQ_REL));
    return true;
  }
  size_t now = __atomic_load_n(total, __ATOMIC_ACQUIRE);
  do {
    if (now > d->limit || bytes > d->limit - now) return false;
  } while (!__atomic_compare_exchange_n(total, &now, now + bytes, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
  raise_peak(d->ordinal, now + bytes);
  return true;
}

void ca_arena_reset_peak(const ca_device_t *d) {
  __atomic_store_n(&ca_state.reserved_peak[d->ordinal], ca_arena_reserved(d), __ATOMIC_RELEASE);
}

void ca_arena_refund(ca_device_t *d, size_t bytes) {
  if (bytes) __atomic_sub_fetch(&ca_state.reserved[d->ordinal], bytes, __ATOMIC_ACQ_REL);
}

// ----------------------------------------------------------------------------
// Visiting the siblings
// ----------------------------------------------------------------------------

void ca_arena_each_sibling(ca_device_t *d, bool d_locked, void (*fn)(ca_device_t *, void *), void *arg) {
  if (d_locked) ca_devlock_release(&d->lock);
  for (int k = 0; k < (int)ca_config.arenas; k++) {
    ca_device_t *s = ca_arena_at(d->ordinal, k);
    if (!s || s == d) continue;
    ca_devlock_take(&s->lock);
    if (s->ready) fn(s, arg);
    ca_devlock_release(&s->lock);
  }
  if (d_locked) ca_devlock_take(&d->lock);
}
