/* What the CUDA driver itself answers to every call cudalloc's CUDA backend
 * (alloc/backend/cuda.c) makes, run without cudalloc (bench/gpu-check.sh,
 * section driver). The simulated device (alloc/backend/sim/) and the fake
 * driver (tests/fake/libcuda.c) must answer the same; this is where the
 * answers come from.
 *
 *   driver_probe [--no-kernels]   --no-kernels: skip what launches a kernel
 *                                 (the dry run, against the fake driver)
 *
 * Output, one fact a line:
 *   entry <symbol>: resolved | MISSING      every entry point the backend
 *                                           resolves, and the probe's extras
 *   answer <call> <context> -> <code> [DIFFERS: why]
 *       <context>: primary (the device's primary context is current), none
 *       (a thread with no context), other (a context of cuCtxCreate is
 *       current). DIFFERS marks an answer that breaks what the backend relies
 *       on: it makes these calls with whatever context the calling thread
 *       has, or expects the code backend.h promises.
 *   cost <call>: ...                        per-page costs
 *   waits <call> (<stream>): no | YES | inconclusive
 *                                           whether the call returns while a
 *                                           kernel (that does not touch the
 *                                           memory) still runs
 * and last "driver_probe: ok" (exit 0) or "driver_probe: N answers differ"
 * (exit 1); exit 2 when the driver cannot be started. */
#include "cuda_entries.h"
#include "driver.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

// ----------------------------------------------------------------------------
// Entry points: the backend's (the same list as alloc/backend/cuda.c, checked
// by bench/gpu/check_results.sh against that file) and the probe's own
// ----------------------------------------------------------------------------

#define BACKEND_ENTRIES CA_CUDA_DRIVER_ENTRIES   /* alloc/backend/cuda_entries.h */

#define EXTRA_ENTRIES(X)                                                       \
  X(ctx_create, "cuCtxCreate", PFN_cuCtxCreate_v3020)                          \
  X(ctx_destroy, "cuCtxDestroy", PFN_cuCtxDestroy_v4000)                       \
  X(stream_create, "cuStreamCreate", PFN_cuStreamCreate_v2000)                 \
  X(stream_destroy, "cuStreamDestroy", PFN_cuStreamDestroy_v4000)

static struct {
#define FIELD(field, sym, type) type field;
  BACKEND_ENTRIES(FIELD)
  EXTRA_ENTRIES(FIELD)
#undef FIELD
} d;

static int resolve_all(void) {
  int missing = 0;
#define RESOLVE(field, sym, type)                                                \
  *(void **)&d.field = drv_proc(sym);                                            \
  printf("entry %s: %s\n", sym, d.field ? "resolved" : "MISSING");               \
  missing += d.field == NULL;
  BACKEND_ENTRIES(RESOLVE)
#undef RESOLVE
  int backend_missing = missing;
#define RESOLVE(field, sym, type)                                                \
  *(void **)&d.field = drv_proc(sym);                                            \
  printf("entry %s: %s (probe only)\n", sym, d.field ? "resolved" : "MISSING");
  EXTRA_ENTRIES(RESOLVE)
#undef RESOLVE
  return backend_missing;
}

// ----------------------------------------------------------------------------
// State and reporting
// ----------------------------------------------------------------------------

#define LEGACY CU_STREAM_LEGACY
#define PER_THREAD CU_STREAM_PER_THREAD

static CUdevice dev;
static CUcontext primary, other;   /* other: NULL when cuCtxCreate is missing or fails */
static size_t gran;
static int differs;

enum { ANY = -1000 };   /* no expectation: the answer is recorded only */

static void answer(const char *call, const char *ctx, CUresult rc, int want, const char *why) {
  int bad = want != ANY && (int)rc != want &&
            !(want == CUDA_SUCCESS && rc == CUDA_ERROR_NOT_READY && strstr(call, "Query"));
  printf("answer %-60s %-8s -> %s%s%s\n", call, ctx, drv_code(rc), bad ? "   DIFFERS: " : "",
         bad ? why : "");
  differs += bad;
}

static CUmemAllocationProp pinned(void) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = (int)dev;
  return prop;
}

static CUresult set_access(CUdeviceptr va, size_t size) {
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = (int)dev;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d.mem_set_access(va, size, &desc, 1);
}

/* Objects an operation works on, made in the primary context beforehand. */
typedef struct objs_s {
  CUdeviceptr va;
  CUmemGenericAllocationHandle h;
  CUevent ev;
  int mapped, accessed;
} objs_t;

static void make_objs(objs_t *o, int map, int access, int event) {
  CUmemAllocationProp prop = pinned();
  memset(o, 0, sizeof *o);
  d.ctx_set_current(primary);
  if (d.address_reserve(&o->va, 2 * gran, gran, 0, 0) != CUDA_SUCCESS) o->va = 0;
  if (d.mem_create(&o->h, gran, &prop, 0) != CUDA_SUCCESS) o->h = 0;
  if (map && o->va && o->h) o->mapped = d.mem_map(o->va, gran, 0, o->h, 0) == CUDA_SUCCESS;
  if (access && o->mapped) o->accessed = set_access(o->va, gran) == CUDA_SUCCESS;
  if (event && d.event_create(&o->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) o->ev = NULL;
}

static void drop_objs(objs_t *o) {
  d.ctx_set_current(primary);
  if (o->ev) d.event_sync(o->ev), d.event_destroy(o->ev);
  if (o->mapped) d.mem_unmap(o->va, gran);
  if (o->h) d.mem_release(o->h);
  if (o->va) d.address_free(o->va, 2 * gran);
}

// ----------------------------------------------------------------------------
// One call in each context situation
// ----------------------------------------------------------------------------

typedef CUresult (*op_fn)(objs_t *o);

typedef struct thread_call_s {
  op_fn fn;
  objs_t *o;
  CUresult rc;
} thread_call_t;

static void *call_in_thread(void *arg) {
  thread_call_t *c = (thread_call_t *)arg;
  c->rc = c->fn(c->o);
  return NULL;
}

enum { IN_PRIMARY, IN_NONE, IN_OTHER };
static const char *situation_name[] = {"primary", "none", "other"};

static CUresult call_in(int where, op_fn fn, objs_t *o) {
  CUcontext popped;
  CUresult rc;
  switch (where) {
    case IN_PRIMARY:
      d.ctx_set_current(primary);
      return fn(o);
    case IN_NONE: {
      thread_call_t c = {fn, o, CUDA_ERROR_UNKNOWN};
      pthread_t th;
      if (pthread_create(&th, NULL, call_in_thread, &c)) return CUDA_ERROR_UNKNOWN;
      pthread_join(th, NULL);
      return c.rc;
    }
    default:
      d.ctx_set_current(primary);
      if (d.ctx_push(other) != CUDA_SUCCESS) return CUDA_ERROR_UNKNOWN;
      rc = fn(o);
      d.ctx_pop(&popped);
      return rc;
  }
}

/* The operations, each on objects made beforehand in the primary context. */
static CUresult op_count(objs_t *o) { int n; (void)o; return d.device_get_count(&n); }
static CUresult op_total_mem(objs_t *o) { size_t n; (void)o; return d.device_total_mem(&n, dev); }
static CUresult op_name(objs_t *o) { char s[64]; (void)o; return d.device_get_name(s, 63, dev); }
/* The attribute the backend reads to decide whether it serves the device. */
static CUresult op_vmm(objs_t *o) {
  int v = 0;
  (void)o;
  return d.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
}
static CUresult op_granularity(objs_t *o) {
  size_t g;
  CUmemAllocationProp prop = pinned();
  (void)o;
  return d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}
static CUresult op_ctx_get_device(objs_t *o) { CUdevice x; (void)o; return d.ctx_get_device(&x); }
static CUresult op_mem_info(objs_t *o) { size_t f, t; (void)o; return d.mem_get_info(&f, &t); }
static CUresult op_reserve(objs_t *o) {
  CUdeviceptr va = 0;
  CUresult rc = d.address_reserve(&va, gran, gran, 0, 0);
  (void)o;
  if (rc == CUDA_SUCCESS) d.address_free(va, gran);
  return rc;
}
static CUresult op_va_free(objs_t *o) {
  CUresult rc = d.address_free(o->va, 2 * gran);
  if (rc == CUDA_SUCCESS) o->va = 0;
  return rc;
}
static CUresult op_create(objs_t *o) {
  CUmemGenericAllocationHandle h;
  CUmemAllocationProp prop = pinned();
  CUresult rc = d.mem_create(&h, gran, &prop, 0);
  (void)o;
  if (rc == CUDA_SUCCESS) d.mem_release(h);
  return rc;
}
static CUresult op_release(objs_t *o) {
  CUresult rc = d.mem_release(o->h);
  if (rc == CUDA_SUCCESS) o->h = 0;
  return rc;
}
static CUresult op_map(objs_t *o) {
  CUresult rc = d.mem_map(o->va, gran, 0, o->h, 0);
  o->mapped = rc == CUDA_SUCCESS;
  return rc;
}
static CUresult op_set_access(objs_t *o) { return set_access(o->va, gran); }
static CUresult op_unmap(objs_t *o) {
  CUresult rc = d.mem_unmap(o->va, gran);
  if (rc == CUDA_SUCCESS) o->mapped = 0;
  return rc;
}
static CUresult op_event_create(objs_t *o) {
  CUevent ev;
  CUresult rc = d.event_create(&ev, CU_EVENT_DISABLE_TIMING);
  (void)o;
  if (rc == CUDA_SUCCESS) d.event_destroy(ev);
  return rc;
}
static CUresult op_record_legacy(objs_t *o) { return d.event_record(o->ev, LEGACY); }
static CUresult op_record_null(objs_t *o) { return d.event_record(o->ev, NULL); }
static CUresult op_record_ptsz(objs_t *o) { return d.event_record(o->ev, PER_THREAD); }
static CUresult op_query(objs_t *o) { return d.event_query(o->ev); }
static CUresult op_event_sync(objs_t *o) { return d.event_sync(o->ev); }
static CUresult op_event_destroy(objs_t *o) {
  CUresult rc = d.event_destroy(o->ev);
  if (rc == CUDA_SUCCESS) o->ev = NULL;
  return rc;
}
static CUresult op_sync_legacy(objs_t *o) { (void)o; return d.stream_sync(LEGACY); }
static CUresult op_sync_null(objs_t *o) { (void)o; return d.stream_sync(NULL); }
static CUresult op_sync_ptsz(objs_t *o) { (void)o; return d.stream_sync(PER_THREAD); }
static CUresult op_ctx_sync(objs_t *o) { (void)o; return d.ctx_sync(); }
static CUresult capturing(CUstream s) {
  CUstreamCaptureStatus st;
  return d.stream_is_capturing(s, &st);
}
static CUresult op_capturing_legacy(objs_t *o) { (void)o; return capturing(LEGACY); }
static CUresult op_capturing_null(objs_t *o) { (void)o; return capturing(NULL); }
static CUresult op_capturing_ptsz(objs_t *o) { (void)o; return capturing(PER_THREAD); }

/* pushes: the backend makes the primary context current for this call, so
 * the other situations are recorded, not judged. */
typedef struct probe_s {
  const char *call;
  op_fn fn;
  int map, access, event, record;   /* objects the call needs */
  int pushes;
} probe_t;

static const probe_t probes[] = {
    {"cuDeviceGetCount", op_count, 0, 0, 0, 0, 0},
    {"cuDeviceTotalMem", op_total_mem, 0, 0, 0, 0, 0},
    {"cuDeviceGetName", op_name, 0, 0, 0, 0, 0},
    {"cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)", op_vmm, 0, 0, 0, 0, 0},
    {"cuMemGetAllocationGranularity", op_granularity, 0, 0, 0, 0, 0},
    {"cuCtxGetDevice", op_ctx_get_device, 0, 0, 0, 0, 1},
    {"cuMemGetInfo", op_mem_info, 0, 0, 0, 0, 1},
    {"cuMemAddressReserve(1 page)", op_reserve, 0, 0, 0, 0, 1},
    {"cuMemAddressFree", op_va_free, 0, 0, 0, 0, 0},
    {"cuMemCreate(1 page)", op_create, 0, 0, 0, 0, 1},
    {"cuMemRelease", op_release, 0, 0, 0, 0, 0},
    {"cuMemMap", op_map, 0, 0, 0, 0, 0},
    {"cuMemSetAccess", op_set_access, 1, 0, 0, 0, 1},
    {"cuMemUnmap", op_unmap, 1, 1, 0, 0, 0},
    {"cuEventCreate", op_event_create, 0, 0, 0, 0, 1},
    {"cuEventRecord(primary's event, legacy stream)", op_record_legacy, 0, 0, 1, 0, 0},
    {"cuEventRecord(primary's event, NULL stream)", op_record_null, 0, 0, 1, 0, 0},
    {"cuEventRecord(primary's event, per-thread)", op_record_ptsz, 0, 0, 1, 0, 0},
    {"cuEventQuery", op_query, 0, 0, 1, 1, 0},
    {"cuEventSynchronize", op_event_sync, 0, 0, 1, 1, 0},
    {"cuEventDestroy", op_event_destroy, 0, 0, 1, 1, 0},
    {"cuStreamSynchronize(legacy)", op_sync_legacy, 0, 0, 0, 0, 0},
    {"cuStreamSynchronize(NULL)", op_sync_null, 0, 0, 0, 0, 0},
    {"cuStreamSynchronize(per-thread)", op_sync_ptsz, 0, 0, 0, 0, 0},
    {"cuCtxSynchronize", op_ctx_sync, 0, 0, 0, 0, 1},
    {"cuStreamIsCapturing(legacy)", op_capturing_legacy, 0, 0, 0, 0, 0},
    {"cuStreamIsCapturing(NULL)", op_capturing_null, 0, 0, 0, 0, 0},
    {"cuStreamIsCapturing(per-thread)", op_capturing_ptsz, 0, 0, 0, 0, 0},
};

static void context_matrix(void) {
  printf("\n# every call in three situations: primary context current, no context, another context current\n");
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    const probe_t *p = &probes[i];
    for (int where = IN_PRIMARY; where <= IN_OTHER; where++) {
      if (where == IN_OTHER && !other) continue;
      objs_t o;
      make_objs(&o, p->map, p->access, p->event);
      if (p->record && o.ev) d.event_record(o.ev, LEGACY);
      CUresult rc = call_in(where, p->fn, &o);
      int want = p->pushes && where != IN_PRIMARY ? (int)ANY : (int)CUDA_SUCCESS;
      answer(p->call, situation_name[where], rc, want,
             where == IN_PRIMARY ? "fails even in the primary context"
                                 : "the backend makes this call with whatever context the thread has");
      drop_objs(&o);
    }
  }
}

// ----------------------------------------------------------------------------
// The codes backend.h promises for broken rules
// ----------------------------------------------------------------------------

static void broken_rules(void) {
  const int INVAL = CUDA_ERROR_INVALID_VALUE;
  const char *rule = "backend.h promises another code";
  CUmemAllocationProp prop = pinned();
  CUdeviceptr va = 0, va2 = 0;
  CUmemGenericAllocationHandle h = 0, h2 = 0;
  CUdevice bad;
  int n = 0;
  printf("\n# broken rules (primary context current)\n");
  d.ctx_set_current(primary);
  d.device_get_count(&n);
  answer("cuDeviceGet(ordinal = count)", "-", d.device_get(&bad, n), CUDA_ERROR_INVALID_DEVICE, rule);
  CUresult rc = d.address_reserve(&va2, gran + gran / 2, gran, 0, 0);
  answer("cuMemAddressReserve(1.5 pages)", "primary", rc, INVAL, rule);
  if (rc == CUDA_SUCCESS) d.address_free(va2, gran + gran / 2);
  rc = d.address_reserve(&va2, gran, gran / 2, 0, 0);
  answer("cuMemAddressReserve(1 page, alignment 0.5 page)", "primary", rc, ANY, rule);
  if (rc == CUDA_SUCCESS) d.address_free(va2, gran);
  rc = d.mem_create(&h2, gran / 2, &prop, 0);
  answer("cuMemCreate(0.5 page)", "primary", rc, INVAL, rule);
  if (rc == CUDA_SUCCESS) d.mem_release(h2);
  if (d.address_reserve(&va, 4 * gran, gran, 0, 0) != CUDA_SUCCESS || d.mem_create(&h, 2 * gran, &prop, 0) != CUDA_SUCCESS) {
    printf("answer: cannot reserve 4 pages and create 2: the remaining rules are not probed\n");
    differs++;
    return;
  }
  answer("cuMemMap(offset 0.5 page)", "primary", d.mem_map(va, gran, gran / 2, h, 0), INVAL, rule);
  answer("cuMemMap(beyond the handle's end)", "primary", d.mem_map(va, 4 * gran, 0, h, 0), INVAL, rule);
  answer("cuMemMap(2 pages)", "primary", d.mem_map(va, 2 * gran, 0, h, 0), CUDA_SUCCESS, rule);
  answer("cuMemMap(over a mapping)", "primary", d.mem_map(va + gran, gran, 0, h, 0), INVAL, rule);
  answer("cuMemUnmap(half a mapping)", "primary", d.mem_unmap(va, gran), INVAL, rule);
  answer("cuMemUnmap(unmapped addresses)", "primary", d.mem_unmap(va + 3 * gran, gran), INVAL, rule);
  answer("cuMemSetAccess(beyond the mapping)", "primary", set_access(va, 3 * gran), INVAL, rule);
  answer("cuMemSetAccess(the mapping)", "primary", set_access(va, 2 * gran), CUDA_SUCCESS, rule);
  d.mem_create(&h2, gran, &prop, 0);
  d.mem_map(va + 2 * gran, gran, 0, h2, 0);
  answer("cuMemSetAccess(two adjacent mappings)", "primary", set_access(va, 3 * gran), CUDA_SUCCESS, rule);
  answer("cuMemRelease(a mapped handle: deferred)", "primary", d.mem_release(h2), CUDA_SUCCESS, rule);
  answer("cuMemUnmap(after the deferred release)", "primary", d.mem_unmap(va + 2 * gran, gran), CUDA_SUCCESS, rule);
  answer("cuMemUnmap(the 2-page mapping)", "primary", d.mem_unmap(va, 2 * gran), CUDA_SUCCESS, rule);
  answer("cuMemRelease", "primary", d.mem_release(h), CUDA_SUCCESS, rule);
  answer("cuMemAddressFree(part of the reservation)", "primary", d.address_free(va, gran), ANY, rule);
  answer("cuMemAddressFree", "primary", d.address_free(va, 4 * gran), CUDA_SUCCESS, rule);
  if (!other || !d.stream_create || !d.stream_destroy) return;
  CUstream s = NULL;
  CUevent ev = NULL;
  d.event_create(&ev, CU_EVENT_DISABLE_TIMING);
  d.ctx_push(other);
  rc = d.stream_create(&s, CU_STREAM_NON_BLOCKING);
  CUcontext popped;
  d.ctx_pop(&popped);
  if (rc == CUDA_SUCCESS && ev) {
    answer("cuEventRecord(primary's event, a stream of another context)", "primary", d.event_record(ev, s), ANY, rule);
    /* what the backend's stream_device asks (a context not served) */
    CUcontext owner = NULL;
    answer("cuStreamGetCtx(a stream of another context)", "primary", d.stream_get_ctx(s, &owner), CUDA_SUCCESS, rule);
    answer("cuStreamGetCtx names that context", "primary", owner == other ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN,
           CUDA_SUCCESS, rule);
    d.stream_destroy(s);
  }
  if (ev) d.event_destroy(ev);
}

// ----------------------------------------------------------------------------
// Costs, per page
// ----------------------------------------------------------------------------

enum { PAGES = 64 };

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void cost_line(const char *call, double *us, int n, int per_page) {
  qsort(us, (size_t)n, sizeof *us, cmp_double);
  printf("cost %-34s median %9.1f us, min %9.1f, max %9.1f  (%d calls", call, us[n / 2], us[0], us[n - 1], n);
  if (per_page) printf(" of 1 page = %zu KiB", gran >> 10);
  printf(")\n");
}

#define TIMED(slot, call)                  \
  do {                                     \
    double t0_ = drv_now_us();             \
    rc = (call);                           \
    (slot) = drv_now_us() - t0_;           \
    if (rc != CUDA_SUCCESS) goto failed;   \
  } while (0)

static void costs(void) {
  static double t_create[PAGES], t_map[PAGES], t_access[PAGES], t_unmap[PAGES], t_release[PAGES];
  static double t_record[PAGES], t_query[PAGES];
  CUmemGenericAllocationHandle h[PAGES];
  CUmemAllocationProp prop = pinned();
  CUdeviceptr va = 0;
  CUevent ev = NULL;
  CUresult rc;
  double t_batch_access = 0, t_batch_unmap = 0, t_reserve = 0, t_free = 0;
  printf("\n# costs (primary context current)\n");
  d.ctx_set_current(primary);
  TIMED(t_reserve, d.address_reserve(&va, PAGES * gran, gran, 0, 0));
  for (int i = 0; i < PAGES; i++) {
    TIMED(t_create[i], d.mem_create(&h[i], gran, &prop, 0));
    TIMED(t_map[i], d.mem_map(va + i * gran, gran, 0, h[i], 0));
    TIMED(t_access[i], set_access(va + i * gran, gran));
  }
  for (int i = 0; i < PAGES; i++) TIMED(t_unmap[i], d.mem_unmap(va + i * gran, gran));
  for (int i = 0; i < PAGES; i++) d.mem_map(va + i * gran, gran, 0, h[i], 0);
  TIMED(t_batch_access, set_access(va, PAGES * gran));
  TIMED(t_batch_unmap, d.mem_unmap(va, PAGES * gran));
  for (int i = 0; i < PAGES; i++) TIMED(t_release[i], d.mem_release(h[i]));
  TIMED(t_free, d.address_free(va, PAGES * gran));
  d.event_create(&ev, CU_EVENT_DISABLE_TIMING);
  for (int i = 0; i < PAGES; i++) {
    TIMED(t_record[i], d.event_record(ev, LEGACY));
    double t0 = drv_now_us();
    while ((rc = d.event_query(ev)) == CUDA_ERROR_NOT_READY) {}
    t_query[i] = drv_now_us() - t0;
  }
  d.event_destroy(ev);
  cost_line("cuMemCreate", t_create, PAGES, 1);
  cost_line("cuMemMap", t_map, PAGES, 1);
  cost_line("cuMemSetAccess", t_access, PAGES, 1);
  cost_line("cuMemUnmap", t_unmap, PAGES, 1);
  cost_line("cuMemRelease", t_release, PAGES, 1);
  cost_line("cuEventRecord(legacy)", t_record, PAGES, 0);
  cost_line("cuEventQuery until complete", t_query, PAGES, 0);
  printf("cost %-34s %9.1f us for %d pages, %.2f us/page\n", "cuMemSetAccess(one call)", t_batch_access,
         PAGES, t_batch_access / PAGES);
  printf("cost %-34s %9.1f us for %d pages, %.2f us/page\n", "cuMemUnmap(one call)", t_batch_unmap, PAGES,
         t_batch_unmap / PAGES);
  printf("cost %-34s %9.1f us to reserve %d pages, %.1f us to free\n", "cuMemAddressReserve", t_reserve,
         PAGES, t_free);
  return;
failed:
  printf("cost: a call failed with %s: costs not measured\n", drv_code(rc));
  differs++;
}

// ----------------------------------------------------------------------------
// Do map, set-access and unmap wait for a running kernel?
// ----------------------------------------------------------------------------

enum { SPIN_MS = 250 };

__global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

/* Launches the spin on s (legacy or a non-blocking stream), runs one call
 * on objects that the kernel never touches, and says whether the call
 * returned while the kernel still ran. */
static void wait_probe(const char *call, op_fn fn, int map, int access, cudaStream_t s, const char *sname) {
  objs_t o;
  cudaEvent_t done;
  make_objs(&o, map, access, 0);
  if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) return;
  spin<<<1, 1, 0, s>>>((long long)SPIN_MS * 1000000);
  cudaEventRecord(done, s);
  cudaError_t launched = cudaGetLastError();
  double t0 = drv_now_us();
  CUresult rc = fn(&o);
  double took = drv_now_us() - t0;
  cudaError_t q = cudaEventQuery(done);
  cudaEventSynchronize(done);
  cudaEventDestroy(done);
  if (launched != cudaSuccess)
    printf("waits %-16s (%s): not measured: the kernel did not start (%s)\n", call, sname, cudaGetErrorName(launched));
  else if (q == cudaErrorNotReady)
    printf("waits %-16s (%s): no: returned in %.0f us while the kernel still ran (%s)\n", call, sname, took, drv_code(rc));
  else if (took >= SPIN_MS * 1000 * 0.8)
    printf("waits %-16s (%s): YES: returned after %.0f ms, when the %d ms kernel had ended (%s)\n", call, sname,
           took / 1000, SPIN_MS, drv_code(rc));
  else
    printf("waits %-16s (%s): inconclusive: the kernel ended first (call %.0f us)\n", call, sname, took);
  drop_objs(&o);
}

static void kernel_waits(void) {
  cudaStream_t nb;
  printf("\n# whether a call waits for a running kernel (%d ms, touching none of the memory)\n", SPIN_MS);
  if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess) {
    printf("waits: the runtime cannot start on device 0 (%s): not measured\n", cudaGetErrorName(cudaGetLastError()));
    return;
  }
  const struct { cudaStream_t s; const char *name; } streams[] = {{nb, "non-blocking stream"},
                                                                   {cudaStreamLegacy, "legacy stream"}};
  for (int k = 0; k < 2; k++) {
    wait_probe("cuMemAddressReserve", op_reserve, 0, 0, streams[k].s, streams[k].name);
    wait_probe("cuMemCreate", op_create, 0, 0, streams[k].s, streams[k].name);
    wait_probe("cuMemMap", op_map, 0, 0, streams[k].s, streams[k].name);
    wait_probe("cuMemSetAccess", op_set_access, 1, 0, streams[k].s, streams[k].name);
    wait_probe("cuMemUnmap", op_unmap, 1, 1, streams[k].s, streams[k].name);
    wait_probe("cuMemRelease", op_release, 0, 0, streams[k].s, streams[k].name);
    wait_probe("cuMemAddressFree", op_va_free, 0, 0, streams[k].s, streams[k].name);
  }
  cudaStreamDestroy(nb);
}

// ----------------------------------------------------------------------------

static int start(void) {
  const char *why = drv_open();
  if (why) { fprintf(stderr, "driver_probe: %s\n", why); return 2; }
  if (resolve_all()) { fprintf(stderr, "driver_probe: the driver lacks entry points the backend needs (MISSING above)\n"); return 2; }
  CUresult rc = d.init(0);
  if (rc == CUDA_SUCCESS) rc = d.device_get(&dev, 0);
  if (rc == CUDA_SUCCESS) rc = d.primary_retain(&primary, dev);
  if (rc == CUDA_SUCCESS) rc = d.ctx_set_current(primary);
  CUmemAllocationProp prop = pinned();
  if (rc == CUDA_SUCCESS) rc = d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (rc != CUDA_SUCCESS) { fprintf(stderr, "driver_probe: cannot start device 0: %s\n", drv_code(rc)); return 2; }
  printf("\ndevice 0: granularity %zu KiB\n", gran >> 10);
  if (d.ctx_create && d.ctx_create(&other, 0, dev) == CUDA_SUCCESS) {
    CUcontext popped;
    d.ctx_pop(&popped);   /* cuCtxCreate made it current: keep it for IN_OTHER only */
  } else {
    other = NULL;
    printf("no second context (cuCtxCreate %s): the 'other' situation is not probed\n",
           d.ctx_create ? "failed" : "is missing");
  }
  d.ctx_set_current(primary);
  return 0;
}

int main(int argc, char **argv) {
  int kernels = !(argc > 1 && strcmp(argv[1], "--no-kernels") == 0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc = start();
  if (rc) return rc;
  context_matrix();
  broken_rules();
  costs();
  if (kernels) kernel_waits();
  if (other) d.ctx_destroy(other);
  if (differs) {
    printf("driver_probe: %d answers differ from what the backend relies on (DIFFERS above)\n", differs);
    return 1;
  }
  printf("driver_probe: ok\n");
  return 0;
}
