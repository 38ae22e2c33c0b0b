/* The out-of-memory verdict (alloc/oom_verdict.c) on its own: every branch
 * of its decision tree from figures alone, the edges between branches, and
 * over random figures the properties each verdict promises. */
#include <criterion/criterion.h>
#include <string.h>

#include "oom_verdict.h"

#define MiB (1ull << 20)

/* A 1 GiB device, no cap: 500 MiB live, 600 MiB reserved, a 100 MiB request. */
static ca_oom_figures_t base(void) {
  return (ca_oom_figures_t){
      .size = 100 * MiB, .rounded = 100 * MiB, .grow_bytes = 100 * MiB, .total = 1024 * MiB,
      .driver_free = 424 * MiB, .driver_free_known = true, .limit = 1024 * MiB, .allocated = 500 * MiB,
      .reserved = 600 * MiB, .largest_free = 50 * MiB, .va_room = UINT64_MAX, .others_known = true,
      .expandable = true, .driver_error = 2,
  };
}

static ca_oom_diagnosis_t decide(const ca_oom_figures_t *f) {
  ca_oom_diagnosis_t d;
  memset(&d, 0x55, sizeof d);   /* garbage: everything must be written */
  ca_oom_decide(f, &d);
  return d;
}

#define VERDICT(dx, name) cr_assert_str_eq(ca_oom_verdict_name((dx).verdict), name, "%s", (dx).arithmetic)
#define SAYS(field, text) cr_assert_not_null(strstr((field), (text)), "'%s' lacks '%s'", (field), (text))

Test(oom_verdict, the_vocabulary) {
  cr_assert_str_eq(ca_oom_verdict_name(CA_OOM_EXHAUSTED), "exhausted");
  cr_assert_str_eq(ca_oom_verdict_name(CA_OOM_CAPPED), "capped");
  cr_assert_str_eq(ca_oom_verdict_name(CA_OOM_FRAGMENTED), "fragmented");
  cr_assert_str_eq(ca_oom_verdict_name(CA_OOM_PENDING), "pending");
  cr_assert_str_eq(ca_oom_verdict_name(CA_OOM_REFUSED), "refused");
  cr_assert_str_eq(ca_oom_verdict_name((ca_oom_verdict_t)99), "unknown");
}

Test(oom_verdict, exhausted_when_live_memory_and_request_exceed_the_device) {
  ca_oom_figures_t f = base();
  f.allocated = f.reserved = 1000 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "exhausted");
  SAYS(d.arithmetic, "allocated 1000.0 MiB + request 100.0 MiB = 1100.0 MiB > 1024.0 MiB this process may hold (device 1024.0 MiB)");
  SAYS(d.hint, "live memory itself does not fit");
}

Test(oom_verdict, a_request_larger_than_the_device_says_so) {
  ca_oom_figures_t f = base();
  f.size = f.rounded = 2048 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "exhausted");
  SAYS(d.hint, "the request alone (2048.0 MiB) is larger than all this process may hold");
}

Test(oom_verdict, an_abnormal_step_is_named_from_a_ratio_of_1_25) {
  ca_oom_figures_t f = base();
  f.allocated = f.reserved = 1000 * MiB;
  f.usual_peak = 400 * MiB;
  f.usual_steps = 7;
  ca_oom_diagnosis_t d = decide(&f);
  SAYS(d.hint, "this step's live memory (1100.0 MiB with the request) is 2.8x the usual peak (400.0 MiB, median of the last 7 steps)");
  f.usual_peak = 1000 * MiB;   /* 1.1x: the usual footprint, not one batch */
  d = decide(&f);
  SAYS(d.hint, "live memory itself does not fit");
}

Test(oom_verdict, capped_when_the_device_has_room_but_the_cap_does_not) {
  ca_oom_figures_t f = base();
  f.limit = 512 * MiB;
  f.cap_set = true;
  f.allocated = f.reserved = 450 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "capped");
  SAYS(d.arithmetic, "allocated 450.0 MiB + request 100.0 MiB = 550.0 MiB > cap 512.0 MiB, while the device has room for it: total 1024.0 MiB - other processes 0.0 MiB = 1024.0 MiB");
  SAYS(d.hint, "raise memory_cap_mb to at least 550 (or memory_fraction to 0.54)");
}

/* Where other processes leave less than the cap would allow, raising the
 * cap would not help: exhausted. */
Test(oom_verdict, capped_or_exhausted_decided_by_the_room_others_leave) {
  ca_oom_figures_t f = base();
  f.limit = 600 * MiB;
  f.cap_set = true;
  f.allocated = f.reserved = 550 * MiB;
  f.others = 300 * MiB;
  f.nothers = 1;
  VERDICT(decide(&f), "capped");   /* 650 <= 1024 - 300 */
  f.others = 500 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "exhausted");   /* 650 > 1024 - 500 */
  SAYS(d.arithmetic, "> 524.0 MiB this process may hold (cap 600.0 MiB; device 1024.0 MiB - other processes 500.0 MiB = 524.0 MiB)");
}

Test(oom_verdict, refused_when_other_processes_hold_the_room) {
  ca_oom_figures_t f = base();
  f.others = 500 * MiB;
  f.nothers = 2;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "refused");
  SAYS(d.arithmetic, "= 600.0 MiB fits the limit 1024.0 MiB, but 2 other processes hold 500.0 MiB: total 1024.0 MiB - 500.0 MiB = 524.0 MiB < 600.0 MiB");
  SAYS(d.hint, "other processes hold 500.0 MiB of this device");
}

Test(oom_verdict, pending_when_only_waiting_memory_would_do) {
  ca_oom_figures_t f = base();
  f.limit = 600 * MiB;
  f.cap_set = true;
  f.pending = 100 * MiB;   /* reserved 600 = 500 live + 100 pending: nothing idle, no headroom */
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "pending");
  SAYS(d.arithmetic, "idle cached 0.0 MiB + headroom 0.0 MiB = 0.0 MiB < request 100.0 MiB <= that + pending 100.0 MiB = 100.0 MiB");
  SAYS(d.hint, "did not complete (a wait failed)");
  f.capture = true;
  SAYS(decide(&f).hint, "a graph capture forbids waiting");
}

/* Pending memory that the request does not need is not the cause. */
Test(oom_verdict, pending_bytes_beside_enough_free_are_not_the_cause) {
  ca_oom_figures_t f = base();
  f.pending = 50 * MiB;
  VERDICT(decide(&f), "refused");   /* 424 MiB headroom: the driver could have given it */
}

Test(oom_verdict, fragmented_when_a_new_segment_exceeds_the_headroom) {
  ca_oom_figures_t f = base();
  f.expandable = false;
  f.reserved = 1000 * MiB;   /* 500 MiB idle in pieces of 50 MiB, 24 MiB headroom */
  f.grow_bytes = 100 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "fragmented");
  SAYS(d.arithmetic, "idle cached 500.0 MiB + headroom 24.0 MiB = 524.0 MiB >= request 100.0 MiB, but the largest free block is 50.0 MiB and a new segment of 100.0 MiB exceeds the headroom");
  SAYS(d.hint, "expandable_segments:true");
}

Test(oom_verdict, fragmented_address_space_of_expandable_segments) {
  ca_oom_figures_t f = base();
  f.va_room = 60 * MiB;
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "fragmented");
  SAYS(d.arithmetic, "the largest range the address space can place is 60.0 MiB < request 100.0 MiB");
}

Test(oom_verdict, refused_when_the_driver_fails_with_memory_to_spare) {
  ca_oom_figures_t f = base();
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "refused");
  SAYS(d.arithmetic, "growth 100.0 MiB <= headroom 424.0 MiB (limit 1024.0 MiB - reserved 600.0 MiB), driver free 424.0 MiB, yet the driver failed with error 2");
  f.driver_free_known = false;
  SAYS(decide(&f).arithmetic, "driver free unknown (cuMemGetInfo failed)");
}

Test(oom_verdict, refused_when_memory_is_held_outside_the_accounting) {
  ca_oom_figures_t f = base();
  f.driver_free = 50 * MiB;   /* 1024 - 600 - 50 = 374 MiB held by someone NVML does not list */
  ca_oom_diagnosis_t d = decide(&f);
  VERDICT(d, "refused");
  SAYS(d.arithmetic, "but the driver has only 50.0 MiB free");
  SAYS(d.hint, "374.0 MiB of the device are held outside cudalloc's accounting");
}

/* Exactly at the limit still fits: the edge belongs to the later branches. */
Test(oom_verdict, the_limit_itself_fits) {
  ca_oom_figures_t f = base();
  f.allocated = f.reserved = 924 * MiB;   /* 924 + 100 = 1024 */
  f.driver_free = 100 * MiB;
  VERDICT(decide(&f), "refused");
  f.allocated = f.reserved = 924 * MiB + 512;
  VERDICT(decide(&f), "exhausted");
}

static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Random consistent figures: every verdict keeps its promise. */
Test(oom_verdict, every_verdict_keeps_its_promise_over_random_figures) {
  uint64_t rng = 10;
  int seen[5] = {0};
  for (int i = 0; i < 20000; i++) {
    ca_oom_figures_t f = {0};
    f.total = (1 + next(&rng) % 64) * 16 * MiB;
    f.cap_set = next(&rng) % 2;
    f.limit = f.cap_set ? f.total / 2 + next(&rng) % (f.total / 2) : f.total;
    f.reserved = next(&rng) % (f.limit + 1);
    f.allocated = next(&rng) % (f.reserved + 1);
    f.pending = next(&rng) % 3 ? 0 : next(&rng) % (f.reserved - f.allocated + 1);
    f.rounded = f.size = 512 * (1 + next(&rng) % (f.total / 256));
    f.expandable = next(&rng) % 2;
    f.grow_bytes = f.rounded + (f.expandable ? 0 : next(&rng) % (f.total / 4));
    f.va_room = f.expandable ? next(&rng) % (2 * f.total) : UINT64_MAX;
    f.others = next(&rng) % 2 ? 0 : next(&rng) % f.total;
    f.nothers = f.others ? 1 : 0;
    f.driver_free_known = true;
    f.driver_free = f.total - f.reserved > f.others ? f.total - f.reserved - f.others : 0;
    ca_oom_diagnosis_t d = decide(&f);
    uint64_t live_after = f.allocated + f.rounded, room = f.total > f.others ? f.total - f.others : 0;
    cr_assert_lt((unsigned)d.verdict, 5u);
    seen[d.verdict]++;
    cr_assert_gt(strlen(d.arithmetic), 0);
    cr_assert_gt(strlen(d.hint), 0);
    switch (d.verdict) {
    case CA_OOM_EXHAUSTED: cr_assert_gt(live_after, f.limit < room ? f.limit : room, "%s", d.arithmetic); break;
    case CA_OOM_CAPPED: cr_assert(f.cap_set && live_after > f.limit && live_after <= room, "%s", d.arithmetic); break;
    case CA_OOM_PENDING: cr_assert(f.pending > 0 && live_after <= f.limit, "%s", d.arithmetic); break;
    case CA_OOM_FRAGMENTED:
    case CA_OOM_REFUSED: cr_assert_leq(live_after, f.limit, "%s", d.arithmetic); break;
    }
  }
  for (int v = 0; v < 5; v++) cr_assert_gt(seen[v], 0, "verdict %s never came up", ca_oom_verdict_name(v));
}
