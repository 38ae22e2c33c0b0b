/* "tcache_lock.c": the lock of one thread's front cache, cheap for the
 * thread that owns the cache and dear for every other.
 *
 * The owner takes it on every hit and every cached free; other threads (a
 * flusher, a reader holding every cache still) rarely. So the owner
 * announces itself with a plain store (busy) and then looks for another
 * thread's claim (stop), with only a compiler barrier between them; the
 * other thread sets stop, makes every running thread of the process
 * execute a full memory barrier (membarrier(2)'s private expedited
 * command), and only then looks at busy. The owner's barrier falls either
 * after its store, and then the other thread sees busy and waits for the
 * owner to leave; or before its load, and then the owner sees stop and
 * stays out (Dekker's exclusion, the owner's fence paid by the rare side).
 * Where membarrier is not available (an old kernel), each side fences
 * instead (a sequentially consistent read-modify-write): the lock's stop
 * word then says so for good (FENCED), so that the owner's one test of stop
 * sends it to the fenced take; the owner never tests the mode itself.
 *
 * Other threads must not take one lock at once (the registry lock orders
 * them). The mode is chosen before the first lock is made (ca_tclock_make)
 * and never changes. */
#ifndef CUDALLOC_TCACHE_LOCK_H
#define CUDALLOC_TCACHE_LOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "debug.h"

typedef struct ca_tclock_s {
  int busy;   /* the owner is inside, or about to look at stop */
  int stop;   /* CA_TCLOCK_CLAIMED: another thread holds it, or is about to; | CA_TCLOCK_FENCED: no membarrier */
} ca_tclock_t;
#define CA_TCLOCK_CLAIMED 1
#define CA_TCLOCK_FENCED 2

/* True once membarrier is registered: the asymmetric mode. */
extern bool ca_tclock_asymmetric;

/* Chooses the mode (once; before the first lock is made). */
void ca_tclock_init(void);
/* A new lock, free, in the process's mode (chosen here if it was not yet). */
void ca_tclock_make(ca_tclock_t *l);

/* The owner's try once stop is not clear (tcache_lock.c). */
bool ca_tclock_try_stopped(ca_tclock_t *l);
static inline void ca_tclock_release(ca_tclock_t *l) { __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE); }
/* The owner's try without a call: false (the lock let go) whenever stop is
 * not clear, where ca_tclock_try would ask further (a fenced lock, whose
 * owner then takes it through ca_tclock_try). */
static inline bool ca_tclock_try_inline(ca_tclock_t *l) {
  __atomic_store_n(&l->busy, 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);   /* the store stays before the load: the CPU's order is membarrier's */
  if (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE) || CA_DEBUG(tclock_owner_ignores_stop)) return true;
  ca_tclock_release(l);
  return false;
}
/* The owner's try: true when it holds the lock. Never waits. */
static inline bool ca_tclock_try(ca_tclock_t *l) { return ca_tclock_try_inline(l) || ca_tclock_try_stopped(l); }
/* The owner's blocking take (it waits for another thread to let go). */
void ca_tclock_hold(ca_tclock_t *l);

/* Another thread's take of some locks at once, in three steps so that
 * one barrier serves them all: claim each, one barrier (others: false
 * when every lock claimed is the calling thread's own, which needs none),
 * then await each; released one by one. */
void ca_tclock_claim(ca_tclock_t *l);
void ca_tclock_barrier(bool others);
void ca_tclock_await(ca_tclock_t *l);
void ca_tclock_release_other(ca_tclock_t *l);

#endif /* CUDALLOC_TCACHE_LOCK_H */
