/* The preload: plain CUDA programs (tests/progs, shared libcudart) run
 * under LD_PRELOAD=libcudalloc.so with CUDALLOC_CONF=backend:sim on a
 * machine without a GPU or driver. Each program checks its own results;
 * these tests check that it ran to its end, that cudalloc served it, and
 * what it printed. */
#include "test_shim.h"

#include <dlfcn.h>
#include <unistd.h>

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

/* Regression (issue 9): cudaIpcGetMemHandle was not intercepted, so the
 * real runtime got a pointer into cudalloc's mappings (on the simulated
 * device: cudaErrorInsufficientDriver (35), not cudaErrorNotSupported).
 * cudalloc's memory is refused with a reason; other pointers pass through. */
Test(preload, ipc_handles_of_cudalloc_memory_are_refused_with_a_reason) {
  shim_run_t *r = shim_prog("ipc", NULL, SIM);
  shim_assert_ok(r, "ipc");
  shim_assert_has(r, "cannot be exported with CUDA IPC");
  const char *first = strstr(r->out, "cannot be exported with CUDA IPC");
  cr_assert_null(strstr(first + 1, "cannot be exported with CUDA IPC"), "said more than once:\n%s", r->out);
}

/* Counts the lines of out that contain text. */
static int lines_with(const char *out, const char *text) {
  int n = 0;
  for (const char *p = out; (p = strstr(p, text)); p += strlen(text)) n++;
  return n;
}

/* Regression (issue 9): a kernel launch on the simulated device went to the
 * real runtime (cudaErrorInsufficientDriver, 35, and nothing from
 * cudalloc); now each launch entry point fails with "no kernel image"
 * (209), and cudalloc says once why. */
Test(preload, a_kernel_launch_on_the_simulated_device_fails_clearly) {
  shim_run_t *r = shim_prog("launch", NULL, SIM);
  shim_assert_ok(r, "launch");
  cr_assert_eq(lines_with(r->out, "cannot run kernels"), 1, "expected one line:\n%s", r->out);
}

/* Regression (issue 9): a program with the runtime linked statically
 * (nvcc's default) failed on the simulated device with
 * cudaErrorInsufficientDriver and cudalloc said nothing; now one line names
 * the cause and the fix, whether the program has its symbol table or is
 * stripped (and keeps nvcc's device-code section). */
Test(preload, a_statically_linked_runtime_on_the_simulated_device_is_named) {
  const char *progs[] = {"static_cudart", "static_cudart_stripped"};
  for (int i = 0; i < 2; i++) {
    shim_run_t *r = shim_prog(progs[i], NULL, SIM);
    shim_assert_ok(r, "static_cudart");
    cr_assert_eq(lines_with(r->out, "-cudart shared"), 1, "%s: expected one line:\n%s", progs[i], r->out);
    shim_assert_has(r, "links the CUDA runtime statically");
  }
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM);
  shim_assert_ok(r, "alloc_basic");
  shim_assert_lacks(r, "-cudart shared");
}

/* Regression (issue 9): the allocator polled its fences during a capture
 * (cudaMemGetInfo, the slow path of cudaMalloc): an event query, which a
 * global or thread-local capture forbids, so the simulated device
 * invalidated it and cudaStreamEndCapture returned
 * cudaErrorStreamCaptureInvalidated ("global capture: cudalloc broke it").
 * The program also shows the device enforcing the rule on a query of its
 * own, and what relaxed mode and another thread's capture allow. */
Test(preload, capture_in_global_and_thread_local_mode_is_never_broken) {
  shim_assert_ok(shim_prog("capture_modes", NULL, SIM ",sim_capacity_mb:64,sim_events:manual"), "capture_modes");
}

/* Regression (issue 9): cudaDeviceEnablePeerAccess was not intercepted (on
 * the simulated device it reached the real runtime: "returned
 * cudaErrorInsufficientDriver"), so device 0 never got access to device
 * 1's mapped memory. */
Test(preload, enabling_peer_access_grants_the_peers_memory) {
  shim_assert_ok(shim_prog("peer_access", NULL, SIM ",sim_devices:2"), "peer_access");
}

// ----------------------------------------------------------------------------
// Exit summary
// ----------------------------------------------------------------------------

Test(preload, exit_summary_on_stderr) {
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM);
  shim_assert_ok(r, "alloc_basic");
  shim_assert_has(r, "cudalloc: summary (backend sim, expandable segments), version 0.2.0, config: backend:sim,");
  shim_assert_has(r, "leaks: 0 blocks");
}

/* stdout into a pipe is fully buffered: without the flush before the
 * summary, "alloc_basic: ok" came after it (seen before the fix). */
Test(preload, exit_summary_after_the_programs_output_in_a_pipe) {
  shim_run_t *r = shim_prog("alloc_basic", NULL, SIM);
  shim_assert_ok(r, "alloc_basic");
  const char *ok = strstr(r->out, "alloc_basic: ok"), *summary = strstr(r->out, "cudalloc: summary");
  cr_assert_not_null(summary, "%s", r->out);
  cr_assert_lt(ok, summary, "the summary came before the program's output:\n%s", r->out);
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

/* CUDALLOC_CONF=help alone: the keys on stderr, then the defaults, as if
 * CUDALLOC_CONF were unset (here, without a driver: cudalloc steps aside). */
Test(preload, help_alone_then_the_defaults) {
  if (driver_present()) cr_skip_test("a CUDA driver is present");
  shim_run_t *r = shim_prog("alloc_basic", NULL, "help");
  cr_assert_eq(r->status, 1, "expected the clean failure of the defaults (exit 1), got %d:\n%s", r->status, r->out);
  shim_assert_has(r, "every key, its default and its meaning");
  shim_assert_has(r, "CUDA backend unavailable");
  shim_assert_has(r, "cudaErrorInsufficientDriver");
}

/* PyTorch's variable under the preload: one line, at the start. */
Test(preload, a_pytorch_setting_is_said_not_to_apply) {
  char env[1024], pre[512], cmd[512];
  shim_preload(pre, sizeof pre);
  snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF=" SIM ",quiet:true PYTORCH_ALLOC_CONF=max_split_size_mb:64", pre);
  snprintf(cmd, sizeof cmd, "%s/progs/alloc_basic", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "alloc_basic");
  shim_assert_has(r, "cudalloc: PYTORCH_ALLOC_CONF is set, but cudalloc serves this process's device memory: "
                     "PyTorch's own setting no longer applies; cudalloc would honour its keys max_split_size_mb");
}

// ----------------------------------------------------------------------------
// The driver API, dlsym and cuGetProcAddress
// ----------------------------------------------------------------------------

Test(preload, driver_api_through_cuGetProcAddress_and_dlsym) {
  shim_assert_ok(shim_prog("drvapi", fake_driver(), SIM ",quiet:true"), "drvapi");
}

/* progs/passthrough with args on backend:cuda and the fake driver whose
 * devices have no virtual memory management. */
static shim_run_t *run_without_vmm(const char *args) {
  char env[1024], pre[512], cmd[1024];
  shim_preload(pre, sizeof pre);
  snprintf(env, sizeof env, "FAKE_CUDA_NO_VMM=1 LD_PRELOAD='%s' CUDALLOC_CONF='backend:cuda,quiet:true'", pre);
  snprintf(cmd, sizeof cmd, "%s/progs/passthrough %s%s", shim_build(), fake_driver(), args);
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "passthrough");
  return r;
}

/* A device without virtual memory management (the fake driver with
 * FAKE_CUDA_NO_VMM=1, on backend:cuda): cuMemAlloc reaches the driver's
 * own allocator, with one line on stderr. Before the fix the CUDA backend
 * never asked the attribute and the core served the device regardless:
 * "passthrough.c:45: check failed: d == FAKE_PTR". */
Test(preload, a_device_without_vmm_passes_allocations_through) {
  shim_run_t *r = run_without_vmm("");
  shim_assert_has(r, "no virtual memory management");
  const char *second = strstr(r->out, "cudalloc:");
  cr_assert(second && !strstr(second + 1, "cudalloc:"), "one line from cudalloc:\n%s", r->out);
}

/* PyTorch's entry points on a device cudalloc does not serve (no VMM):
 * the driver's own cuMemAlloc and cuMemFree, as without cudalloc. Before
 * the fix cudalloc_torch_malloc returned NULL ("passthrough.c:23: check
 * failed: p == (void *)FAKE_PTR"). Input tried: a free of 0x1234000, which
 * neither cudalloc nor the driver allocated: one line, nothing freed. */
Test(preload, pytorch_entry_points_pass_a_device_without_vmm_to_the_driver) {
  shim_run_t *r = run_without_vmm(" torch");
  shim_assert_has(r, "0x1234000 is neither cudalloc's nor the driver's");
}

Test(preload, driver_api_on_the_simulated_device_without_a_driver) {
  shim_assert_ok(shim_prog("drvapi", "-", SIM ",quiet:true"), "drvapi");
}

/* The CUDA backend on the fake driver: a context of the program's own is
 * passed through to the driver, the primary context served. Before the fix
 * cudalloc served it and recorded its fences in the primary context
 * ("check failed: d == FAKE_PTR"). */
Test(preload, a_programs_own_context_is_passed_through) {
  shim_assert_ok(shim_prog("own_context", fake_driver(), "backend:cuda,quiet:true"), "own_context");
}

/* The re-entry guard (shim/guard.h): the fake driver, inside a
 * cuMemGetAddressRange_v2 that cudalloc passed through, allocates through
 * the cuMemAlloc that cuGetProcAddress handed out (cudalloc's), as the
 * runtime calls back into the driver. With the guard broken (ca_guard_enter's
 * `outer` forced to true) the core served that inner call and the program
 * failed with "reentry.c:45: check failed: *inner == FAKE_PTR". */
Test(preload, a_call_back_from_a_passed_through_call_reaches_the_driver) {
  char env[1024], pre[512], cmd[1024];
  shim_preload(pre, sizeof pre);
  snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF='backend:cuda,quiet:true'", pre);
  snprintf(cmd, sizeof cmd, "%s/progs/reentry %s", shim_build(), fake_driver());
  shim_assert_ok(shim_sh(env, cmd), "reentry");
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

/* The line of out that begins with prefix, up to its newline. */
static const char *line_of(const char *out, const char *prefix, char *buf, size_t cap) {
  const char *p = strstr(out, prefix);
  cr_assert_not_null(p, "no \"%s\" line in:\n%s", prefix, out);
  snprintf(buf, cap, "%.*s", (int)strcspn(p, "\n"), p);
  return buf;
}

/* Regression (issue 9): the pass-through looked the real runtime up in the
 * global scope only, where a runtime loaded RTLD_LOCAL is not: every call
 * answered 801 (cudaErrorNotSupported, "no CUDA runtime library is
 * loaded"), the first check of the program failed with "count -1 (801)",
 * and cudaGetLastError reported cudalloc's 801, not the runtime's error.
 * Now each library reaches the runtime of its own scope (two fakes at once,
 * 3 and 5 devices), and the real libcudart, behind a library loaded by a
 * library, answers exactly as it does without cudalloc. CUDALLOC_CONF is
 * unset: the default backend, which steps aside without a driver. */
Test(preload, runtimes_loaded_rtld_local_are_found_in_the_callers_scope) {
  char bare[512], mine[512];
  shim_run_t *r = shim_prog_bare("rtld_local", NULL, NULL);
  shim_assert_ok(r, "rtld_local");
  line_of(r->out, "rtld_local: libcudart:", bare, sizeof bare);
  r = shim_prog("rtld_local", NULL, NULL);
  shim_assert_ok(r, "rtld_local");
  shim_assert_lacks(r, "no CUDA runtime library is loaded");
  cr_assert_str_eq(line_of(r->out, "rtld_local: libcudart:", mine, sizeof mine), bare,
                   "the real runtime answered otherwise through cudalloc");
}

// ----------------------------------------------------------------------------
// PyTorch's pluggable allocator: dlopen, no preload
// ----------------------------------------------------------------------------

/* A program opens libcudalloc.so with dlopen, with no GLIBC_TUNABLES, and
 * the library asks for no static TLS (DF_STATIC_TLS): its private jemalloc
 * is built with --disable-initial-exec-tls (alloc/jemalloc.mk). With
 * Debian's binary jemalloc linked in, both failed: "cannot allocate memory
 * in static TLS block", and FLAGS STATIC_TLS in the dynamic section. */
/* tests/progs/dlopen_lib with args: libcudalloc.so opened with dlopen and
 * no GLIBC_TUNABLES. It must exit 0. */
static shim_run_t *dlopen_lib(const char *args) {
  char env[512], cmd[1024];
  snprintf(env, sizeof env, "-u GLIBC_TUNABLES LD_PRELOAD='%s' CUDALLOC_CONF=" SIM ",quiet:true",
           shim_san_runtime());
  snprintf(cmd, sizeof cmd, "%s/progs/dlopen_lib %s/libcudalloc.so %s", shim_build(), shim_build(), args);
  shim_run_t *r = shim_sh(env, cmd);
  cr_assert_eq(r->status, 0, "dlopen_lib %s ended with %d:\n%s", args, r->status, r->out);
  return r;
}

Test(preload, dlopen_needs_no_static_tls) {
  shim_assert_has(dlopen_lib(""), "dlopen_lib: ok");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "readelf -dW %s/libcudalloc.so", shim_build());
  shim_run_t *r = shim_sh(NULL, cmd);
  cr_assert_eq(r->status, 0, "readelf failed:\n%s", r->out);
  shim_assert_lacks(r, "STATIC_TLS");
}

/* Regression: with the library's 9,204 bytes of TLS (its jemalloc's 2.6
 * KiB, the stack memo's 1 KiB, the arena routes' 4 KiB...), glibc gave a
 * dlopen'd libcudalloc.so dynamic TLS, and each thread-local access of
 * PyTorch's pair was a _dl_tlsdesc_dynamic call: 75 instructions of its
 * 1,079 (bench/torch_pair). "tls: dynamic" then; now the large per-thread
 * state is on the heap (alloc/include/thread_heap.h) and the TLS fits in
 * glibc's optional static TLS (512 bytes, shared by every library loaded
 * late). Descriptors (-mtls-dialect=gnu2) are what lets glibc do that; the
 * sanitizer builds and other machines build without them, and skip. */
static unsigned tls_segment_bytes(void) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "readelf -lW %s/libcudalloc.so | awk '$1 == \"TLS\" { print \"memsz\", $6 }'",
           shim_build());
  shim_run_t *r = shim_sh(NULL, cmd);
  const char *m = strstr(r->out, "memsz 0x");
  cr_assert_not_null(m, "no TLS segment size from readelf:\n%s", r->out);
  return (unsigned)strtoul(m + 6, NULL, 16);
}

Test(preload, tls_stays_small) {
  unsigned memsz = tls_segment_bytes();
  cr_assert_leq(memsz, 256, "libcudalloc.so's TLS is %u bytes: glibc spares a dlopen'd library 512 at most, "
                "shared with every other one", memsz);
}

Test(preload, dlopen_gets_static_tls) {
  bool descriptors = !shim_sanitizer();
#if !defined(__x86_64__)
  descriptors = false;
#endif
  if (!descriptors) cr_skip_test("no TLS descriptors in this build: glibc gives a dlopen'd library dynamic TLS");
  shim_assert_has(dlopen_lib(""), "dlopen_lib: tls: static");
}

/* Regression: a thread that had allocated through a dlopen'd library
 * exited after the program closed the library, and its pthread key
 * destructors (the front cache's, the stack memo's...) ran in unmapped
 * code: a segmentation fault (status 139). The library is now linked with
 * -z nodelete, and a dlclose leaves it loaded. */
Test(preload, a_thread_exiting_after_dlclose_does_not_crash) {
  shim_assert_has(dlopen_lib("dlclose"), "dlopen_lib: dlclose: ok");
}

static shim_run_t *torch_api(const char *conf) {
  char env[1024], cmd[1024];
  snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF=%s", shim_san_runtime(), conf);
  snprintf(cmd, sizeof cmd, "%s/progs/torch_api %s/libcudalloc.so", shim_build(), shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "torch_api");
  shim_assert_has(r, "torch_api: ok (2 devices)");
  return r;
}

Test(preload, pytorch_pluggable_allocator_entry_points) {
  torch_api(SIM ",sim_devices:2");
}

/* Regression (issue 9): a block freed through the pluggable entry point
 * was handed out again at once on its stream, though a side stream
 * (record_stream, which PyTorch cannot forward) may still use it: "reused
 * at once on its stream: yes" with work pending (manual events). Now the
 * free waits like cudaFree's unless torch_free:stream opts into reuse. */
Test(preload, pytorch_frees_wait_for_the_device_unless_torch_free_stream) {
  shim_assert_has(torch_api(SIM ",sim_devices:2,sim_events:manual"), "reused at once on its stream: no");
  shim_assert_has(torch_api(SIM ",sim_devices:2,sim_events:manual,torch_free:stream"),
                  "reused at once on its stream: yes");
}

// ----------------------------------------------------------------------------
// Pinned host memory
// ----------------------------------------------------------------------------

/* Every entry point, bad input, and the program's malloc: glibc's after the
 * preload, and not called in 10000 cached cudaMalloc/cudaFree and
 * cudaHostAlloc/cudaFreeHost pairs. (Before the device core kept spare
 * fences, this failed: "13 calls of the program's malloc in 10000 cached
 * pairs", each cudaFree epoch sealing a freshly calloc'ed fence.) */
Test(preload, pinned_host_memory_leaves_the_programs_malloc_alone) {
  /* sim_events:auto, not lag: the loop issues no device work, and with
   * lagging events cudaFree's fences complete only after later device
   * calls, so every pair would take the slow path (which may malloc) and
   * grow the pool; what is counted here is the hot path's bookkeeping. */
  /* Under a sanitizer the exit summary is left out: the program replaces
   * malloc, calloc, realloc and free while the sanitizer's runtime is
   * preloaded, and libdw, naming call sites at exit, then frees through
   * the program's free a block that glibc did not allocate: glibc aborts
   * ("munmap_chunk(): invalid pointer"; seen under ASan, and not cured by
   * replacing the aligned allocators too). The malloc checks run in every
   * build. */
  bool san = shim_sanitizer();
  shim_run_t *r = shim_prog("pinned_host", NULL, san ? "backend:sim,sim_events:auto,quiet:true" : "backend:sim,sim_events:auto");
  shim_assert_ok(r, "pinned_host");
  if (!san) shim_assert_has(r, "pinned host memory: peak allocated");
}

Test(preload, pinned_block_in_an_async_copy_waits_for_its_stream) {
  shim_assert_ok(shim_prog("pinned_host", "copies", SIM ",sim_events:manual,quiet:true"), "pinned_host");
}

/* The malloc check itself: with jemalloc preloaded in front of cudalloc,
 * the process's malloc is jemalloc's, and the program must say so. */
Test(preload, malloc_check_catches_a_replaced_malloc) {
  const char *je = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  if (access(je, R_OK) != 0) cr_skip_test("no %s", je);
  char env[1024], pre[512], cmd[512];
  shim_preload(pre, sizeof pre);
  snprintf(env, sizeof env, "LD_PRELOAD='%s %s' CUDALLOC_CONF=" SIM ",quiet:true", je, pre);
  snprintf(cmd, sizeof cmd, "%s/progs/pinned_host malloc", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  cr_assert_eq(r->status, 1, "the check passed with jemalloc's malloc (%d):\n%s", r->status, r->out);
  shim_assert_has(r, "libjemalloc.so.2's, not glibc's");
  shim_assert_ok(shim_prog("pinned_host", "malloc", SIM ",quiet:true"), "pinned_host");
}
