/* "creep.c": does memory grow step after step? At each step mark, every
 * device's allocated, reserved and pending bytes and the live bytes of its
 * call sites are recorded; at exit (and on demand) a verdict names the
 * sites whose live bytes grow, with their slope, and the slope of reserved
 * memory; the samples go to a CSV and an SVG curve (creep_csv, creep_svg). */
#ifndef CUDALLOC_CREEP_H
#define CUDALLOC_CREEP_H

#include <stdio.h>

#include "sitelive.h"
#include "types.h"

/* Where step marks came from (said in the verdict). */
enum { CA_MARK_API = 1, CA_MARK_SYNC = 2, CA_MARK_SAMPLE = 4 };

#define CA_CREEP_SAMPLES 4096   /* kept per device; beyond, every other one is dropped */
#define CA_CREEP_SITES 64       /* call sites followed per device: the first that hold memory at a mark */
#define CA_CREEP_MIN_STEPS 10   /* before a verdict: a warm-up of a fifth, then TREND_MIN_POINTS */

/* Step `step` ended (steps.c): samples every device (takes their locks). */
void ca_creep_mark(int source, uint64_t step);
/* sample_ms: samples d (locked) when its time has come. */
void ca_creep_tick(ca_device_t *d);

/* One device's verdict (d locked). */
typedef struct ca_creep_site_s {
  void *site;
  double slope;                 /* bytes per step */
  double from, to;              /* the floor of the first and last window */
} ca_creep_site_t;

typedef struct ca_creep_verdict_s {
  size_t steps;                 /* samples kept */
  size_t warmup;                /* samples left out of the verdict */
  bool judged;
  int nsites;                   /* growing sites, steepest first */
  ca_creep_site_t sites[CA_CREEP_SITES];
  double reserved_slope;        /* bytes per step */
  bool reserved_creeps;
  uint64_t first_step, last_step;
  size_t unfollowed;            /* sites that held memory at a mark but found no column */
} ca_creep_verdict_t;

void ca_creep_judge(ca_device_t *d, ca_creep_verdict_t *out);
/* Every device's verdict, a few lines each (nothing for a device without
 * step marks). */
void ca_creep_report(FILE *f);
/* The files creep_csv and creep_svg name. */
void ca_creep_write_files(void);
/* Forgets every sample (shutdown); abandon: unfreed (fork child). */
void ca_creep_forget(bool abandon);

#endif /* CUDALLOC_CREEP_H */
