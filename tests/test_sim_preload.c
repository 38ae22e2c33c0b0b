/* The reuse oracle seen from a preloaded program: the simulated runtime's
 * asynchronous fills and copies are device work on their stream, and a
 * synchronous copy of bytes such work still writes is reported, with the
 * copy's and the fill's call sites in the program. */
#include "test_shim.h"

#define CONF "backend:sim,sim_capacity_mb:64,sim_events:manual"

Test(sim_preload, a_copy_racing_a_fill_is_reported_once) {
  shim_run_t *r = shim_prog("oracle_race", NULL, CONF);
  cr_assert_eq(r->status, 0, "oracle_race exited with %d:\n%s", r->status, r->out);
  cr_assert_not_null(strstr(r->out, "oracle_race: ok"), "%s", r->out);
  const char *v = strstr(r->out, "reuse oracle: a host read");
  cr_assert_not_null(v, "the race was not reported:\n%s", r->out);
  cr_assert_lt(v, strstr(r->out, "oracle_race: raced"), "reported at the wrong call:\n%s", r->out);
  cr_assert_not_null(strstr(v, "pending write"), "%s", r->out);
  cr_assert_eq(strstr(v + 1, "reuse oracle:"), NULL, "more than one report:\n%s", r->out);
  cr_assert_not_null(strstr(v, "at oracle_race+"), "the program's call sites are missing:\n%s", r->out);
}

/* In auto mode the fill is complete at once: nothing to report. */
Test(sim_preload, auto_mode_has_nothing_pending) {
  shim_run_t *r = shim_prog("oracle_race", NULL, "backend:sim,sim_capacity_mb:64,sim_events:auto");
  shim_assert_ok(r, "oracle_race");
  shim_assert_lacks(r, "reuse oracle");
}
