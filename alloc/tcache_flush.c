/* What a thread's front cache gives back to the core, and how its counts
 * reach the statistics: flushes (a slow path, a stream's end, empty_cache,
 * a reset, shutdown), trims, folds, quiescing for the readers, a thread's
 * exit and a fork (tcache.c's opening comment says when each happens). */
#include "tcache.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "blocks.h"
#include "devlock.h"
#include "fence.h"
#include "ptrmap.h"
#include "sitelive.h"
#include "streams.h"
#include "tcache_layout.h"
#include "tcache_lock.h"

/* Every cache in the registry held (tc_registry.lock held), as another
 * thread than most of their owners: one barrier for all of them. */
static void hold_all(void) {
  bool others = false;
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) {
    ca_tclock_claim(&c->lock);
    others |= c != tc_mine;
  }
  ca_tclock_barrier(others);
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) ca_tclock_await(&c->lock);
}
static void unhold_all(void) {
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) ca_tclock_release_other(&c->lock);
}

// ----------------------------------------------------------------------------
// Flushing, folding, quiescing
// ----------------------------------------------------------------------------

/* A cached block back to the core: freed on its list's stream, as the
 * program's free would have left it (its free is counted already). */
static void give_back(ca_device_t *d, const tc_list_t *l, ca_block_t *b) {
  __atomic_store_n(&b->tc, 0, __ATOMIC_RELEASE);
  b->tc_next = NULL;
  ca_ptrmap_remove(&d->live, b->addr);
  ca_sitelive_add(ca_sitelive_of(d), b, -1);   /* its site held it until now, as the core's stats did */
  ca_queue_count_freed(d, b, false);
  bool gone = ca_stream_check(d, l->stream) != CUDA_SUCCESS;   /* destroyed unseen: wait like cudaFree */
  ca_queue_t *q = gone ? NULL : ca_queue_find_owned(d, l->stream, l->owner, true);
  ca_queue_add(d, q ? q : &d->epoch, b);
}

/* Moves c's counts for d into d's statistics, as the core's own paths
 * would have counted them. */
static void fold_into(ca_device_t *d, tc_counts_t *n) {
  tc_held_t h = held_of(n);
  d->stats.allocated_bytes.total += h.hit_bytes;
  d->stats.requested_bytes.total += h.hit_requested;
  ca_stat_add(&d->stats.num_allocs, h.hits);
  ca_stat_add(&d->stats.num_frees, h.frees);
  d->stats.requested_bytes.current += h.drift;
  ca_arena_live(d, 0, h.drift);
  *n = (tc_counts_t){.bytes = h.bytes, .requested = h.requested, .blocks = h.blocks};
}


/* The first class from cls (whose list is empty) below hi with cached
 * blocks, else hi: a trim visits every stream's list of 184 classes, and
 * a thread of 64 streams trims often, so empty classes are passed eight
 * at a time (one OR of eight loads each), with nothing added to the hits
 * and frees that keep the lists. */
static unsigned next_class(const tc_list_t *l, unsigned cls, unsigned hi) {
  for (cls++; cls < hi && (cls & 7); cls++)
    if (l->head[cls]) return cls;
  for (; cls + 8 <= hi; cls += 8) {
    ca_block_t *const *h = &l->head[cls];
    if ((uintptr_t)h[0] | (uintptr_t)h[1] | (uintptr_t)h[2] | (uintptr_t)h[3] | (uintptr_t)h[4] |
        (uintptr_t)h[5] | (uintptr_t)h[6] | (uintptr_t)h[7])
      break;
  }
  for (; cls < hi; cls++)
    if (l->head[cls]) return cls;
  return hi;
}

/* Gives c's cached blocks on d of the classes [lo, hi) back (those freed
 * on stream, when given); old_only: only the TC_OLD ones, marking the others
 * TC_OLD (a trim). */
static size_t flush_lists(ca_device_t *d, ca_tcache_t *c, ca_stream_t stream, bool old_only, unsigned lo,
                          unsigned hi, bool *foreign) {
  size_t bytes = 0;
  for (tc_list_t *l = c->lists; l < c->lists + CA_TCACHE_STREAMS; l++) {
    if (!l->blocks || l->dev != d->ordinal || (stream && l->stream != stream)) continue;
    for (unsigned cls = lo; l->blocks && cls < hi; cls++) {
      if (!l->head[cls] && (cls = next_class(l, cls, hi)) >= hi) break;
      ca_block_t **at = &l->head[cls];
      while (*at) {
        ca_block_t *b = *at;
        if (b->slot != d->slot) {   /* another arena's (a list is by ordinal): its own flush gives it back */
          if (foreign) *foreign = true;
          at = &b->tc_next;
          continue;
        }
        uintptr_t tc = __atomic_load_n(&b->tc, __ATOMIC_ACQUIRE);
        if (old_only && !(tc & TC_OLD)) {
          __atomic_store_n(&b->tc, tc | TC_OLD, __ATOMIC_RELEASE);
          at = &b->tc_next;
          continue;
        }
        *at = b->tc_next;
        l->blocks--;
        tc_counts_t *n = &c->counts[d->slot];
        bump(&n->bytes, -(int64_t)b->size);
        bump(&n->requested, -(int64_t)b->requested);
        bump(&n->blocks, -1);
        c->bytes[cls >= CA_TCACHE_SMALL_CLASSES] -= b->size;
        bytes += b->size;
        give_back(d, l, b);
      }
    }
  }
  return bytes;
}

/* c's lists that hold blocks, counted again by its owner, with c held:
 * what it may cache follows them (small_room). Only the owner writes
 * lists_held and room, and reads them unheld (ca_tcache_trim, claim); a
 * flush by another thread leaves them as they are, too high until the
 * owner's next trim or slow path counts again. */
static void recount_lists(ca_tcache_t *c) {
  unsigned n = 0;
  for (const tc_list_t *l = c->lists; l < c->lists + CA_TCACHE_STREAMS; l++) n += l->blocks != 0;
  c->lists_held = n;
  c->room[0] = small_room(c);
}

static size_t flush_cache(ca_device_t *d, ca_tcache_t *c, ca_stream_t stream, bool forget) {
  size_t bytes = flush_lists(d, c, stream, false, 0, CA_TCACHE_CLASSES, NULL);
  fold_into(d, &c->counts[d->slot]);
  /* d's block structs are about to be freed: the thread forgets what it
   * holds on every device (whose entries it cannot tell apart without
   * reading blocks of devices not locked); those frees go to the core. */
  if (forget)   /* relaxed stores: the owner's held_unheld reads them unheld */
    for (int w = 0; w < CA_TCACHE_HELD_WAYS; w++)
      for (size_t i = 0; i < CA_TCACHE_HELD; i++) {
        __atomic_store_n(&c->held[w][i].addr, 0, __ATOMIC_RELAXED);
        c->held[w][i].b = NULL;   /* read by the owner held only */
      }
  return bytes;
}

size_t ca_tcache_flush(ca_device_t *d, ca_stream_t stream, bool forget) {
  if (CA_DEBUG(tcache_no_flush) && !forget) return 0;
  size_t bytes = 0;
  stream = stream ? ca_stream_normal(stream) : NULL;
  pthread_mutex_lock(&tc_registry.lock);
  hold_all();
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) {
    bytes += flush_cache(d, c, stream, forget);
    if (c == tc_mine) recount_lists(c);   /* the owner's own: a destroyed stream's list counts no more */
  }
  unhold_all();
  pthread_mutex_unlock(&tc_registry.lock);
  return bytes;
}

size_t ca_tcache_flush_mine(ca_device_t *d) {
  ca_tcache_t *c = me();
  if (!has_cache(c) || CA_DEBUG(tcache_no_flush)) return 0;
  hold(c);
  /* Large blocks took memory the core needed: they go back, and the thread
   * keeps less of them for a while, not to send the core down this path
   * again at once; the small lists stay (at most thread_cache_kb, reused by
   * the program), unless the large blocks did not suffice: then the slow
   * path flushes every cache, this one whole, before it waits or fails.
   * Only large blocks on d count: c->bytes[1] is every device's, and
   * another device's took none of d's memory. */
  size_t held = c->bytes[1];
  size_t bytes = held ? flush_lists(d, c, NULL, false, CA_TCACHE_SMALL_CLASSES, CA_TCACHE_CLASSES, NULL) : 0;
  if (bytes) {
    c->room[1] = held / 2;
    fold_into(d, &c->counts[d->slot]);
  } else bytes = flush_cache(d, c, NULL, false);
  recount_lists(c);
  unhold(c);
  return bytes;
}

/* The refused large frees reached the large cap (none is refused while it
 * is 0: thread_cache_large_mb off). The owner alone writes the pressure:
 * read unheld. */
static bool large_pressure(const ca_tcache_t *c) {
  return large_capacity() && c->refused_large >= large_capacity();
}

/* Small and large blocks are trimmed apart, each when its own pressure
 * reaches its own cap: a few refused MiB-sized frees must not empty the
 * small lists that the program reuses. */
static __attribute__((noinline)) void trim(ca_device_t *d, ca_tcache_t *c) {
  hold(c);   /* before bytes is read: another thread's flush changes it */
  bool small = c->refused >= c->room[0], large = c->bytes[1] && large_pressure(c);
  if (!small && !large) {   /* pressure on the large cap, and no large block cached (yet) */
    unhold(c);
    return;
  }
  bool foreign_small = false, foreign_large = false;
  if (small) c->refused = 0, flush_lists(d, c, NULL, true, 0, CA_TCACHE_SMALL_CLASSES, &foreign_small);
  if (large) c->refused_large = 0, flush_lists(d, c, NULL, true, CA_TCACHE_SMALL_CLASSES, CA_TCACHE_CLASSES, &foreign_large);
  recount_lists(c);
  unhold(c);
  /* The pressure was the whole cache's, and is spent: the other arenas'
   * blocks get the same trim, or a cache full of them would refuse every
   * free for good (a thread that moved to a stream of another arena). */
  if (!CA_DEBUG(tcache_trim_own_arena_only)) c->trim_siblings |= (foreign_small ? 1u : 0) | (foreign_large ? 2u : 0);
}

/* A sibling arena's share of the trim that d's skipped (trim_siblings). */
static void trim_sibling(ca_device_t *s, void *arg) {
  ca_tcache_t *c = me();
  unsigned what = *(const unsigned *)arg;
  hold(c);
  if (what & 1) flush_lists(s, c, NULL, true, 0, CA_TCACHE_SMALL_CLASSES, NULL);
  if (what & 2) flush_lists(s, c, NULL, true, CA_TCACHE_SMALL_CLASSES, CA_TCACHE_CLASSES, NULL);
  unhold(c);
}

void ca_tcache_trim_siblings(ca_device_t *d) {
  ca_tcache_t *c = me();
  if (!has_cache(c)) return;
  unsigned what = c->trim_siblings;
  c->trim_siblings = 0;
  ca_arena_each_sibling(d, false, trim_sibling, &what);
}

bool ca_tcache_trim(ca_device_t *d) {
  ca_tcache_t *c = me();
  if (!has_cache(c) || CA_DEBUG(tcache_no_trim)) return false;
  if (c->refused < c->room[0] && !large_pressure(c)) return false;
  trim(d, c);
  return c->trim_siblings != 0;
}

void ca_tcache_fold(const ca_device_t *d, cudalloc_stats_t *s) {
  pthread_mutex_lock(&tc_registry.lock);
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) {
    tc_held_t h = held_of(&c->counts[d->slot]);
    s->allocated_bytes.current -= h.bytes;
    s->allocated_bytes.total += h.hit_bytes;
    s->requested_bytes.current += h.drift - h.requested;
    s->requested_bytes.total += h.hit_requested;
    s->num_live_blocks.current -= h.blocks;
    s->num_allocs.current += h.hits, s->num_allocs.total += h.hits;
    s->num_frees.current += h.frees, s->num_frees.total += h.frees;
  }
  pthread_mutex_unlock(&tc_registry.lock);   /* the counts that never fall: their peaks are the snapshot's (stats.c) */
}

void ca_tcache_quiesce(void) {
  pthread_mutex_lock(&tc_registry.lock);
  hold_all();
}

int64_t ca_tcache_blocks(const ca_device_t *d) {
  int64_t n = 0;
  pthread_mutex_lock(&tc_registry.lock);
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) n += held_of(&c->counts[d->slot]).blocks;
  pthread_mutex_unlock(&tc_registry.lock);
  return n;
}

int64_t ca_tcache_drift(const ca_device_t *d) {
  int64_t drift = 0;
  for (ca_tcache_t *c = tc_registry.caches; c; c = c->next) drift += held_of(&c->counts[d->slot]).drift;
  return drift;
}

void ca_tcache_resume(void) {
  unhold_all();
  pthread_mutex_unlock(&tc_registry.lock);
}

/* An exiting thread's cache goes back to the core, device by device. */
void tc_thread_exit(void *arg) {
  ca_tcache_t *c = arg;
  if (c->gen != __atomic_load_n(&tc_registry.gen, __ATOMIC_ACQUIRE)) return;   /* the parent's, in a fork child */
  bool exited = __atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE);   /* no device call after exit */
  for (int i = 0; !exited && i < CA_MAX_SLOTS; i++) {   /* every arena */
    ca_device_t *d = __atomic_load_n(&ca_state.devices[i], __ATOMIC_ACQUIRE);
    if (!d) continue;
    ca_devlock_take(&d->lock);
    hold(c);
    if (d->ready) flush_cache(d, c, NULL, true);
    unhold(c);
    ca_devlock_release(&d->lock);
  }
  pthread_mutex_lock(&tc_registry.lock);
  if (c->prev) c->prev->next = c->next;
  else tc_registry.caches = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&tc_registry.lock);
  if (tc_mine == c) tc_mine = &tc_none;
  free(c);
}

void ca_tcache_forget_after_fork(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  tc_registry.lock = fresh;
  tc_registry.caches = NULL;
  __atomic_add_fetch(&tc_registry.gen, 1, __ATOMIC_ACQ_REL);
  tc_mine = &tc_none;
}

#ifdef CA_TESTING
bool ca_tcache_none_untouched(void) {
  static const ca_tcache_t zero;
  return !memcmp(&tc_none, &zero, sizeof tc_none);
}
#endif

