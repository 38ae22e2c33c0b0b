/* "oom.c": the out-of-memory report, written when an allocation finally
 * fails: the figures, the verdict (oom_verdict.h), the other processes on
 * the device, the live call sites; as text and JSON files named on stderr,
 * the first few in full and later ones rate-limited. */
#ifndef CUDALLOC_OOM_H
#define CUDALLOC_OOM_H

#include "oom_verdict.h"
#include "types.h"

/* Full reports (files and stderr lines) per process life; after them, one
 * stderr line per second at most, with the count of failures since. */
#define CA_OOM_FULL_REPORTS 3
/* Steps whose peak of allocated memory the report compares with. */
#define CA_OOM_STEPS 16

/* An allocation of size bytes failed with rc on d (locked): the report. */
void ca_oom_report(ca_device_t *d, size_t size, CUresult rc);
/* The hot path's record of this step's peak of allocated memory (d locked). */
void ca_oom_on_alloc(ca_device_t *d);
/* The median of d's last steps' peaks of allocated memory (d locked); 0
 * before 3 steps. *steps: how many it is of. */
uint64_t ca_oom_usual_peak(const ca_device_t *d, unsigned *steps);
/* A step ended (cudalloc_step, d locked): its peak joins the history. */
void ca_oom_on_step(ca_device_t *d);
/* Gathers d's figures for a request of size bytes that failed with rc
 * (d locked); the report's first half, for the tests too. */
void ca_oom_figures(ca_device_t *d, size_t size, CUresult rc, ca_oom_figures_t *f);
/* Forgets the rate limit and the step history (shutdown; after_fork: the
 * lock may have been held by a thread that is gone). */
void ca_oom_forget(bool after_fork);

#endif /* CUDALLOC_OOM_H */
