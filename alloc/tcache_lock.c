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

void ca_tclock_hold(ca_tclock_t *l) {
  while (!ca_tclock_try(l)) sched_yield();   /* its other holder holds it for a flush */
}

static bool asymmetric(void) { return __atomic_load_n(&ca_tclock_asymmetric, __ATOMIC_RELAXED); }

void ca_tclock_claim(ca_tclock_t *l) {
  if (!asymmetric()) {
    while (__atomic_exchange_n(&l->busy, 1, __ATOMIC_ACQUIRE)) sched_yield();   /* held a few instructions */
    return;
  }
  __atomic_store_n(&l->stop, 1, __ATOMIC_SEQ_CST);
}

/* After it, every owner either has its busy store visible here, or will
 * see stop. Registered at init, the command cannot fail but for a kernel
 * bug: then no owner can be trusted to have fenced, and nothing is safe. */
void ca_tclock_barrier(bool others) {
  if (!asymmetric() || !others || CA_DEBUG(tclock_no_membarrier)) return;
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    ca_log("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after it was registered: aborting");
    abort();
  }
}

void ca_tclock_await(ca_tclock_t *l) {
  if (!asymmetric()) return;   /* the claim took it */
  while (__atomic_load_n(&l->busy, __ATOMIC_ACQUIRE)) sched_yield();   /* its owner leaves in a few instructions */
}

void ca_tclock_release_other(ca_tclock_t *l) {
  if (!asymmetric()) __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE);
  else __atomic_store_n(&l->stop, 0, __ATOMIC_RELEASE);
}
