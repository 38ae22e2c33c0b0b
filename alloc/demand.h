/* "demand.c": reports on demand. The `report_signal` setting installs a
 * handler that only sets a flag (a signal may arrive in the middle of a
 * malloc or with the allocator's lock held: writing there could deadlock);
 * the next allocation or free of any thread sees the flag and writes the
 * statistics table on stderr and the report files. */
#ifndef CUDALLOC_DEMAND_H
#define CUDALLOC_DEMAND_H

#include <signal.h>

/* Installs the handler of signal sig (0: none), giving back the previous
 * signal's handler when it changes; a handler the program had installed
 * before is still called after ours. Called with the configuration, under
 * the start-up lock. */
void ca_demand_arm(int sig);

/* Set by the handler; cleared by the one call that writes the reports. */
extern volatile sig_atomic_t ca_demand_requested;

/* The reports, if a signal asked for them since the last call. */
void ca_demand_write(void);

/* At the top of every allocation and free: one load while nothing is
 * asked. Call it with no allocator lock held (the reports take them). */
static inline void ca_demand_poll(void) {
  if (__builtin_expect(__atomic_load_n(&ca_demand_requested, __ATOMIC_RELAXED), 0)) ca_demand_write();
}

#endif /* CUDALLOC_DEMAND_H */
