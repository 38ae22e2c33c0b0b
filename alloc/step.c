/* The step count: how many times the program (cudalloc_step) or an
 * automatic mark said a step ended. The leak report stamps blocks with it,
 * so that a leak says in which step it was made. */
#include "step.h"

static uint32_t steps;

uint32_t ca_step_current(void) { return __atomic_load_n(&steps, __ATOMIC_RELAXED); }

void ca_step_mark(void) { __atomic_add_fetch(&steps, 1, __ATOMIC_RELAXED); }
