/* "demand.c": reports on demand. The `report_signal` setting installs a
 * handler that only sets a flag (a signal may arrive in the middle of a
 * malloc or with the allocator's lock held: writing there could deadlock);
 * the next allocation or free of any thread sees the flag and writes the
 * statistics table on stderr and the report files. */
#ifndef CUDALLOC_DEMAND_H
#define CUDALLOC_DEMAND_H

#include <signal.h>

#include "calm.h"

/* Installs the handler of signal sig (0: none), giving back the previous
 * signal's handler when it changes; a handler the program had installed
 * before is still called after ours. Called with the configuration, under
 * the start-up lock. */
void ca_demand_arm(int sig);

/* Whether a signal asked for the reports since they were last written: the
 * calm word's CA_STIR_DEMAND bit, which the handler sets and the one call
 * that writes the reports clears (calm.h). */
static inline bool ca_demand_pending(void) { return ca_stirred_by(CA_STIR_DEMAND); }

/* The reports, if a signal asked for them since the last call. */
void ca_demand_write(void);

/* At the top of every allocation and free: one load while nothing is
 * asked. Call it with no allocator lock held (the reports take them). */
static inline void ca_demand_poll(void) {
  if (__builtin_expect(ca_demand_pending(), 0)) ca_demand_write();
}

#endif /* CUDALLOC_DEMAND_H */
