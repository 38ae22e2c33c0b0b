/* "step.c": the program's step count, one counter for every report. */
#ifndef CUDALLOC_STEP_H
#define CUDALLOC_STEP_H

#include <stdint.h>

#include "line.h"

extern ca_alone_u32_t ca_steps;   /* .v atomic; step.c moves it */

/* Steps marked so far (0 before the first mark). Inline: every
 * allocation's leak stamp reads it, front-cache hits too. */
static inline uint32_t ca_step_current(void) { return __atomic_load_n(&ca_steps.v, __ATOMIC_RELAXED); }
/* A step ended (cudalloc_step, or an automatic mark); returns the count
 * after it. */
uint32_t ca_step_mark(void);
/* At least step (sample_ms moves it by the clock); returns the current step. */
uint32_t ca_step_at_least(uint32_t step);
/* Back to 0 (shutdown, fork child). */
void ca_step_reset(void);

#endif /* CUDALLOC_STEP_H */
