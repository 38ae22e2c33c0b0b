/* "report.c": what the program sees on stderr and in report files. */
#ifndef CUDALLOC_REPORT_H
#define CUDALLOC_REPORT_H

#include <stdio.h>

#include "types.h"

/* The one-screen summary printed at exit. */
void ca_report_summary(FILE *f);
/* Live blocks grouped by call site, biggest first (compute-sanitizer's shape). */
void ca_report_leaks(FILE *f);
/* One line per cause when an allocation fails; d is locked. */
void ca_report_oom(ca_device_t *d, size_t size);
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
