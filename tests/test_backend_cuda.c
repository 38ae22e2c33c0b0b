/* The CUDA driver backend.
 *
 * Without a driver (CI, the development machines): init fails with an error
 * code and one line on stderr, and nothing crashes. With a driver and a GPU
 * (bench/gpu-check.sh) those checks skip and the smoke tests (suite
 * cuda_gpu) drive the real virtual memory API: reserve, create, map, set
 * access, events, unmap, release, and the error codes that backend.h
 * promises. The same smoke tests run everywhere against a fake driver
 * (tests/fake/libcuda.c, suite cuda_fake), which also shows what a GPU
 * cannot show on demand: a failing cuInit, a missing entry point, no driver
 * call after abandon(), one retain per primary context.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "stderr_capture.h"

static const ca_backend_t *be = &ca_backend_cuda;

/* Calls init with stderr captured; returns its code, the text in err. */
static CUresult init_captured(char *err, size_t cap) {
  capture_t c;
  capture_begin(&c);
  CUresult rc = be->init(NULL);
  capture_end(&c, err, cap);
  return rc;
}

/* Skips the no-driver checks where a GPU answers. */
static CUresult init_expecting_failure(char *err, size_t cap) {
  CUresult rc = init_captured(err, cap);
  if (rc == CUDA_SUCCESS)
    cr_skip_test("a CUDA driver and device are present: the no-driver checks do not apply "
                 "(the cuda_gpu smoke tests run instead)");
  return rc;
}

// ----------------------------------------------------------------------------
// Everywhere
// ----------------------------------------------------------------------------

Test(cuda_backend, the_table_is_complete) {
  cr_assert_str_eq(be->name, "cuda");
  cr_assert_not_null(be->abandon);
#define CHECK_OP(op) cr_assert_not_null(be->op, "ca_backend_cuda." #op " is missing");
  CA_BACKEND_OPS(CHECK_OP)
#undef CHECK_OP
}

Test(cuda_backend, the_configuration_selects_it) {
  cr_assert_eq(ca_config_load("backend:cuda"), 0);
  cr_assert_eq(ca_backend_find(ca_config.backend), &ca_backend_cuda);
  cr_assert_eq(ca_config_load(""), 0);
  cr_assert_eq(ca_backend_find(ca_config.backend), &ca_backend_cuda, "cuda is the default backend");
  cr_assert_eq(ca_backend_find("sim"), &ca_backend_sim);
  cr_assert_null(ca_backend_find("cud"));
  cr_assert_null(ca_backend_find(NULL));
}

/* The word a hand-out reads (ca_backend_handout_watch): the CUDA backend
 * checks nothing (0), the simulated device is watched through its count of
 * pending work, and a backend with a check but no such word is called at
 * every hand-out (1), as backend.h's contract says for a NULL
 * handout_pending. Every hand-out site's oracle test fails when the watch
 * reads 0 for the simulated device (test_sim_reuse_oracle, test_core_tcache,
 * test_pinned). */
static void check_nothing(uintptr_t va, size_t size, ca_stream_t stream, bool ordered, void *site) {
  (void)va, (void)size, (void)stream, (void)ordered, (void)site;
}
Test(cuda_backend, each_backend_has_the_hand_out_watch_its_check_needs) {
  cr_assert_eq(*ca_backend_handout_watch(&ca_backend_cuda), 0, "no check: the watch never calls");
  cr_assert_not_null(ca_backend_sim.handout_pending);
  cr_assert_eq(ca_backend_handout_watch(&ca_backend_sim), ca_backend_sim.handout_pending);
  ca_backend_t always = {.name = "always", .check_handout = check_nothing};
  cr_assert_eq(*ca_backend_handout_watch(&always), 1, "a check with no pending word is made at every hand-out");
}

/* The library never links libcuda: it is loaded only when init() asks. */
Test(cuda_backend, libcuda_is_not_loaded_before_init) {
  cr_assert_null(dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD),
                 "libcuda.so.1 is loaded although nothing called init()");
}

// ----------------------------------------------------------------------------
// Without a driver
// ----------------------------------------------------------------------------

Test(cuda_backend, init_fails_with_one_clear_line) {
  char err[4096];
  CUresult rc = init_expecting_failure(err, sizeof err);
  cr_assert_eq(count_lines(err), 1, "init printed %d lines:\n%s", count_lines(err), err);
  cr_assert(strncmp(err, "cudalloc: CUDA backend unavailable: ", 36) == 0, "%s", err);
  cr_assert_not_null(strstr(err, "CUDALLOC_CONF=backend:sim"), "no hint in: %s", err);
  if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    cr_assert_eq(rc, CUDA_ERROR_NOT_INITIALIZED, "init returned %d", rc);
    cr_assert_not_null(strstr(err, "cannot load libcuda.so.1"), "%s", err);
  } else {
    cr_log_info("libcuda.so.1 loads but init failed with %d: %s", rc, err);
  }
}

Test(cuda_backend, a_failed_init_is_reported_once) {
  char err[4096];
  CUresult rc = init_expecting_failure(err, sizeof err);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(init_captured(err, sizeof err), rc, "init changed its answer");
    cr_assert_str_empty(err, "a repeated init printed: %s", err);
  }
}

static void *init_thread(void *arg) {
  *(CUresult *)arg = ca_backend_cuda.init(NULL);
  return NULL;
}

Test(cuda_backend, concurrent_inits_agree_and_print_one_line) {
  enum { N = 8 };
  pthread_t th[N];
  CUresult rc[N];
  capture_t c;
  char err[4096];
  capture_begin(&c);
  for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, init_thread, &rc[i]);
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  capture_end(&c, err, sizeof err);
  if (rc[0] == CUDA_SUCCESS) cr_skip_test("a CUDA driver is present: init succeeded");
  for (int i = 1; i < N; i++) cr_assert_eq(rc[i], rc[0], "thread %d got %d, thread 0 got %d", i, rc[i], rc[0]);
  cr_assert_eq(count_lines(err), 1, "%d lines:\n%s", count_lines(err), err);
}

/* Every entry, before init and after a failed one: an error, no crash, and
 * no output written. */
static void assert_every_entry_refuses(void) {
  int n = -7, dev = -7, cap = -7;
  size_t fr = 7, tot = 7;
  uintptr_t va = 7;
  ca_phys_t h = 7;
  ca_event_t ev = (ca_event_t)0x7;
  ca_device_props_t props;
  memset(&props, 0x5a, sizeof props);
  const CUresult E = CUDA_ERROR_NOT_INITIALIZED;
  cr_assert_eq(be->device_count(&n), E);
  cr_assert_eq(be->get_device(&dev), E);
  cr_assert_eq(be->set_device(0), E);
  cr_assert_eq(be->device_props(0, &props), E);
  cr_assert_eq(be->mem_info(0, &fr, &tot), E);
  cr_assert_eq(be->reserve(0, 2 << 20, &va), E);
  cr_assert_eq(be->va_free(0x200000, 2 << 20), E);
  cr_assert_eq(be->create(0, 2 << 20, &h), E);
  cr_assert_eq(be->release(1), E);
  cr_assert_eq(be->map(0x200000, 2 << 20, 1, 0), E);
  cr_assert_eq(be->unmap(0x200000, 2 << 20), E);
  cr_assert_eq(be->set_access(0, 0x200000, 2 << 20), E);
  cr_assert_eq(be->event_create(0, &ev), E);
  cr_assert_eq(be->event_record((ca_event_t)0x10, CA_STREAM_LEGACY), E);
  cr_assert_eq(be->event_query((ca_event_t)0x10), E);
  cr_assert_eq(be->event_sync((ca_event_t)0x10), E);
  cr_assert_eq(be->event_destroy((ca_event_t)0x10), E);
  cr_assert_eq(be->stream_sync(NULL), E);
  cr_assert_eq(be->stream_sync(CA_STREAM_PER_THREAD), E);
  cr_assert_eq(be->device_sync(0), E);
  cr_assert_eq(be->is_capturing(NULL, &cap), E);
  cr_assert_eq(be->stream_device(NULL, &dev), E);
  cr_assert_eq(be->stream_device((ca_stream_t)0x10, &dev), E);
  cr_assert(n == -7 && dev == -7 && cap == -7 && fr == 7 && tot == 7 && va == 7 && h == 7);
  cr_assert_eq(ev, (ca_event_t)0x7);
  cr_assert_eq(props.name[0], 0x5a);
}

Test(cuda_backend, entries_before_init_refuse) {
  capture_t c;
  char err[4096];
  capture_begin(&c);
  assert_every_entry_refuses();
  capture_end(&c, err, sizeof err);
  cr_assert_str_empty(err, "an entry before init printed: %s", err);
}

Test(cuda_backend, entries_after_a_failed_init_refuse) {
  char err[4096];
  init_expecting_failure(err, sizeof err);
  assert_every_entry_refuses();
}

/* abandon() is what a fork child and the exit path call: never a crash,
 * and the next init starts over (and reports again). */
Test(cuda_backend, abandon_forgets_and_init_starts_over) {
  char err[4096];
  be->abandon();                       /* before any init */
  CUresult rc = init_expecting_failure(err, sizeof err);
  be->abandon();
  be->abandon();
  cr_assert_eq(init_captured(err, sizeof err), rc);
  cr_assert_eq(count_lines(err), 1, "the retry after abandon printed:\n%s", err);
  be->abandon();
  assert_every_entry_refuses();
}

// ----------------------------------------------------------------------------
// With a driver: a real GPU (suite cuda_gpu) or the fake driver (cuda_fake)
// ----------------------------------------------------------------------------

typedef struct gpu_s {
  size_t gran;
  size_t total;
} gpu_t;

static gpu_t gpu;
static void *fake_lib;   /* the fake driver, in the cuda_fake suite */

/* Starts the backend on whatever driver is loaded and checks device 0. */
static void start_driver(const char *what) {
  char err[4096];
  CUresult rc = init_captured(err, sizeof err);
  if (rc != CUDA_SUCCESS)
    cr_skip_test("no CUDA driver or device here (init returned %d): the %s test needs one", rc, what);
  cr_assert_str_empty(err, "a successful init printed: %s", err);
  int n = 0;
  cr_assert_eq(be->device_count(&n), 0);
  cr_assert_geq(n, 1);
  ca_device_props_t p;
  cr_assert_eq(be->device_props(0, &p), 0);
  cr_assert_gt(p.total_bytes, 0);
  cr_assert_geq(p.granularity, 4096);
  cr_assert_eq(p.granularity & (p.granularity - 1), 0, "granularity %zu", p.granularity);
  cr_assert_neq(p.name[0], 0);
  cr_log_info("device 0: %s, %zu MiB, granularity %zu KiB, %d device(s)", p.name,
              p.total_bytes >> 20, p.granularity >> 10, n);
  gpu = (gpu_t){p.granularity, p.total_bytes};
}

/* $(BUILD)/tests/fake/libcuda.so.1, beside this test binary. */
static const char *fake_path(char *buf, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", buf, cap - 32);
  cr_assert_gt(n, 0);
  buf[n] = 0;
  strcpy(strrchr(buf, '/') + 1, "fake/libcuda.so.1");
  return buf;
}

/* Loads the fake driver by path; the backend's dlopen("libcuda.so.1") then
 * finds it by its soname. The Makefile builds it with this binary: missing,
 * it fails the suite rather than skip it unseen. */
static void load_fake(void) {
  char path[4096];
  fake_path(path, sizeof path);
  cr_assert_eq(access(path, R_OK), 0, "the fake driver %s is not built", path);
  fake_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(fake_lib, "%s", dlerror());
}

static unsigned long fake_calls(void) {
  unsigned long (*fn)(void) = (unsigned long (*)(void))dlsym(fake_lib, "fake_cuda_calls");
  cr_assert_not_null(fn);
  return fn();
}

static int fake_int(const char *probe, int arg) {
  int (*fn)(int) = (int (*)(int))dlsym(fake_lib, probe);
  cr_assert_not_null(fn, "%s", probe);
  return fn(arg);
}

/* One body, two suites: on a real GPU and on the fake driver. */
#define SMOKE(name)                                        \
  static void name(void);                                  \
  Test(cuda_gpu, name) { start_driver("GPU"); name(); }    \
  Test(cuda_fake, name) { load_fake(); start_driver("fake-driver"); name(); } \
  static void name(void)

SMOKE(devices_and_contexts) {
  int n = 0, dev = -1;
  cr_assert_eq(be->device_count(&n), 0);
  cr_assert_eq(be->get_device(&dev), 0);       /* no context yet: device 0's primary */
  cr_assert_eq(dev, 0);
  cr_assert_eq(be->set_device(n - 1), 0);
  cr_assert_eq(be->get_device(&dev), 0);
  cr_assert_eq(dev, n - 1);
  cr_assert_eq(be->set_device(n), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(be->set_device(-1), CUDA_ERROR_INVALID_DEVICE);
  ca_device_props_t p;
  cr_assert_eq(be->device_props(n, &p), CUDA_ERROR_INVALID_DEVICE);
  size_t fr, tot;
  cr_assert_eq(be->mem_info(n, &fr, &tot), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(be->mem_info(0, &fr, &tot), 0, "device 0 while device %d is current", n - 1);
  cr_assert_eq(be->get_device(&dev), 0);
  cr_assert_eq(dev, n - 1, "a call on device 0 changed the current device");
  cr_assert_eq(be->init(NULL), 0, "init is idempotent");
}

SMOKE(reserve_create_map_access_unmap_release) {
  size_t free0, free1, free2, total;
  size_t size = 32 * gpu.gran, vsize = 64 * gpu.gran;
  cr_assert_eq(be->mem_info(0, &free0, &total), 0);
  cr_assert_leq(free0, total);
  cr_assert(total <= gpu.total && total >= gpu.total / 10 * 9, "mem_info total %zu, device %zu", total,
            gpu.total);

  uintptr_t va = 0;
  ca_phys_t h = 0;
  cr_assert_eq(be->reserve(0, vsize, &va), 0);
  cr_assert_eq(va % gpu.gran, 0);
  cr_assert_eq(be->create(0, size, &h), 0);
  cr_assert_eq(be->mem_info(0, &free1, &total), 0);
  cr_assert_leq(free1 + size / 2, free0, "free memory did not drop: %zu -> %zu", free0, free1);
  cr_assert_eq(be->map(va, size, h, 0), 0);
  cr_assert_eq(be->set_access(0, va, size), 0);
  cr_assert_eq(be->device_sync(0), 0);
  cr_assert_eq(be->unmap(va, size), 0);
  cr_assert_eq(be->release(h), 0);
  cr_assert_eq(be->va_free(va, vsize), 0);
  cr_assert_eq(be->mem_info(0, &free2, &total), 0);
  cr_assert_geq(free2, free1 + size / 2, "free memory did not come back: %zu -> %zu", free1, free2);
  cr_log_info("free: %zu MiB, after create %zu MiB, after release %zu MiB", free0 >> 20,
              free1 >> 20, free2 >> 20);
}

/* set_access may cover several maps at once (the core batches it). */
SMOKE(access_spans_adjacent_maps) {
  uintptr_t va;
  ca_phys_t a, b;
  cr_assert_eq(be->reserve(0, 4 * gpu.gran, &va), 0);
  cr_assert_eq(be->create(0, gpu.gran, &a), 0);
  cr_assert_eq(be->create(0, 2 * gpu.gran, &b), 0);
  cr_assert_eq(be->map(va, gpu.gran, a, 0), 0);
  cr_assert_eq(be->map(va + gpu.gran, 2 * gpu.gran, b, 0), 0);
  cr_assert_eq(be->set_access(0, va, 3 * gpu.gran), 0);
  cr_assert_eq(be->unmap(va, 3 * gpu.gran), 0, "one unmap over two adjacent maps");
  cr_assert_eq(be->release(a), 0);
  cr_assert_eq(be->release(b), 0);
  cr_assert_eq(be->va_free(va, 4 * gpu.gran), 0);
}

/* Compares one answer of the driver with what backend.h promises; every
 * difference is logged, so that one run on a GPU lists them all. */
#define EXPECT_CODE(call, want, rule)                                              \
  do {                                                                             \
    CUresult got_ = (call);                                                        \
    if (got_ != (want)) {                                                          \
      cr_log_error("%s: the driver returned %d, backend.h promises %d", rule, got_, want); \
      mismatches++;                                                                \
    }                                                                              \
  } while (0)

/* The codes backend.h promises for broken rules, as the driver answers. */
SMOKE(broken_rules_return_the_documented_codes) {
  const CUresult INVAL = CUDA_ERROR_INVALID_VALUE;
  const size_t g = gpu.gran;
  int mismatches = 0;
  uintptr_t va, other;
  ca_phys_t h, h2;
  /* The driver itself reserves 1.5 pages (it wants whole host pages only):
   * the backend enforces backend.h's rule. Should it not, the reservation
   * is given back rather than leaked. */
  if (be->reserve(0, g + g / 2, &other) == CUDA_SUCCESS) {
    cr_log_error("reserve of a partial page: the backend passed it to the driver, which reserved it");
    mismatches++;
    cr_assert_eq(be->va_free(other, g + g / 2), 0);
  }
  EXPECT_CODE(be->create(0, g / 2, &h), INVAL, "create of a partial page");
  cr_assert_eq(be->reserve(0, 4 * g, &va), 0);
  cr_assert_eq(be->create(0, 2 * g, &h), 0);
  EXPECT_CODE(be->map(va, g, h, g / 2), INVAL, "map at a misaligned offset");
  EXPECT_CODE(be->map(va, 4 * g, h, 0), INVAL, "map beyond the end of the handle");
  cr_assert_eq(be->map(va, 2 * g, h, 0), 0);
  EXPECT_CODE(be->map(va + g, g, h, 0), INVAL, "map over a mapping");
  EXPECT_CODE(be->unmap(va, g), INVAL, "unmap of half a mapping");
  EXPECT_CODE(be->set_access(0, va, 3 * g), INVAL, "set_access beyond the mapped range");
  cr_assert_eq(be->set_access(0, va, 2 * g), 0);
  /* The driver defers the release of a mapped handle until its unmap. */
  cr_assert_eq(be->create(0, g, &h2), 0);
  cr_assert_eq(be->map(va + 2 * g, g, h2, 0), 0);
  EXPECT_CODE(be->release(h2), CUDA_SUCCESS, "release of a mapped handle (deferred)");
  EXPECT_CODE(be->unmap(va + 2 * g, g), CUDA_SUCCESS, "unmap after a deferred release");
  EXPECT_CODE(be->unmap(va, 2 * g), CUDA_SUCCESS, "unmap of the whole mapping");
  EXPECT_CODE(be->release(h), CUDA_SUCCESS, "release");
  EXPECT_CODE(be->va_free(va, 4 * g), CUDA_SUCCESS, "va_free");
  cr_assert_eq(mismatches, 0, "%d answers of the driver differ from backend.h (listed above)", mismatches);
}

SMOKE(events_and_streams) {
  ca_event_t ev;
  int capturing = -1;
  cr_assert_eq(be->event_create(0, &ev), 0);
  cr_assert_eq(be->event_record(ev, CA_STREAM_LEGACY), 0);
  CUresult q = be->event_query(ev);
  cr_assert(q == CUDA_SUCCESS || q == CUDA_ERROR_NOT_READY, "query returned %d", q);
  cr_assert_eq(be->event_sync(ev), 0);
  cr_assert_eq(be->event_query(ev), 0);
  cr_assert_eq(be->event_record(ev, CA_STREAM_PER_THREAD), 0);
  cr_assert_eq(be->event_record(ev, NULL), 0);
  cr_assert_eq(be->stream_sync(NULL), 0);
  cr_assert_eq(be->stream_sync(CA_STREAM_LEGACY), 0);
  cr_assert_eq(be->stream_sync(CA_STREAM_PER_THREAD), 0);
  cr_assert_eq(be->event_query(ev), 0);
  cr_assert_eq(be->is_capturing(NULL, &capturing), 0);
  cr_assert_eq(capturing, 0);
  cr_assert_eq(be->is_capturing(CA_STREAM_PER_THREAD, &capturing), 0);
  cr_assert_eq(capturing, 0);
  cr_assert_eq(be->event_destroy(ev), 0);
  cr_assert_eq(be->device_sync(0), 0);
}

typedef CUresult (*ctx_get_current_fn)(CUcontext *);

/* In a fresh thread: one device call, then the thread's current context. */
static void *fresh_thread(void *arg) {
  size_t fr, tot;
  ca_event_t ev;
  CUcontext cur = (CUcontext)0x1;
  CUresult *rc = arg;
  rc[0] = ca_backend_cuda.mem_info(0, &fr, &tot);
  if (rc[0] == CUDA_SUCCESS) rc[0] = ca_backend_cuda.event_create(0, &ev);
  if (rc[0] == CUDA_SUCCESS) rc[0] = ca_backend_cuda.event_destroy(ev);
  void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  ctx_get_current_fn get = lib ? (ctx_get_current_fn)dlsym(lib, "cuCtxGetCurrent") : NULL;
  rc[1] = get ? get(&cur) : CUDA_ERROR_NOT_FOUND;
  rc[2] = cur == NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  return NULL;
}

/* A thread with no context: the device's context is pushed for the call and
 * popped after it, leaving the thread as it was. */
SMOKE(a_thread_without_context_is_left_without_one) {
  pthread_t th;
  CUresult rc[3] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
  pthread_create(&th, NULL, fresh_thread, rc);
  pthread_join(th, NULL);
  cr_assert_eq(rc[0], 0, "device calls from a fresh thread: %d", rc[0]);
  cr_assert_eq(rc[1], 0, "cuCtxGetCurrent: %d", rc[1]);
  cr_assert_eq(rc[2], 0, "the backend left a context current on the thread");
}

// ----------------------------------------------------------------------------
// The fake driver only: paths a real GPU cannot show on demand
// ----------------------------------------------------------------------------

/* The fake NVML beside the fake driver, opened by path so that the
 * backend's dlopen("libnvidia-ml.so.1") finds it by its soname. */
static void *load_fake_nvml(void) {
  char path[4096];
  fake_path(path, sizeof path);
  strcpy(strrchr(path, '/') + 1, "libnvidia-ml.so.1");
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(lib, "the fake NVML %s: %s", path, dlerror());
  return lib;
}

/* The out-of-memory report's other processes: NVML, asked for the device
 * by the PCI bus id the driver gives (the fake driver's device 0 sits at
 * 0000:3b:00.0). */
Test(cuda_fake, processes_come_from_nvml_by_pci_bus_id) {
  load_fake();
  void *nvml = load_fake_nvml();
  start_driver("fake-driver");
  ca_process_t p[4];
  unsigned n = 99;
  cr_assert_eq(be->processes(0, p, 4, &n), CUDA_SUCCESS);
  const char *(*bus_id)(void) = (const char *(*)(void))dlsym(nvml, "fake_nvml_last_bus_id");
  cr_assert_str_eq(bus_id(), "00000000:3b:00.0", "NVML's form of the driver's PCI ids");
  cr_assert_eq(n, 2);
  cr_assert_eq(p[0].pid, (uint32_t)getpid());
  cr_assert_eq(p[0].bytes, 1ull << 30);
  cr_assert_eq(p[1].pid, 1);
  cr_assert_eq(p[1].bytes, 256ull << 20);
  cr_assert_str_empty(p[1].name, "the core reads /proc/PID/comm");
  cr_assert_eq(be->processes(0, p, 1, &n), CUDA_SUCCESS);
  cr_assert_eq(n, 1, "at most cap");
  /* device 1 sits at 0000:3c:00.0, which this NVML does not know */
  cr_assert_eq(be->processes(1, p, 4, &n), CUDA_ERROR_NOT_SUPPORTED);
  cr_assert_str_eq(bus_id(), "00000000:3c:00.0");
  cr_assert_eq(be->processes(7, p, 4, &n), CUDA_ERROR_INVALID_DEVICE);
}

/* Without NVML the backend says it cannot tell (the report then says
 * "unknown", not "none"). */
Test(cuda_fake, processes_without_nvml_are_not_supported) {
  load_fake();
  start_driver("fake-driver");
  if (dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD) || dlopen("libnvidia-ml.so.1", RTLD_LAZY))
    cr_skip_test("a real NVML is installed here");
  ca_process_t p[4];
  unsigned n = 99;
  cr_assert_eq(be->processes(0, p, 4, &n), CUDA_ERROR_NOT_SUPPORTED);
  cr_assert_eq(n, 0);
}

Test(cuda_fake, a_failing_cuInit_is_reported_with_the_drivers_code) {
  setenv("FAKE_CUDA_INIT_FAIL", "1", 1);
  load_fake();
  char err[4096];
  cr_assert_eq(init_captured(err, sizeof err), CUDA_ERROR_NO_DEVICE);
  cr_assert_eq(count_lines(err), 1, "%s", err);
  cr_assert_not_null(strstr(err, "cuInit failed with CUDA_ERROR_NO_DEVICE (100)"), "%s", err);
  cr_assert_not_null(strstr(err, "CUDALLOC_CONF=backend:sim"), "%s", err);
  assert_every_entry_refuses();
}

Test(cuda_fake, a_missing_entry_point_is_named) {
  setenv("FAKE_CUDA_MISSING", "cuMemCreate", 1);
  load_fake();
  char err[4096];
  cr_assert_neq(init_captured(err, sizeof err), CUDA_SUCCESS);
  cr_assert_eq(count_lines(err), 1, "%s", err);
  cr_assert_not_null(strstr(err, "does not provide cuMemCreate"), "%s", err);
  assert_every_entry_refuses();
}

/* The entry point types are those of the CUDA 12.0 ABI: asked at another
 * version, the driver may hand out another ABI of the same name. */
Test(cuda_fake, every_entry_point_is_resolved_at_the_12_0_abi) {
  load_fake();
  start_driver("fake-driver");
  int all = fake_int("fake_cuda_requests", 0), at_12_0 = fake_int("fake_cuda_requests", 1);
  cr_assert_gt(all, 0, "the backend resolved nothing through cuGetProcAddress");
  cr_assert_eq(at_12_0, all, "%d of %d resolutions were not at CUDA 12.0 with default flags",
               all - at_12_0, all);
}

/* The exit path and the fork child must not reach the driver. */
Test(cuda_fake, abandon_makes_no_driver_call) {
  load_fake();
  start_driver("fake-driver");
  int dev;
  cr_assert_eq(be->get_device(&dev), 0);
  unsigned long before = fake_calls();
  be->abandon();
  assert_every_entry_refuses();
  cr_assert_eq(fake_calls(), before, "%lu driver calls after abandon()", fake_calls() - before);
  cr_assert_eq(be->init(NULL), 0, "init after abandon starts again");
  cr_assert_eq(be->get_device(&dev), 0);
}

static void *busy_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    size_t fr, tot;
    ca_event_t ev;
    int dev;
    if (ca_backend_cuda.mem_info(i & 1, &fr, &tot) || ca_backend_cuda.event_create(i & 1, &ev) ||
        ca_backend_cuda.event_destroy(ev) || ca_backend_cuda.get_device(&dev) || dev != 0)
      return (void *)1;
  }
  return NULL;
}

/* Each primary context is retained once, however many threads race for it. */
Test(cuda_fake, primary_contexts_are_retained_once) {
  load_fake();
  start_driver("fake-driver");
  pthread_t th[8];
  void *res;
  for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, busy_thread, NULL);
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], &res);
    cr_assert_null(res, "a device call failed in thread %d", i);
  }
  cr_assert_eq(fake_int("fake_cuda_retains", 0), 1);
  cr_assert_eq(fake_int("fake_cuda_retains", 1), 1);
  cr_assert_eq(fake_int("fake_cuda_live_handles", 0), 0);
}

/* Regression (issue 9): the fake reserved 1.5 pages, as the driver does
 * (it asks for whole host pages), and the backend passed the size on: the
 * reserve succeeded (0, not CUDA_ERROR_INVALID_VALUE) and the reservation
 * stayed, since the test expected a failure and never freed it. */
Test(cuda_fake, a_partial_page_reserve_is_refused_and_reserves_nothing) {
  load_fake();
  start_driver("fake-driver");
  uintptr_t va = 0;
  int before = fake_int("fake_cuda_reservations", 0);
  CUresult rc = be->reserve(0, gpu.gran + gpu.gran / 2, &va);
  if (rc == CUDA_SUCCESS) be->va_free(va, gpu.gran + gpu.gran / 2);
  cr_assert_eq(rc, CUDA_ERROR_INVALID_VALUE, "reserve of 1.5 pages returned %d", rc);
  cr_assert_eq(fake_int("fake_cuda_reservations", 0), before, "the driver holds a new reservation");
  cr_assert_eq(va, 0, "the output was written");
}

static void *slow_init_thread(void *arg) {
  (void)arg;
  ca_backend_cuda.init(NULL);
  return NULL;
}

/* Regression (issue 9): a fork while another thread held the backend's lock
 * (here: inside a slow cuInit) left the child's copy locked for ever; the
 * child's init after abandon() hung until the alarm killed it (status
 * 128 + SIGALRM). The lock is made anew in the child. */
Test(cuda_fake, a_fork_child_while_a_thread_holds_the_lock_can_start_again) {
  setenv("FAKE_CUDA_INIT_DELAY_MS", "400", 1);
  load_fake();
  pthread_t th;
  pthread_create(&th, NULL, slow_init_thread, NULL);
  usleep(100 * 1000);   /* the thread is inside cuInit, holding the lock */
  pid_t pid = fork();
  if (pid == 0) {
    alarm(5);
    unsetenv("FAKE_CUDA_INIT_DELAY_MS");
    be->abandon();      /* what the core does in a fork child */
    _exit(be->init(NULL) == CUDA_SUCCESS ? 0 : 3);
  }
  cr_assert_gt(pid, 0);
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  pthread_join(th, NULL);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  cr_assert_eq(code, 0, "the child ended with %d (%d: killed by its alarm, deadlocked)", code, 128 + SIGALRM);
}

/* The common case costs no push: the device's context is already current. */
Test(cuda_fake, no_push_when_the_context_is_current) {
  load_fake();
  start_driver("fake-driver");
  size_t fr, tot;
  uintptr_t va;
  ca_phys_t h;
  ca_event_t ev;
  cr_assert_eq(be->set_device(0), 0);
  int before = fake_int("fake_cuda_pushes", 0);
  cr_assert_eq(be->mem_info(0, &fr, &tot), 0);
  cr_assert_eq(be->reserve(0, gpu.gran, &va), 0);
  cr_assert_eq(be->create(0, gpu.gran, &h), 0);
  cr_assert_eq(be->map(va, gpu.gran, h, 0), 0);
  cr_assert_eq(be->set_access(0, va, gpu.gran), 0);
  cr_assert_eq(be->event_create(0, &ev), 0);
  cr_assert_eq(be->device_sync(0), 0);
  cr_assert_eq(fake_int("fake_cuda_pushes", 0), before, "a push although device 0 is current");
  cr_assert_eq(be->mem_info(1, &fr, &tot), 0);
  cr_assert_eq(fake_int("fake_cuda_pushes", 0), before + 1, "device 1 needs its context pushed");
  cr_assert_eq(be->event_destroy(ev), 0);
  cr_assert_eq(be->unmap(va, gpu.gran), 0);
  cr_assert_eq(be->release(h), 0);
  cr_assert_eq(be->va_free(va, gpu.gran), 0);
}

// ----------------------------------------------------------------------------
// Contexts and streams (the fake enforces the driver's rules on them)
// ----------------------------------------------------------------------------

typedef CUresult (*stream_create_fn)(CUstream *, unsigned);
typedef CUresult (*stream_destroy_fn)(CUstream);
typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*ctx_destroy_fn)(CUcontext);

static void *fake_sym(const char *name) {
  void *fn = dlsym(fake_lib, name);
  cr_assert_not_null(fn, "the fake driver has no %s", name);
  return fn;
}

/* A stream made with the driver while dev's primary context is current. */
static CUstream fake_stream_on(int dev) {
  CUstream s;
  cr_assert_eq(be->set_device(dev), 0);
  cr_assert_eq(((stream_create_fn)fake_sym("cuStreamCreate"))(&s, CU_STREAM_NON_BLOCKING), 0);
  return s;
}

/* Before the fix the event was recorded on the current context's legacy
 * stream (device 0's), which the driver refuses for an event of device 1:
 * "event_record returned 400" (CUDA_ERROR_INVALID_HANDLE). */
Test(cuda_fake, an_event_records_in_its_own_devices_context) {
  load_fake();
  start_driver("fake-driver");
  ca_event_t ev;
  cr_assert_eq(be->set_device(0), 0);
  cr_assert_eq(be->event_create(1, &ev), 0);
  CUresult rc = be->event_record(ev, CA_STREAM_LEGACY);
  cr_assert_eq(rc, 0, "event_record returned %d", rc);
  cr_assert_eq(be->event_record(ev, CA_STREAM_PER_THREAD), 0);
  cr_assert_eq(be->event_record(ev, fake_stream_on(1)), 0);
  cr_assert_eq(be->set_device(0), 0);
  cr_assert_eq(be->event_record(ev, fake_stream_on(0)), CUDA_ERROR_INVALID_HANDLE,
               "a stream of another device is refused, as backend.h says");
  cr_assert_eq(be->event_destroy(ev), 0);
}

/* The fake itself: what the backend must get right, it refuses. */
Test(cuda_fake, the_fake_enforces_context_rules) {
  load_fake();
  start_driver("fake-driver");
  CUresult (*record)(CUevent, CUstream) = (CUresult (*)(CUevent, CUstream))fake_sym("cuEventRecord");
  CUresult (*create)(CUevent *, unsigned) = (CUresult (*)(CUevent *, unsigned))fake_sym("cuEventCreate");
  CUresult (*destroy)(CUevent) = (CUresult (*)(CUevent))fake_sym("cuEventDestroy_v2");
  CUevent e;
  CUstream s1 = fake_stream_on(1);
  cr_assert_eq(be->set_device(0), 0);
  cr_assert_eq(create(&e, CU_EVENT_DISABLE_TIMING), 0);
  cr_assert_eq(record(e, s1), CUDA_ERROR_INVALID_HANDLE, "event and stream of different contexts");
  cr_assert_eq(record(e, (CUstream)0xdead0000), CUDA_ERROR_INVALID_HANDLE, "a made-up stream");
  cr_assert_eq(record((CUevent)0xdead0000, NULL), CUDA_ERROR_INVALID_HANDLE, "a made-up event");
  ((CUresult (*)(CUcontext))fake_sym("cuCtxSetCurrent"))(NULL);
  cr_assert_eq(record(e, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_CONTEXT, "the legacy stream without a context");
  cr_assert_eq(record(e, CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(destroy(e), 0);
  cr_assert_eq(destroy(e), CUDA_ERROR_INVALID_HANDLE, "a destroyed event");
}

Test(cuda_fake, stream_device_names_the_streams_device_and_refuses_bad_handles) {
  load_fake();
  start_driver("fake-driver");
  CUstream s1 = fake_stream_on(1);
  cr_assert_eq(be->set_device(0), 0);
  int dev = -1;
  cr_assert_eq(be->stream_device(s1, &dev), 0);
  cr_assert_eq(dev, 1, "a stream of device 1 while device 0 is current");
  cr_assert_eq(be->stream_device(CA_STREAM_LEGACY, &dev), 0);
  cr_assert_eq(dev, 0, "the default streams are the current device's");
  cr_assert_eq(be->stream_device(CA_STREAM_PER_THREAD, &dev), 0);
  cr_assert_eq(dev, 0);
  cr_assert_eq(((stream_destroy_fn)fake_sym("cuStreamDestroy_v2"))(s1), 0);
  dev = -7;
  cr_assert_eq(be->stream_device(s1, &dev), CUDA_ERROR_INVALID_HANDLE, "a destroyed stream");
  cr_assert_eq(be->stream_device((ca_stream_t)0xdead0000, &dev), CUDA_ERROR_INVALID_HANDLE, "a made-up handle");
  cr_assert_eq(dev, -7, "no device was written for a bad handle");
}

/* A context of the program's own is passed through, not served: the core
 * would record its fences in the device's primary context, which does not
 * order that context's work. */
Test(cuda_fake, a_programs_own_context_is_not_served) {
  load_fake();
  start_driver("fake-driver");
  CUcontext mine;
  CUstream s;
  int dev;
  cr_assert_eq(((ctx_create_fn)fake_sym("cuCtxCreate_v2"))(&mine, 0, 0), 0);
  cr_assert_eq(be->stream_device(CA_STREAM_LEGACY, &dev), CUDA_ERROR_NOT_SUPPORTED, "its default streams");
  cr_assert_eq(((stream_create_fn)fake_sym("cuStreamCreate"))(&s, 0), 0);
  cr_assert_eq(be->stream_device(s, &dev), CUDA_ERROR_NOT_SUPPORTED, "its streams");
  cr_assert_eq(be->get_device(&dev), 0, "get_device still answers");
  cr_assert_eq(dev, 0);
  ca_event_t ev;
  cr_assert_eq(be->event_create(0, &ev), 0, "the backend's own work runs in the primary context");
  cr_assert_eq(be->event_record(ev, CA_STREAM_LEGACY), 0);
  cr_assert_eq(be->event_destroy(ev), 0);
  cr_assert_eq(((ctx_destroy_fn)fake_sym("cuCtxDestroy_v2"))(mine), 0);
  cr_assert_eq(be->stream_device(CA_STREAM_LEGACY, &dev), 0, "without it, the primary context is served");
}

/* Pinned host memory both ways the backend pins it: cuMemHostAlloc, and
 * mmap + cuMemHostRegister (pinned_via:register). The memory is writable,
 * a whole allocation goes back, and the driver refuses a second free. */
static void pin_and_give_back(void) {
  void *p = NULL;
  cr_assert_eq(be->host_alloc(0, 2 << 20, &p), CUDA_SUCCESS);
  cr_assert_not_null(p);
  memset(p, 0x5a, 2 << 20);
  cr_assert_eq(be->host_free(p, 2 << 20), CUDA_SUCCESS);
  cr_assert_neq(be->host_free(p, 2 << 20), CUDA_SUCCESS, "a second free is refused");
}

Test(cuda_fake, pinned_host_memory_with_cuMemHostAlloc) {
  load_fake();
  start_driver("fake-driver");
  pin_and_give_back();
}

Test(cuda_fake, pinned_host_memory_with_cuMemHostRegister) {
  load_fake();
  start_driver("fake-driver");
  be->abandon();
  ca_backend_options_t o = {.host_register = true};
  cr_assert_eq(be->init(&o), CUDA_SUCCESS);
  pin_and_give_back();
}
