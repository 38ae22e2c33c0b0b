/* "oom_verdict.c": why an allocation failed, decided from figures alone.
 *
 * A pure function of the figures the out-of-memory report gathers (oom.c),
 * so that every branch is unit-tested without a device. One vocabulary:
 *   exhausted   this process's live memory and the request do not fit in
 *               what it may hold (the device, or a cap no larger room
 *               would lift)
 *   capped      the configured cap, not the device, is the limit
 *   fragmented  enough is free or cached, but not in one range (classic
 *               segments, or the address space of expandable ones)
 *   pending     enough is waiting for device work that did not complete
 *               (a graph capture forbids waiting, or a wait failed)
 *   refused     the driver refused memory that cudalloc's accounting says
 *               is there: another process holds it, or the driver failed
 * The tree, in order (R = the request's block size, A = allocated, L = the
 * limit in force, T = the device total, O = other processes' bytes):
 *   1. A + R > L               capped if a cap is set and A + R <= T - O,
 *                              else exhausted
 *   2. A + R > T - O           refused (other processes hold O)
 *   3. idle + headroom < R <= idle + headroom + pending       pending
 *   4. growth needs more than the headroom (L - reserved)     fragmented
 *   5. the address range has no room for R (expandable)      fragmented
 *   6. otherwise the driver could have given it and did not   refused
 * (idle: cached bytes no device work waits for.) After 1 and 2,
 * A + R <= L, so R <= idle + pending + headroom: one of 3 to 6 holds. */
#ifndef CUDALLOC_OOM_VERDICT_H
#define CUDALLOC_OOM_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  CA_OOM_EXHAUSTED,
  CA_OOM_CAPPED,
  CA_OOM_FRAGMENTED,
  CA_OOM_PENDING,
  CA_OOM_REFUSED,
} ca_oom_verdict_t;

/* Every figure in bytes, taken after the allocation's last attempt. */
typedef struct ca_oom_figures_s {
  uint64_t size;                /* asked for */
  uint64_t rounded;             /* the block it needs (cudalloc's rounding) */
  uint64_t grow_bytes;          /* what one more growth takes from the device: pages or a classic segment */
  uint64_t total;               /* the device's memory */
  uint64_t driver_free;         /* the driver's free memory (cuMemGetInfo) */
  bool driver_free_known;       /* false: mem_info failed */
  uint64_t limit;               /* the cap in force (the device total when none) */
  bool cap_set;                 /* memory_cap_mb or memory_fraction below the device */
  uint64_t allocated;           /* live blocks */
  uint64_t reserved;            /* held from the driver */
  uint64_t pending;             /* freed, waiting for device work */
  uint64_t largest_free;        /* the largest free block (no driver call) */
  uint64_t va_room;             /* expandable: the largest range a growth can place; UINT64_MAX classic */
  uint64_t others;              /* bytes other processes hold on the device */
  unsigned nothers;             /* how many there are (0: none, or unknown) */
  bool others_known;            /* false: the backend cannot tell */
  bool expandable;
  bool capture;                 /* a graph capture forbade waiting */
  int driver_error;             /* the last attempt's CUresult */
  uint64_t usual_peak;          /* median peak of allocated over recent steps; 0: unknown */
  unsigned usual_steps;         /* the steps that median is over */
} ca_oom_figures_t;

typedef struct ca_oom_diagnosis_s {
  ca_oom_verdict_t verdict;
  char arithmetic[320];         /* the figures that decide it, as a sum */
  char hint[320];               /* one thing to do about it */
} ca_oom_diagnosis_t;

/* "exhausted", "capped", ...: the vocabulary of the JSON field. */
const char *ca_oom_verdict_name(ca_oom_verdict_t v);
/* Decides the verdict and writes its arithmetic and hint. Never allocates. */
void ca_oom_decide(const ca_oom_figures_t *f, ca_oom_diagnosis_t *out);

#endif /* CUDALLOC_OOM_VERDICT_H */
