/* "devlock.c": the device lock, a three-state futex mutex (Drepper,
 * "Futexes Are Tricky", mutex 3).
 *
 * Every allocation and free below the front cache takes its device's lock
 * once; a pthread mutex cost a GPU-like pair 68 of its 994 instructions
 * (two calls into libc, each checking the mutex's type and owner). Here a
 * take is one compare-and-swap and a release one exchange, inline; only a
 * contended take leaves the line (a short spin, then FUTEX_WAIT), and only
 * a release that finds waiters makes a system call.
 *
 * state: 0 free, 1 held, 2 held and maybe waited for. Zero is the free
 * lock, so a calloc'd device needs no init. Not recursive, no trylock, no
 * owner check: the device lock never needed them (a default pthread mutex
 * would have deadlocked on a recursive take just the same). The take
 * acquires and the release releases, which is what ThreadSanitizer needs to
 * see the critical sections ordered; the core's TSan build also tells it
 * that this is a mutex, so that it keeps checking lock order as it did for
 * the pthread mutex. The lock itself has no fork handler: the core's
 * (ca_fork_child, lifecycle.c, run by the shim's pthread_atfork) gives a
 * fork child fresh devices, whose zeroed lock is free. A program linked
 * with the archive that forks without calling it keeps the parent's
 * devices, and a lock another thread held at the fork stays held in the
 * child, as a pthread mutex's would (test_core_devlock's fork twins). */
#ifndef CUDALLOC_DEVLOCK_H
#define CUDALLOC_DEVLOCK_H

#include <stdbool.h>

#include "debug.h"
#include "tsan.h"

/* CA_DEVLOCK_BARE: the lock's own suite, where TSan must check its atomics
 * (an annotated mutex's are ignored). */
#if defined(CA_TSAN) && !defined(CA_DEVLOCK_BARE)
#include <sanitizer/tsan_interface.h>
#define CA_DEVLOCK_TSAN(call) call
#else
#define CA_DEVLOCK_TSAN(call) ((void)0)
#endif

typedef struct ca_devlock_s {
  int state;
} ca_devlock_t;

#define CA_DEVLOCK_INIT {0}

/* The calling thread's takes that found a device lock held: what moves a
 * thread off its device's first arena under arena_spread:contended
 * (siblings.c). Counted on the contended side only. */
extern __thread unsigned ca_devlock_contended;

/* Out of line: a contended take (spins a little, then sleeps), and the
 * release's wake of one sleeper. */
void ca_devlock_wait(ca_devlock_t *l);
void ca_devlock_wake(ca_devlock_t *l);

static inline void ca_devlock_init(ca_devlock_t *l) { __atomic_store_n(&l->state, 0, __ATOMIC_RELAXED); }
/* Asserts (test and sanitizer builds) that nobody holds it. */
static inline void ca_devlock_destroy(ca_devlock_t *l) {
  (void)l;
  ca_assert(__atomic_load_n(&l->state, __ATOMIC_RELAXED) == 0);
  CA_DEVLOCK_TSAN(__tsan_mutex_destroy(l, 0));
}

static inline void ca_devlock_take(ca_devlock_t *l) {
  CA_DEVLOCK_TSAN(__tsan_mutex_pre_lock(l, 0));
  int free = 0;
  if (CA_DEBUG(devlock_no_exclusion)) __atomic_store_n(&l->state, 1, __ATOMIC_RELAXED);
  else if (!__atomic_compare_exchange_n(&l->state, &free, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    ca_devlock_wait(l);
  CA_DEVLOCK_TSAN(__tsan_mutex_post_lock(l, 0, 0));
}

static inline void ca_devlock_release(ca_devlock_t *l) {
  CA_DEVLOCK_TSAN(__tsan_mutex_pre_unlock(l, 0));
  if (__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) == 2 && !CA_DEBUG(devlock_no_wake)) ca_devlock_wake(l);
  CA_DEVLOCK_TSAN(__tsan_mutex_post_unlock(l, 0));
}

#endif /* CUDALLOC_DEVLOCK_H */
