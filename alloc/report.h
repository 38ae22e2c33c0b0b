/* "report.c": what the program sees on stderr and in report files. */
#ifndef CUDALLOC_REPORT_H
#define CUDALLOC_REPORT_H

#include <stdio.h>

#include "types.h"

/* The one-screen summary printed at exit. */
void ca_report_summary(FILE *f);
/* Live blocks grouped by call site, biggest first (compute-sanitizer's shape). */
void ca_report_leaks(FILE *f);
/* Live bytes of one call site. */
typedef struct ca_site_total_s {
  void *pc;                     /* the site (track.h) */
  int64_t bytes, count;
  uintptr_t example;            /* one of its blocks */
} ca_site_total_t;
/* Live blocks of d grouped by call site, biggest first (d locked), in
 * *out (malloc'd: the caller frees it). Returns the number of sites (0
 * also when out of host memory). */
size_t ca_report_live_sites(ca_device_t *d, ca_site_total_t **out);
/* The reports the configuration's `report` prefix names, if any. */
void ca_report_write_files(void);
/* At cudalloc_shutdown: live blocks as leaks on stderr, and the report files. */
void ca_report_shutdown(void);
/* At start: one warning when the processes of a job would write the same
 * report files (the `report` path has neither %r nor %p), and one for a
 * launcher variable that is not a number. */
void ca_report_check_job(void);
/* At exit, after the summary: the leak report on stderr (unless quiet),
 * in one write; and the exit status leak_exit_code when anything leaked. */
void ca_report_exit_leaks(void);

#endif /* CUDALLOC_REPORT_H */
