/* "leaks.c": what was left behind: live blocks grouped by call site. */
#ifndef CUDALLOC_LEAKS_H
#define CUDALLOC_LEAKS_H

#include <stdint.h>
#include <stdio.h>

#include "step.h"
#include "types.h"

/* The JSON leak report's schema name: it changes when a field changes
 * meaning or goes away (a new field keeps it). docs/reports.md has it. */
#define CA_LEAKS_SCHEMA "cudalloc-leaks/1"

/* At each allocation: the thread and the step the block was made in
 * (inline: a front-cache hit stamps too). */
static inline void ca_leaks_stamp(ca_block_t *b);
/* The calling thread's id, asked once (gettid is a system call). */
uint32_t ca_leaks_tid_slow(void);
extern __thread uint32_t ca_leaks_tid;

static inline void ca_leaks_stamp(ca_block_t *b) {
  uint32_t tid = ca_leaks_tid;
  b->tid = tid ? tid : ca_leaks_tid_slow();
  b->step = ca_step_current();
}

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
