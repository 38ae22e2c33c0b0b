/* A short slice of the fault campaign (make campaign runs all of it): every
 * backend operation failing at its 1st to 3rd call, in both segment modes,
 * with and without a device reset. None may end in a defect. And the
 * campaign's own checks catch what they guard: a leak, a wrong error. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "campaign.h"
#include "internal.h"

Test(campaign, slice_ends_in_no_defect, .timeout = 300) {
  unsigned bad = 0, runs = 0;
  for (int op = 0; op < CA_OP_COUNT; op++)
    for (unsigned k = 1; k <= 3; k++)
      for (int mode = 0; mode < 4; mode++) {
        campaign_run_t run = {.op = (ca_backend_op_t)op, .k = k, .classic = mode & 1, .reset = mode >> 1,
                              .seed = 7u + k * 31u + (unsigned)mode};
        campaign_outcome_t o = campaign_run(&run);
        runs++;
        if (campaign_outcome_bad(o)) {
          bad++;
          cr_log_error("%s@%u %s%s: %s", ca_backend_op_name(run.op), k, run.classic ? "classic" : "expandable",
                       run.reset ? " reset" : "", campaign_outcome_names[o]);
        }
      }
  cr_assert_eq(bad, 0, "%u of %u campaign runs ended in a defect", bad, runs);
}

/* The leak check: a run whose workload keeps a physical handle of its own
 * (created behind cudalloc's back) must be reported as a leak. */
Test(campaign, a_kept_handle_is_a_leak) {
  campaign_run_t run = {.op = CA_OP_map, .k = 1, .seed = 3, .extra = NULL};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    ca_phys_t h;
    cudalloc_init("backend:sim,sim_capacity_mb:48,sim_granularity_kb:256,quiet:true");
    ca_backend_sim.create(0, 256 << 10, &h);
    _exit(campaign_child(&run));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status));
  cr_assert_eq(WEXITSTATUS(status), OUT_LEAK, "outcome %d", WEXITSTATUS(status));
}

/* The error check: an error that is neither out-of-memory nor the injected
 * one's is wrong; a free that fails is wrong. */
Test(campaign, errors_are_judged) {
  campaign_state_t st = {.expected = cudaErrorLaunchFailure};
  campaign_note(&st, cudaErrorMemoryAllocation, false, "malloc");
  campaign_note(&st, cudaErrorLaunchFailure, false, "malloc");
  cr_assert_eq(st.wrong, 0);
  campaign_note(&st, cudaErrorInvalidValue, false, "malloc");
  cr_assert_eq(st.wrong, 1);
  campaign_note(&st, cudaErrorMemoryAllocation, true, "free");
  cr_assert_eq(st.wrong, 2);
  cr_assert_eq(st.failed_calls, 4);
}

/* The invariant check: a statistic that no longer adds up is reported. */
static void break_stats(void) { ca_state.devices[0]->stats.allocated_bytes.current += 512; }

Test(campaign, a_broken_invariant_is_check, .init = cr_redirect_stderr) {
  campaign_run_t run = {.op = CA_OP_map, .k = 0, .seed = 3, .sabotage = break_stats};
  int failed;
  cr_assert_eq(campaign_fork(&run, &failed), OUT_CHECK);
}

/* A child that dies is a crash, not the end of the campaign. */
static void die(void) { abort(); }

Test(campaign, a_dying_run_is_a_crash) {
  campaign_run_t run = {.op = CA_OP_map, .k = 0, .seed = 3, .sabotage = die};
  cr_assert_eq(campaign_run(&run), OUT_CRASH);
}

/* The oracle: with the fences skipped (a test-build switch), blocks are
 * handed out while their kernels still write them, and the run says so. */
static void skip_fences(void) { ca_debug.skip_fences = true; }

Test(campaign, a_planted_early_reuse_is_oracle, .init = cr_redirect_stderr) {
  campaign_run_t run = {.op = CA_OP_map, .k = 0, .seed = 3, .prepare = skip_fences};
  int failed;
  campaign_outcome_t o = campaign_fork(&run, &failed);
  cr_assert_eq(o, OUT_ORACLE, "outcome %s", campaign_outcome_names[o]);
}
