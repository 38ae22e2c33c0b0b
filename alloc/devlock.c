/* The device lock's contended side (devlock.h says what the states mean). */
#include "devlock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A hundred pauses (0.3 to 5 microseconds, by CPU): a holder that is
 * running lets go within them (a pair's critical section is a few hundred
 * instructions), and one that was preempted is slept on, not spun for. */
#define SPINS 100

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static long futex(int *addr, int op, int val) {
  return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

__thread unsigned ca_devlock_contended;

void ca_devlock_wait(ca_devlock_t *l) {
  ca_devlock_contended++;
  for (int i = 0; i < SPINS; i++) {
    relax();
    int free = 0;
    if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&l->state, &free, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return;
  }
  /* 2 from here on, even when the exchange finds it free: another sleeper
   * may be left, and only a release that sees 2 wakes one. */
  while (__atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE) != 0) futex(&l->state, FUTEX_WAIT, 2);
}

void ca_devlock_wake(ca_devlock_t *l) { futex(&l->state, FUTEX_WAKE, 1); }
