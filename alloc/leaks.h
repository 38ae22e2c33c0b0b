/* "leaks.c": what was left behind: live blocks grouped by call site. */
#ifndef CUDALLOC_LEAKS_H
#define CUDALLOC_LEAKS_H

#include <stdint.h>
#include <stdio.h>

#include "stamp.h"
#include "types.h"

/* The JSON leak report's schema name: it changes when a field changes
 * meaning or goes away (a new field keeps it). docs/reports.md has it. */
#define CA_LEAKS_SCHEMA "cudalloc-leaks/1"

/* ca_leaks_stamp, what each allocation stamps for this report: stamp.h. */

/* The leak report in compute-sanitizer's shape on f: one entry per call
 * stack and device, biggest first, with every frame, then the summary
 * line. At most max_groups entries (0: all; the summary counts all).
 * Returns the bytes leaked. Takes the device locks, one at a time, only
 * to copy what is live: naming frames happens outside them. */
int64_t ca_leaks_report(FILE *f, size_t max_groups);
/* The same as JSON (CA_LEAKS_SCHEMA). */
void ca_leaks_json(FILE *f);
/* Blocks live now, on every device. */
size_t ca_leaks_live(void);

#endif /* CUDALLOC_LEAKS_H */
