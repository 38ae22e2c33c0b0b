/* "stamp.c": what each allocation stamps on its block for the leak report
 * (leaks.c): the thread and the step it was made in. Inline, below the
 * front cache, whose hits stamp too. */
#ifndef CUDALLOC_STAMP_H
#define CUDALLOC_STAMP_H

#include <stdint.h>

#include "step.h"
#include "types.h"

/* The calling thread's id, asked once (gettid is a system call). */
extern __thread uint32_t ca_stamp_tid;
uint32_t ca_stamp_tid_slow(void);

/* The same stamp with the thread's id known (the front cache keeps its
 * thread's: in the shared library a thread-local read is a call). */
static inline void ca_leaks_stamp_as(ca_block_t *b, uint32_t tid) {
  b->tid = tid;
  b->step = ca_step_current();
}
/* The calling thread's id, asked once. */
static inline uint32_t ca_stamp_my_tid(void) {
  uint32_t tid = ca_stamp_tid;
  return tid ? tid : ca_stamp_tid_slow();
}
/* At each allocation: the thread and the step the block was made in. */
static inline void ca_leaks_stamp(ca_block_t *b) { ca_leaks_stamp_as(b, ca_stamp_my_tid()); }

#endif /* CUDALLOC_STAMP_H */
