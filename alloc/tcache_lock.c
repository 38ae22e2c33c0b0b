/* The front cache's lock (tcache_lock.h says why it is asymmetric). */
#include "tcache_lock.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

bool ca_tclock_asymmetric;

static long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

static void choose(void) {
  if (CA_DEBUG(tclock_exchange)) return;
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  __atomic_store_n(&ca_tclock_asymmetric, ok, __ATOMIC_RELEASE);
}

void ca_tclock_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose);
}

static bool asymmetric(void) { return __atomic_load_n(&ca_tclock_asymmetric, __ATOMIC_RELAXED); }

void ca_tclock_make(ca_tclock_t *l) {
  ca_tclock_init();
  __atomic_store_n(&l->busy, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&l->stop, asymmetric() ? 0 : CA_TCLOCK_FENCED, __ATOMIC_RELEASE);
}

/* Without membarrier: Dekker's exclusion with sequentially consistent
 * read-modify-writes on each side (the owner's of busy before its load of
 * stop, the other's of stop before its load of busy: in their one total
 * order, one of them sees the other's). Not fences, which TSan cannot see. */
bool ca_tclock_try_stopped(ca_tclock_t *l) {
  if (__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE) == CA_TCLOCK_FENCED) {
    if (CA_DEBUG(tclock_fenced_relaxed)) {   /* the store may then pass the load: both inside */
      __atomic_store_n(&l->busy, 1, __ATOMIC_RELAXED);
      if (!(__atomic_load_n(&l->stop, __ATOMIC_RELAXED) & CA_TCLOCK_CLAIMED)) return true;
    } else {
      __atomic_exchange_n(&l->busy, 1, __ATOMIC_SEQ_CST);
      if (!(__atomic_load_n(&l->stop, __ATOMIC_SEQ_CST) & CA_TCLOCK_CLAIMED)) return true;
    }
  }
  __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE);
  return false;
}

void ca_tclock_hold(ca_tclock_t *l) {
  while (!ca_tclock_try(l)) sched_yield();   /* its other holder holds it for a flush */
}

/* A read-modify-write: without membarrier, the other side's half of ca_tclock_try_stopped's. */
void ca_tclock_claim(ca_tclock_t *l) { __atomic_fetch_or(&l->stop, CA_TCLOCK_CLAIMED, __ATOMIC_SEQ_CST); }

/* After it, every owner either has its busy store visible here, or will
 * see stop. Registered at init, the command cannot fail but for a kernel
 * bug: then no owner can be trusted to have fenced, and nothing is safe. */
void ca_tclock_barrier(bool others) {
  /* without membarrier the claims and the awaits' loads are the other side's fence */
  if (!asymmetric() || !others || CA_DEBUG(tclock_no_membarrier)) return;
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    ca_log("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after it was registered: aborting");
    abort();
  }
}

void ca_tclock_await(ca_tclock_t *l) {
  while (__atomic_load_n(&l->busy, __ATOMIC_SEQ_CST)) sched_yield();   /* its owner leaves in a few instructions */
}

void ca_tclock_release_other(ca_tclock_t *l) { __atomic_fetch_and(&l->stop, ~CA_TCLOCK_CLAIMED, __ATOMIC_RELEASE); }
