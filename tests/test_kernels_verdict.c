/* The workload's creep verdict (kernels/verdict.c) on synthetic curves: a
 * flat run passes; each broken property (reserved creep, a jump above the
 * plateau, allocated creep, a leak at exit, a loss that does not fall, too
 * few steps) fails and is named; a single page added once, which is not a
 * trend, passes. */
#include <criterion/criterion.h>
#include <string.h>

#include "trend.h"
#include "verdict.h"

#define MIB (1024.0 * 1024.0)
#define STEPS 50
#define WARMUP 10

typedef struct run_s {
  double loss[STEPS], allocated[STEPS], reserved[STEPS];
  verdict_input_t in;
  verdict_t v;
} run_t;

/* A healthy run: reserved climbs to 100 MiB during the warm-up and stays,
 * 30 MiB live at every step end, the loss falls from 5 to 2. */
static void healthy(run_t *r) {
  for (int i = 0; i < STEPS; i++) {
    r->reserved[i] = (i < 3 ? 60.0 + 20.0 * i : 100.0) * MIB;
    r->allocated[i] = 30.0 * MIB;
    r->loss[i] = 5.0 - 3.0 * i / (STEPS - 1);
  }
  r->in = (verdict_input_t){STEPS, WARMUP, r->loss, r->allocated, r->reserved, 2 * MIB, 0, 0};
}

static void judge(run_t *r) { verdict_eval(&r->in, &r->v); }

static void expect_fail(const run_t *r, const char *named) {
  cr_expect(!r->v.pass, "the verdict should fail naming %s", named);
  cr_expect(strstr(r->v.reason, named), "'%s' does not name %s", r->v.reason, named);
  cr_expect(strstr(r->v.failed, named), "'%s' does not list %s", r->v.failed, named);
}

Test(verdict, slope_of_known_lines) {
  double line[5] = {3, 5, 7, 9, 11}, flat[4] = {2, 2, 2, 2}, one[1] = {7};
  cr_expect_float_eq(trend_ls_slope(line, 5), 2.0, 1e-12);
  cr_expect_float_eq(trend_ls_slope(flat, 4), 0.0, 1e-12);
  cr_expect_float_eq(trend_ls_slope(one, 1), 0.0, 1e-12);
}

Test(verdict, flat_run_passes) {
  run_t r;
  healthy(&r);
  judge(&r);
  cr_expect(r.v.pass, "%s", r.v.reason);
  cr_expect_str_eq(r.v.reason, "PASS");
  cr_expect_float_eq(r.v.plateau, 100.0 * MIB, 1.0);
  cr_expect_float_eq(r.v.reserved_slope, 0.0, 1e-9);
}

Test(verdict, linear_reserved_creep_fails) {
  run_t r;
  healthy(&r);
  for (int i = WARMUP; i < STEPS; i++) r.reserved[i] = 100.0 * MIB + (i - WARMUP) * 0.5 * MIB;
  judge(&r);
  expect_fail(&r, "reserved creep");
  cr_expect_float_eq(r.v.reserved_slope, 0.5 * MIB, 1.0);
}

/* 0.2 MiB a step: below the final-step limit at first, but a trend. */
Test(verdict, slow_creep_fails_on_the_slope) {
  run_t r;
  healthy(&r);
  for (int i = WARMUP; i < STEPS; i++) r.reserved[i] = 100.0 * MIB + (i - WARMUP) * 0.2 * MIB;
  judge(&r);
  expect_fail(&r, "reserved creep");
  cr_expect_gt(r.v.reserved_slope, r.v.slope_limit);
}

Test(verdict, late_jump_above_the_plateau_fails) {
  run_t r;
  healthy(&r);
  r.reserved[STEPS - 1] = 120.0 * MIB; /* 20% above, at the last step only */
  judge(&r);
  expect_fail(&r, "reserved creep");
  cr_expect(strstr(r.v.reason, "above the warm-up plateau"), "%s", r.v.reason);
}

/* Reserved memory moves in pages: one more page, once, is not a trend. */
Test(verdict, one_page_once_passes) {
  run_t r;
  healthy(&r);
  for (int i = STEPS / 2; i < STEPS; i++) r.reserved[i] = 102.0 * MIB;
  judge(&r);
  cr_expect(r.v.pass, "%s", r.v.reason);
  /* while a page every few steps is a creep */
  for (int i = WARMUP; i < STEPS; i++) r.reserved[i] = 100.0 * MIB + 2.0 * MIB * ((i - WARMUP) / 4);
  judge(&r);
  expect_fail(&r, "reserved creep");
}

Test(verdict, allocated_creep_is_a_leak) {
  run_t r;
  healthy(&r);
  for (int i = WARMUP; i < STEPS; i++) r.allocated[i] = 30.0 * MIB + 64 * 1024 * ((i - WARMUP) / 5);
  judge(&r);
  expect_fail(&r, "allocated creep");
  cr_expect(strstr(r.v.reason, "leak"), "%s", r.v.reason);
  /* a single leaked byte after the warm-up is enough */
  healthy(&r);
  r.allocated[STEPS - 5] += 1.0;
  judge(&r);
  expect_fail(&r, "allocated creep");
}

Test(verdict, leak_at_exit_fails) {
  run_t r;
  healthy(&r);
  r.in.exit_bytes = 4096;
  r.in.exit_blocks = 2;
  judge(&r);
  expect_fail(&r, "leak at exit");
  cr_expect(strstr(r.v.reason, "4096 bytes in 2 blocks"), "%s", r.v.reason);
}

Test(verdict, loss_that_does_not_fall_fails) {
  run_t r;
  healthy(&r);
  for (int i = 0; i < STEPS; i++) r.loss[i] = 4.0 + 0.01 * (i % 3);
  judge(&r);
  expect_fail(&r, "loss did not fall");
  healthy(&r);
  r.loss[STEPS - 1] = 0.0 / 0.0; /* NaN */
  judge(&r);
  expect_fail(&r, "loss did not fall");
}

Test(verdict, every_failure_is_listed) {
  run_t r;
  healthy(&r);
  for (int i = WARMUP; i < STEPS; i++) {
    r.reserved[i] = 100.0 * MIB + (i - WARMUP) * MIB;
    r.allocated[i] = 30.0 * MIB + (i - WARMUP) * MIB;
  }
  r.in.exit_bytes = 1;
  r.in.exit_blocks = 1;
  judge(&r);
  cr_expect_str_eq(r.v.failed, "reserved creep, allocated creep, leak at exit");
}

Test(verdict, too_few_steps_fails) {
  run_t r;
  healthy(&r);
  r.in.steps = WARMUP + 2;
  judge(&r);
  expect_fail(&r, "too few steps");
}
