/* A device's arenas: the ordinal-wide charge of reserved memory and the
 * ordinal's live bytes (arena.h). */
#include "arena.h"

#include <pthread.h>
#include <stdint.h>

#include "devlock.h"

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

/* A claim's token: its bytes above the claiming arena's index + 1. */
#define CLAIM_ARENA_BITS 8
_Static_assert(CA_MAX_ARENAS < (1 << CLAIM_ARENA_BITS), "an arena's index + 1 fits a claim's low bits");

uint64_t ca_arena_claim(ca_device_t *d, size_t bytes) {
  uint64_t token = (uint64_t)bytes << CLAIM_ARENA_BITS | (uint64_t)(d->arena + 1), none = 0;
  if (bytes > d->limit || bytes > UINT64_MAX >> CLAIM_ARENA_BITS) return 0;   /* a growth that could never fit */
  return __atomic_compare_exchange_n(&ca_state.claim[d->ordinal], &none, token, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)
             ? token
             : 0;
}

void ca_arena_unclaim(int ordinal, uint64_t token) {
  if (token) __atomic_compare_exchange_n(&ca_state.claim[ordinal], &token, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* The bytes of the limit another arena's claim holds for it. */
static size_t claimed_by_others(const ca_device_t *d) {
  uint64_t c = __atomic_load_n(&ca_state.claim[d->ordinal], __ATOMIC_ACQUIRE);
  if (!c || (c & ((1u << CLAIM_ARENA_BITS) - 1)) == (uint64_t)(d->arena + 1) || CA_DEBUG(arena_claim_ignored)) return 0;
  return (size_t)(c >> CLAIM_ARENA_BITS);
}

bool ca_arena_claimed_elsewhere(const ca_device_t *d) { return claimed_by_others(d) > 0; }

bool ca_arena_charge(ca_device_t *d, size_t bytes) {
  size_t *total = &ca_state.reserved[d->ordinal];
  if (CA_DEBUG(arena_cap_per_arena)) {   /* the planted fault: each arena against the whole limit */
    if ((size_t)d->stats.reserved_bytes.current + bytes > d->limit) return false;
    raise_peak(d->ordinal, __atomic_add_fetch(total, bytes, __ATOMIC_ACQ_REL));
    return true;
  }
  size_t held = claimed_by_others(d), limit = held < d->limit ? d->limit - held : 0;
  size_t now = __atomic_load_n(total, __ATOMIC_ACQUIRE);
  do {
    if (now > limit || bytes > limit - now) return false;
  } while (!__atomic_compare_exchange_n(total, &now, now + bytes, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
  raise_peak(d->ordinal, now + bytes);
  return true;
}

static void live_reset_peaks(int ordinal);

void ca_arena_reset_peak(const ca_device_t *d) {
  __atomic_store_n(&ca_state.reserved_peak[d->ordinal], ca_arena_reserved(d), __ATOMIC_RELEASE);
  live_reset_peaks(d->ordinal);
}

void ca_arena_refund(ca_device_t *d, size_t bytes) {
  if (bytes) __atomic_sub_fetch(&ca_state.reserved[d->ordinal], bytes, __ATOMIC_ACQ_REL);
}

// ----------------------------------------------------------------------------
// The ordinal's live bytes: exact peaks by leases (arena.h)
// ----------------------------------------------------------------------------

#define REVOKED INT64_MIN   /* a lease no rise stays within: the arena asks */

static ca_lease_t *lease_at(int ordinal, int k) { return &ca_state.leases[k * CA_MAX_DEVICES + ordinal]; }
static int64_t load(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static void store(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* The sum of kind k's bytes over the ordinal's arenas at one moment, the
 * others' leases revoked first (o's mutex held): a rise of theirs from now
 * on asks, and waits for the mutex, so what is read is a moment of the
 * ordinal (at arenas:2 exactly: one arena is read, the asker's own bytes
 * stand still under its lock; with more, a free read before and an
 * allocation read after it on two other arenas may add up to a moment that
 * was not, an over-estimate no test has seen). seen[j]: arena j's bytes. */
static int64_t revoke_and_sum(int ordinal, int k, int64_t seen[CA_MAX_ARENAS]) {
  for (int j = 0; j < (int)ca_config.arenas; j++) __atomic_store_n(&lease_at(ordinal, j)->lease[k], REVOKED, __ATOMIC_SEQ_CST);
  int64_t sum = 0;
  for (int j = 0; j < (int)ca_config.arenas; j++)
    sum += seen[j] = __atomic_load_n(&lease_at(ordinal, j)->bytes[k], __ATOMIC_SEQ_CST);
  return sum;
}

/* New leases after a sum: each arena made its bytes and an equal share of
 * the headroom to the peak, the asker the rest of it (given all to the
 * asker, the others' next rises asked again: the two arenas of two
 * GPU-like threads took turns revoking each other's leases). */
static void regrant(ca_live_t *o, int ordinal, int k, const int64_t seen[CA_MAX_ARENAS], int64_t sum, int to) {
  int64_t peak = load(&o->peak[k]), made = 0, given = 0;
  for (int j = 0; j < (int)ca_config.arenas; j++) made += ca_arena_at(ordinal, j) != NULL;
  int64_t share = made ? (peak - sum) / made : 0;
  for (int j = 0; j < (int)ca_config.arenas; j++) {
    if (j == to) continue;
    int64_t lease = seen[j] + (ca_arena_at(ordinal, j) ? share : 0);
    store(&lease_at(ordinal, j)->lease[k], lease);
    given += lease;
  }
  store(&lease_at(ordinal, to)->lease[k], peak - given);   /* its bytes and all that is not shared out */
  o->leased[k] = peak;
}

static void ask(ca_live_t *o, const ca_device_t *d, int k) {
  ca_lease_t *mine = &ca_state.leases[d->slot];
  int64_t have = load(&mine->bytes[k]), lease = load(&mine->lease[k]);
  if (have <= lease) return;
  if (lease != REVOKED) {   /* from the headroom: what it needs, and half of what is left over */
    int64_t need = have - lease, headroom = load(&o->peak[k]) - o->leased[k];
    if (need <= headroom) {
      int64_t more = need + (headroom - need) / 2;
      store(&mine->lease[k], lease + more);
      o->leased[k] += more;
      return;
    }
  }
  int64_t seen[CA_MAX_ARENAS];
  int64_t sum = revoke_and_sum(d->ordinal, k, seen);
  if (sum > load(&o->peak[k])) __atomic_store_n(&o->peak[k], sum, __ATOMIC_RELEASE);
  regrant(o, d->ordinal, k, seen, sum, d->arena);
}

void ca_arena_live_ask(const ca_device_t *d) {
  ca_live_t *o = &ca_state.live[d->ordinal];
  pthread_mutex_lock(&o->lock);
  ask(o, d, 0);
  ask(o, d, 1);
  pthread_mutex_unlock(&o->lock);
}

/* cudalloc_reset_peaks: the peaks are the sums now. */
static void live_reset_peaks(int ordinal) {
  ca_live_t *o = &ca_state.live[ordinal];
  if (!__atomic_load_n(&o->kept, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&o->lock);
  for (int k = 0; k < 2; k++) {
    int64_t seen[CA_MAX_ARENAS];
    int64_t sum = revoke_and_sum(ordinal, k, seen);
    __atomic_store_n(&o->peak[k], sum, __ATOMIC_RELEASE);
    regrant(o, ordinal, k, seen, sum, 0);
  }
  pthread_mutex_unlock(&o->lock);
}

void ca_arena_keep_live(ca_device_t *d) {
  int ordinal = d->ordinal;
  ca_live_t *o = &ca_state.live[ordinal];
  ca_device_t *first = ca_arena_at(ordinal, 0);
  d->live_leased = true;
  if (__atomic_load_n(&o->kept, __ATOMIC_ACQUIRE) || !first) return;
  ca_devlock_release(&d->lock);   /* never two arena locks at once; d is not ready: nobody else takes it */
  ca_devlock_take(&first->lock);
  pthread_mutex_lock(&o->lock);
  if (!o->kept) {
    const cudalloc_stat_t *st[2] = {&first->stats.allocated_bytes, &first->stats.requested_bytes};
    for (int k = 0; k < 2; k++) {
      int64_t peak = st[k]->peak > st[k]->current ? st[k]->peak : st[k]->current;
      for (int j = 0; j < (int)ca_config.arenas; j++) {   /* the others hold nothing yet, and no lease */
        store(&lease_at(ordinal, j)->bytes[k], j ? 0 : st[k]->current);
        store(&lease_at(ordinal, j)->lease[k], j ? 0 : peak);
      }
      __atomic_store_n(&o->peak[k], peak, __ATOMIC_RELEASE);
      o->leased[k] = peak;
    }
    first->live_leased = true;
    __atomic_store_n(&o->kept, true, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&o->lock);
  ca_devlock_release(&first->lock);
  ca_devlock_take(&d->lock);
}

bool ca_arena_live_peaks(int ordinal, int64_t *allocated, int64_t *requested) {
  ca_live_t *o = &ca_state.live[ordinal];
  if (!__atomic_load_n(&o->kept, __ATOMIC_ACQUIRE)) return false;
  *allocated = __atomic_load_n(&o->peak[0], __ATOMIC_ACQUIRE);
  *requested = __atomic_load_n(&o->peak[1], __ATOMIC_ACQUIRE);
  return true;
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
