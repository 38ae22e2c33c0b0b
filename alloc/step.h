/* "step.c": the program's step count, one counter for every report. */
#ifndef CUDALLOC_STEP_H
#define CUDALLOC_STEP_H

#include <stdint.h>

/* Steps marked so far (0 before the first mark). */
uint32_t ca_step_current(void);
/* A step ended (cudalloc_step, or an automatic mark). */
void ca_step_mark(void);

#endif /* CUDALLOC_STEP_H */
