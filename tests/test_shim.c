/* The preload: plain CUDA programs (tests/progs, shared libcudart) run
 * under LD_PRELOAD=libcudalloc.so with CUDALLOC_CONF=backend:sim on a
 * machine without a GPU or driver. Each program checks its own results;
 * these tests check that it ran to its end, that cudalloc served it, and
 * what it printed. */
#include "test_shim.h"

#include <dlfcn.h>

/* device work lags behind the host, as on a GPU (docs/reliability.md) */
#define SIM "backend:sim,sim_events:lag"

/* A machine with a CUDA driver runs the programs without cudalloc too. */
static int driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_LAZY);
  if (h) dlclose(h);
  return h != NULL;
}

static const char *fake_driver(void) {
  static char path[512];
  snprintf(path, sizeof path, "%s/tests/fake/libcuda.so.1", shim_build());
  return path;
}

// ----------------------------------------------------------------------------
// Programs that allocate, under the simulated device
// ----------------------------------------------------------------------------

Test(preload, alloc_write_read_free) {
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM);
  shim_assert_ok(r, "alloc_basic");
  shim_assert_has(r, "alloc_basic: served by cudalloc");
}

Test(preload, async_alloc_free_on_several_streams) {
  shim_assert_ok(shim_prog("async_streams", NULL, SIM), "async_streams");
}

Test(preload, per_thread_default_stream_entry_points) {
  shim_assert_ok(shim_prog("ptsz", NULL, SIM), "ptsz");
}

Test(preload, many_threads) {
  shim_assert_ok(shim_prog("threads", NULL, SIM), "threads");
}

Test(preload, mem_get_info_before_and_after) {
  shim_run_t *r = shim_prog("mem_info", NULL, SIM ",sim_capacity_mb:512");
  shim_assert_ok(r, "mem_info");
  shim_assert_has(r, "total=536870912 free_before=536870912 ");
}

Test(preload, bad_inputs_get_the_documented_codes) {
  shim_run_t *r = shim_prog("bad_inputs", NULL, SIM);
  shim_assert_ok(r, "bad_inputs");
  shim_assert_has(r, "double free");
}

Test(preload, fork_child_starts_clean) {
  shim_run_t *r = shim_prog("fork", NULL, SIM);
  shim_assert_ok(r, "fork");
  shim_assert_has(r, "fork: child ok");
}

Test(preload, device_reset_drops_the_pools) {
  shim_assert_ok(shim_prog("reset", NULL, SIM), "reset");
}

Test(preload, capture_never_waits_and_passes_allocations_through) {
  shim_assert_ok(shim_prog("capture", NULL, SIM ",sim_capacity_mb:64,sim_events:manual"), "capture");
}

// ----------------------------------------------------------------------------
// Exit summary
// ----------------------------------------------------------------------------

Test(preload, exit_summary_on_stderr) {
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM);
  shim_assert_ok(r, "alloc_basic");
  shim_assert_has(r, "cudalloc: summary (backend sim");
  shim_assert_has(r, "leaks: 0 blocks");
}

Test(preload, quiet_silences_the_summary) {
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM ",quiet:true");
  shim_assert_ok(r, "alloc_basic");
  shim_assert_lacks(r, "cudalloc:");
}

// ----------------------------------------------------------------------------
// Without cudalloc, or without a device it can use
// ----------------------------------------------------------------------------

/* Proof that the preload is what served the programs above. */
Test(preload, without_preload_the_program_fails_cleanly) {
  if (driver_present()) cr_skip_test("a CUDA driver is present: the program runs without cudalloc");
  shim_run_t *r = shim_prog_bare("alloc_basic", NULL, SIM);
  cr_assert_eq(r->status, 1, "expected a clean failure (exit 1), got %d:\n%s", r->status, r->out);
  shim_assert_has(r, "cudaErrorInsufficientDriver");
  shim_assert_lacks(r, "cudalloc");
}

/* backend:cuda (the default) where no driver is: cudalloc steps aside and
 * the runtime answers as it would without it. */
Test(preload, without_a_driver_calls_pass_through) {
  if (driver_present()) cr_skip_test("a CUDA driver is present");
  shim_run_t *r = shim_prog("alloc_basic", NULL, NULL);
  cr_assert_eq(r->status, 1, "expected a clean failure (exit 1), got %d:\n%s", r->status, r->out);
  shim_assert_has(r, "CUDA backend unavailable");
  shim_assert_has(r, "cudaErrorInsufficientDriver");
}

// ----------------------------------------------------------------------------
// The driver API, dlsym and cuGetProcAddress
// ----------------------------------------------------------------------------

Test(preload, driver_api_through_cuGetProcAddress_and_dlsym) {
  shim_assert_ok(shim_prog("drvapi", fake_driver(), SIM ",quiet:true"), "drvapi");
}

Test(preload, driver_api_on_the_simulated_device_without_a_driver) {
  shim_assert_ok(shim_prog("drvapi", "-", SIM ",quiet:true"), "drvapi");
}

Test(preload, dlsym_of_glibc_2_2_5) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "objdump -T %s/progs/dlsym_old", shim_build());
  shim_run_t *r = shim_sh(NULL, cmd);
  if (r->status == 127) cr_skip_test("objdump is not installed");
  shim_assert_has(r, "(GLIBC_2.2.5) dlsym");   /* the program really asks for the old version */
  shim_assert_ok(shim_prog("dlsym_old", fake_driver(), SIM ",quiet:true"), "dlsym_old");
}

Test(preload, rtld_next_stays_relative_to_its_caller) {
  shim_assert_ok(shim_prog("rtld_next", NULL, SIM ",quiet:true"), "rtld_next");
}

/* The same check against a library whose dlsym is a plain C wrapper
 * (shim/dlsym.c built with CA_DLSYM_NO_TRAMPOLINE): it must fail, or the
 * check above proves nothing. */
Test(preload, rtld_next_check_catches_a_c_wrapper) {
  char env[1024], cmd[512];
  snprintf(env, sizeof env, "LD_PRELOAD='%s %s/test-variants/libcudalloc.so' CUDALLOC_CONF=" SIM ",quiet:true",
           shim_san_runtime(), shim_build());
  snprintf(cmd, sizeof cmd, "%s/progs/rtld_next", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  cr_assert_eq(r->status, 1, "rtld_next passed against a C dlsym wrapper (%d):\n%s", r->status, r->out);
  shim_assert_has(r, "libcudart");
}

// ----------------------------------------------------------------------------
// PyTorch's pluggable allocator: dlopen, no preload
// ----------------------------------------------------------------------------

Test(preload, pytorch_pluggable_allocator_entry_points) {
  char env[1024], cmd[1024];
  snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF=" SIM ",sim_devices:2", shim_san_runtime());
  snprintf(cmd, sizeof cmd, "%s/progs/torch_api %s/libcudalloc.so", shim_build(), shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "torch_api");
  shim_assert_has(r, "torch_api: ok (2 devices)");
}
