/* The event log's raw clock and its calibration (trace_clock.h).
 *
 * The TSC is read with rdtsc, not rdtscp or a fence: an event's time needs
 * no ordering finer than the device lock around it already gives. Readers
 * convert ticks to ns by interpolating between the calibration pairs the
 * log carries (bench/trace/trace_read.c), as PyTorch's c10 ApproximateClock
 * does, so that the hot path never divides or multiplies. */
#include "trace_clock.h"

#include <stdio.h>
#include <string.h>

#if CA_TRACE_HAVE_TSC
#include <cpuid.h>
#endif

#include "cudalloc_trace.h"
#include "debug.h"

bool ca_trace_clock_tsc;
uint64_t ca_trace_clock_mono0;

static uint64_t start_unix, start_raw[2], start_ns[2];

#define CALIBRATION_NS 1000000ull   /* the start pairs' distance on the TSC: 1 ms */

#if CA_TRACE_HAVE_TSC
/* CPUID's invariant TSC (leaf 0x80000007, EDX bit 8), and the kernel's
 * clock source: the kernel drops "tsc" when it finds the cores' TSCs out
 * of step, and then so does the log. */
static bool tsc_usable(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8))) return false;
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (!f) return true;   /* no sysfs (a container): CPUID's word */
  char src[32] = "";
  bool tsc = fgets(src, sizeof src, f) && !strcmp(src, "tsc\n");
  fclose(f);
  return tsc;
}
#endif

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ca_trace_clock_pair(uint64_t *raw, uint64_t *ns) {
  if (ca_trace_clock_tsc) {
    /* The ticks halfway through the clock_gettime, from the tightest of a
     * few tries: a thread preempted between the readings (a loaded
     * machine) would put the pair off by its time slice. */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8 && best > 0; i++) {
      uint64_t r0 = ca_trace_clock_raw();
      uint64_t t = ca_trace_clock_mono();
      uint64_t r1 = ca_trace_clock_raw();
      if (r1 - r0 < best) best = r1 - r0, *raw = r0 + (r1 - r0) / 2, *ns = t;
    }
  } else {
    *raw = *ns = ca_trace_clock_mono();   /* one reading: the conversion is exactly the identity */
  }
#ifdef CA_TESTING
  if (ca_debug.trace_clock_bad_scale) *ns += *ns / 2;   /* a calibration that says 1.5 times the time passed */
#endif
}

void ca_trace_clock_start(void) {
  ca_trace_clock_tsc = false;
#if CA_TRACE_HAVE_TSC
  ca_trace_clock_tsc = tsc_usable() && !CA_DEBUG(trace_clock_monotonic);
#endif
  ca_trace_clock_mono0 = 0;
  ca_trace_clock_mono0 = ca_trace_clock_mono();
  start_unix = realtime_ns();
  ca_trace_clock_pair(&start_raw[0], &start_ns[0]);
  /* The second pair: far enough on the TSC for a first scale good to a
   * few parts in 10^4; one ns on in the monotonic clock. */
  uint64_t far = ca_trace_clock_tsc ? CALIBRATION_NS : 1;
  while (ca_trace_clock_mono() < start_ns[0] + far) {
  }
  ca_trace_clock_pair(&start_raw[1], &start_ns[1]);
}

uint32_t ca_trace_clock_kind(void) { return ca_trace_clock_tsc ? CA_TRACE_CLOCK_TSC : CA_TRACE_CLOCK_MONOTONIC; }

void ca_trace_clock_start_pairs(uint64_t raw[2], uint64_t ns[2]) {
  memcpy(raw, start_raw, sizeof start_raw);
  memcpy(ns, start_ns, sizeof start_ns);
}

uint64_t ca_trace_clock_start_unix_ns(void) { return start_unix; }
