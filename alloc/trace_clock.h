/* "trace_clock.c": the event log's clock. The hot path reads a raw clock,
 * the TSC where it is invariant (a few ns, where clock_gettime costs tens
 * in a VM), else CLOCK_MONOTONIC in ns; the log carries calibration pairs
 * (raw, CLOCK_MONOTONIC ns since the log began), from which its readers
 * convert every record's time to ns (docs/trace.md, "The clock"). */
#ifndef CUDALLOC_TRACE_CLOCK_H
#define CUDALLOC_TRACE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CA_TRACE_HAVE_TSC 1
#else
#define CA_TRACE_HAVE_TSC 0
#endif

extern bool ca_trace_clock_tsc;       /* set by ca_trace_clock_start, before recording */
extern uint64_t ca_trace_clock_mono0; /* CLOCK_MONOTONIC ns when the log began */

static inline uint64_t ca_trace_clock_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - ca_trace_clock_mono0;
}

/* The raw clock: TSC ticks, or CLOCK_MONOTONIC ns since the log began. */
static inline uint64_t ca_trace_clock_raw(void) {
#if CA_TRACE_HAVE_TSC
  if (ca_trace_clock_tsc) return __rdtsc();
#endif
  return ca_trace_clock_mono();
}

/* Picks the raw clock (the TSC when the CPU says it is invariant and the
 * kernel keeps it as its own clock source, so that every core's TSC agrees)
 * and takes the log's first two calibration pairs, 1 ms apart on the TSC,
 * so that even a log cut short converts. */
void ca_trace_clock_start(void);
/* The raw clock's kind for the header: CA_TRACE_CLOCK_TSC or _MONOTONIC. */
uint32_t ca_trace_clock_kind(void);
/* A calibration pair now: raw and ns read together. */
void ca_trace_clock_pair(uint64_t *raw, uint64_t *ns);
/* The two pairs of ca_trace_clock_start. */
void ca_trace_clock_start_pairs(uint64_t raw[2], uint64_t ns[2]);
/* The wall clock when the log began (the header's start_unix_ns). */
uint64_t ca_trace_clock_start_unix_ns(void);

#endif /* CUDALLOC_TRACE_CLOCK_H */
