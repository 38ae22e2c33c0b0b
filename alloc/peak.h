/* "peak.c": what was live at the moment of peak allocated memory, and at
 * peak reserved memory, by call site, and in which step. The allocation
 * and free paths call it once each (with the device locked): it keeps the
 * per-site live totals (sitelive.c) and copies them when a new peak is
 * left, so that the report costs nothing until it is written.
 *
 * Precision: the peak of allocated memory is always left by a free (or by
 * the report, or a device reset, while it lasts), and the copy is taken
 * there, before the free: exact, unless the amortization skips it, which
 * it does only when the peak rose by less than 1/64 since the last copy
 * and fewer blocks were freed since than the table has sites (so a copy
 * costs O(1) per free). The composition is then the one at the last copy,
 * taken at no less than 63/64 of the peak, and the report says so. The
 * same rule, counting allocations, holds for reserved memory, whose copy
 * is taken at the allocation that raised it. */
#ifndef CUDALLOC_PEAK_H
#define CUDALLOC_PEAK_H

#include <stdio.h>

#include "sitelive.h"
#include "types.h"

/* b is now live and counted in d's stats. */
void ca_peak_on_alloc(ca_device_t *d, ca_block_t *b);
/* b is about to stop being live: its bytes still count in d's stats. */
void ca_peak_on_free(ca_device_t *d, ca_block_t *b);

typedef enum { CA_PEAK_ALLOCATED, CA_PEAK_RESERVED, CA_PEAK_KINDS } ca_peak_kind_t;

/* A peak and what was live then. */
typedef struct ca_peak_s {
  int64_t peak;                 /* the statistic's peak (allocated or reserved bytes) */
  int64_t taken_at;             /* its value when the composition was copied */
  int64_t live;                 /* allocated bytes then: the sum of the sites */
  uint64_t step;                /* the step it was in */
  size_t nsites;
  const ca_site_live_t *sites;  /* biggest first; owned by peak.c, valid while d is locked */
} ca_peak_t;

/* The peak of kind k on d (locked), brought up to date; false when none
 * was seen (or no host memory held its copy). */
bool ca_peak_get(ca_device_t *d, ca_peak_kind_t k, ca_peak_t *out);
/* The peaks were reset to the current values (cudalloc_reset_peaks). */
void ca_peak_reset(ca_device_t *d);
/* d's live blocks are forgotten (device reset): copies first if at a peak. */
void ca_peak_device_reset(ca_device_t *d);
/* Both peaks of every device, top sites each (0: all). */
void ca_peak_report(FILE *f, size_t top);
/* <report>-peak.txt: both peaks in full, and the creep verdict. */
void ca_peak_write_files(void);
/* Forgets everything the peak and creep reports keep, and the step count
 * (shutdown); abandon: unfreed (fork child). */
void ca_peak_forget(bool abandon);

#endif /* CUDALLOC_PEAK_H */
