/* The default streams' device on the CUDA backend, with the fake driver
 * (tests/fake/libcuda.c): the program changes its current context with the
 * driver behind the shim's back (cuCtxSetCurrent, a push, a pop, which the
 * shim does not intercept). The backend's context key follows each change,
 * and the front cache's remembered device with it: a block cached on
 * device 0's default stream is never handed out for device 1. The twin
 * test keeps the remembered device (stale_stream_devices) and is caught. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cudalloc.h"
#include "default_pair.h"
#include "internal.h"
#include "stderr_capture.h"

static void *fake_lib;

/* $(BUILD)/tests/fake/libcuda.so.1, beside this test binary; loaded by
 * path, the backend's dlopen("libcuda.so.1") then finds it by its soname. */
static void load_fake(void) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  cr_assert_gt(n, 0);
  path[n] = 0;
  strcpy(strrchr(path, '/') + 1, "fake/libcuda.so.1");
  cr_assert_eq(access(path, R_OK), 0, "the fake driver %s is not built", path);
  fake_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(fake_lib, "%s", dlerror());
}

static void *fake_sym(const char *name) {
  void *fn = dlsym(fake_lib, name);
  cr_assert_not_null(fn, "the fake driver has no %s", name);
  return fn;
}

static CUcontext primary(int dev) {
  CUcontext c = NULL;
  cr_assert_eq(((CUresult (*)(CUcontext *, CUdevice))fake_sym("cuDevicePrimaryCtxRetain"))(&c, dev), 0);
  return c;
}
static void set_current(CUcontext c) { cr_assert_eq(((CUresult (*)(CUcontext))fake_sym("cuCtxSetCurrent"))(c), 0); }
static void push(CUcontext c) { cr_assert_eq(((CUresult (*)(CUcontext))fake_sym("cuCtxPushCurrent_v2"))(c), 0); }
static void pop(void) {
  CUcontext c;
  cr_assert_eq(((CUresult (*)(CUcontext *))fake_sym("cuCtxPopCurrent_v2"))(&c), 0);
}

/* cudalloc on the CUDA backend over the fake driver, with device 0's
 * context current (as a runtime program's first call leaves it); sites
 * tracked, as the front cache's hits need (a block goes back to its site). */
static void start(void) {
  load_fake();
  cr_assert_eq(cudalloc_init("backend:cuda,quiet:true,track:caller"), cudaSuccess);
  int n = 0;
  cr_assert_eq(ca_state.be->device_count(&n), 0);
  cr_assert_geq(n, 2, "the fake driver has two devices");
  set_current(primary(0));
}
static void stop(void) { capture_discard(cudalloc_shutdown); }
TestSuite(core_default_device_cuda, .fini = stop);

/* The contract (backend.h context_key): equal keys name the same context,
 * and the key follows the driver's current context however it changed. */
Test(core_default_device_cuda, the_context_key_follows_the_drivers_current_context) {
  start();
  void *k0 = ca_backend_cuda.context_key();
  cr_assert_not_null(k0, "device 0's context is current");
  push(primary(1));
  void *k1 = ca_backend_cuda.context_key();
  cr_assert_not_null(k1);
  cr_assert_neq(k1, k0, "a pushed context has its own key");
  pop();
  cr_assert_eq(ca_backend_cuda.context_key(), k0, "the pop is seen");
  set_current(primary(1));
  cr_assert_eq(ca_backend_cuda.context_key(), k1, "cuCtxSetCurrent is seen");
  set_current(NULL);
  cr_assert_null(ca_backend_cuda.context_key(), "no context, no key");
}

/* A block cached on device 0's default stream, then device 1's context made
 * current with the driver (how is given), then the same request: true when
 * it was served on device 1, not with device 0's cached block. */
static bool context_change_is_seen(bool stale, bool by_push) {
  start();
  free_default(alloc_default());   /* warm: the device remembered, the block cached */
  uint64_t hits = ca_debug.tcache_hits;
  void *p = alloc_default();
  free_default(p);
  cr_assert_eq(ca_debug.tcache_hits - hits, 1, "the front cache serves device 0's warm pair");
  ca_debug.stale_stream_devices = stale;
  if (by_push) push(primary(1));
  else set_current(primary(1));
  void *q = alloc_default();
  cudalloc_stats_t s1;
  cr_assert_eq(cudalloc_get_stats(1, &s1), cudaSuccess);
  bool on_1 = q != p && s1.num_live_blocks.current == 1;
  ca_debug.stale_stream_devices = false;
  free_default(q);
  if (by_push) pop();
  else set_current(primary(0));
  return on_1;
}

Test(core_default_device_cuda, cuCtxSetCurrent_behind_the_shims_back_moves_the_default_stream) {
  cr_assert(context_change_is_seen(false, false));
}

Test(core_default_device_cuda, a_push_behind_the_shims_back_moves_the_default_stream) {
  cr_assert(context_change_is_seen(false, true));
}

Test(core_default_device_cuda, a_stale_default_device_is_caught_on_cuda) {
  cr_assert_not(context_change_is_seen(true, false),
                "with the device kept through cuCtxSetCurrent, device 0's cached block is handed out");
}
