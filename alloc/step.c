/* The step count: how many times the program (cudalloc_step) or an
 * automatic mark said a step ended. The leak report stamps blocks with it,
 * so that a leak says in which step it was made. */
#include "step.h"

#include <stdbool.h>

ca_alone_u32_t ca_steps;

uint32_t ca_step_mark(void) { return __atomic_add_fetch(&ca_steps.v, 1, __ATOMIC_RELAXED); }

uint32_t ca_step_at_least(uint32_t step) {
  uint32_t now = ca_step_current();
  while (now < step && !__atomic_compare_exchange_n(&ca_steps.v, &now, step, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
  return now < step ? step : now;
}

void ca_step_reset(void) { __atomic_store_n(&ca_steps.v, 0, __ATOMIC_RELAXED); }
