/* The static library: tests/progs/static_app, linked with libcudalloc.a
 * and run without any preload, gets what a preloaded program gets: the
 * exit summary on stderr after its own output, the report files, and the
 * leaks of a cudalloc_shutdown() with live blocks.
 *
 * Before the core registered the exit handler itself (only the preload
 * shim did), exit_summary_and_report_files failed with no "cudalloc:
 * summary" in the output and no report file; before ca_exit flushed the
 * program's streams, the summary came before "static_app: ok" in the pipe;
 * before cudalloc_shutdown reported live blocks, its test found no leak. */
#include "test_shim.h"

#include <unistd.h>

#include "stderr_capture.h"

static char dir[] = "/tmp/cudalloc-static-XXXXXX";

static void make_dir(void) { cr_assert_not_null(mkdtemp(dir)); }
static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
TestSuite(static_lib, .init = make_dir, .fini = remove_dir);

/* Runs static_app with args and CUDALLOC_CONF=conf; stdout and stderr
 * into one pipe (stdout is then fully buffered, as in `prog | tee`). */
static shim_run_t *run_static(const char *env, const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/progs/static_app %s", shim_build(), args ? args : "");
  return shim_sh(env, cmd);
}

static char *slurp(const char *path) {
  static char buf[1 << 16];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no report file %s", path);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

#define assert_has(text, want) cr_assert_not_null(strstr(text, want), "expected \"%s\" in:\n%s", want, text)

Test(static_lib, exit_summary_and_report_files) {
  char env[512], path[512];
  snprintf(env, sizeof env, "-u LD_PRELOAD CUDALLOC_CONF=backend:sim,report:%s/x", dir);
  shim_run_t *r = run_static(env, NULL);
  shim_assert_ok(r, "static_app");
  shim_assert_has(r, "cudalloc: summary (backend sim, expandable segments), version 0.2.0, config: backend:sim,report:");
  shim_assert_has(r, "leaks: 1 blocks, 1.0 MiB (1048576 bytes) still allocated at exit");

  snprintf(path, sizeof path, "%s/x-leaks.txt", dir);
  char *leaks = slurp(path);
  assert_has(leaks, "cudalloc: summary (backend sim");
  assert_has(leaks, "========= Leaked 1048576 bytes at 0x");
  assert_has(leaks, "========= LEAK SUMMARY: 1048576 bytes leaked in 1 allocations\n");

  snprintf(path, sizeof path, "%s/x-stats.json", dir);
  char *json = slurp(path);
  assert_has(json, "\"schema\": \"cudalloc-stats/1\"");
  assert_has(json, "\"version\": \"0.2.0\"");
  assert_has(json, "\"num_live_blocks\": {\"current\": 1,");
}

Test(static_lib, summary_comes_after_the_programs_own_output_in_a_pipe) {
  shim_run_t *r = run_static("-u LD_PRELOAD CUDALLOC_CONF=backend:sim", NULL);
  shim_assert_ok(r, "static_app");
  const char *ok = strstr(r->out, "static_app: ok"), *summary = strstr(r->out, "cudalloc: summary");
  cr_assert_not_null(summary, "%s", r->out);
  cr_assert_lt(ok, summary, "the summary came before the program's output:\n%s", r->out);
}

/* cudalloc_shutdown() with a live block: reported as a leak, there; the
 * exit then finds the allocator stopped and writes nothing more. */
Test(static_lib, shutdown_reports_live_blocks_as_leaks) {
  shim_run_t *r = run_static("-u LD_PRELOAD CUDALLOC_CONF=backend:sim", "shutdown");
  shim_assert_ok(r, "static_app");
  shim_assert_has(r, "cudalloc: cudalloc_shutdown: 1 live block, reported as leaks (not freed)");
  shim_assert_has(r, "========= Leaked 1048576 bytes at 0x");
  shim_assert_lacks(r, "cudalloc: summary");
  const char *leak = strstr(r->out, "Leaked"), *ok = strstr(r->out, "static_app: ok");
  cr_assert_lt(strstr(r->out, "static_app: version"), leak, "the report came before the program's output:\n%s", r->out);
  cr_assert_lt(leak, ok, "%s", r->out);
}

Test(static_lib, quiet_silences_summary_and_shutdown_leaks) {
  shim_run_t *r = run_static("-u LD_PRELOAD CUDALLOC_CONF=backend:sim,quiet:true", "shutdown");
  shim_assert_ok(r, "static_app");
  shim_assert_lacks(r, "cudalloc:");
  shim_assert_lacks(r, "=========");
}

/* CUDALLOC_CONF=help: the keys on stderr, then the program runs as usual. */
Test(static_lib, help_lists_the_keys_then_the_program_runs) {
  shim_run_t *r = run_static("-u LD_PRELOAD CUDALLOC_CONF=help,backend:sim", NULL);
  shim_assert_ok(r, "static_app");
  shim_assert_has(r, "cudalloc: CUDALLOC_CONF=key:value,key:value; every key, its default and its meaning:\n");
  shim_assert_has(r, "  sim_capacity_mb                1024\n");
  shim_assert_has(r, "config: backend:sim\n");
}

/* In a process cudalloc serves, PyTorch's variable gets one line. */
Test(static_lib, a_pytorch_setting_is_said_not_to_apply) {
  shim_run_t *r = run_static("-u LD_PRELOAD CUDALLOC_CONF=backend:sim,quiet:true "
                             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,pinned_use_cuda_host_register:True",
                             NULL);
  shim_assert_ok(r, "static_app");
  shim_assert_has(r, "cudalloc: PYTORCH_CUDA_ALLOC_CONF is set, but cudalloc serves this process's device memory: "
                     "PyTorch's own setting no longer applies; cudalloc would honour its keys expandable_segments "
                     "under CUDALLOC_CONF (same names)\n");
  cr_assert_eq(count_of(r->out, "PYTORCH"), 1, "one line:\n%s", r->out);
}
