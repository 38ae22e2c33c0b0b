/* Not a suite of its own: a Criterion binary whose .fini check fails on
 * purpose, run by test_fini_assert.c to show that FINI_ASSERT fails a
 * suite (a plain cr_assert there would be printed and ignored). */
#include "testing.h"

static void planted(void) { FINI_ASSERT(0, "planted in fini_probe"); }

TestSuite(fini_probe, .fini = planted);

Test(fini_probe, passes) { cr_assert(1); }
