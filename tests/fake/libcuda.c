/* A fake CUDA driver (libcuda.so.1) for the tests, on machines without one.
 *
 * Two kinds of tests use it:
 * - tests/test_backend_cuda.c (suite cuda_fake) drives alloc/backend/cuda.c
 *   against it. The fake keeps the driver's rules where the backend depends
 *   on them: nothing works before cuInit, contexts are per thread with a
 *   push/pop stack, memory calls need a current context, sizes and offsets
 *   must be granularity multiples, maps may not overlap, an unmap covers
 *   whole maps, a mapped handle's release is deferred. Streams and events
 *   belong to the context current when they were made: an event recorded
 *   on a stream of another context is CUDA_ERROR_INVALID_HANDLE, the legacy
 *   or per-thread stream with no current context CUDA_ERROR_INVALID_CONTEXT,
 *   and a destroyed or made-up stream or event handle
 *   CUDA_ERROR_INVALID_HANDLE (never followed). cuCtxCreate makes contexts
 *   that are not primary ones.
 * - tests/test_shim.c runs tests/progs/drvapi.c and dlsym_old.c under the
 *   preload, which open it and look entry points up through dlsym and
 *   cuGetProcAddress. For them it exports every entry point under the
 *   driver's own name (cuMemAlloc_v2, cuMemAllocAsync_ptsz, ...), including
 *   ones cudalloc must leave alone: the 32-bit cuMemAlloc of CUDA < 3.2 and
 *   names that merely begin like wrapped ones (cuMemAllocManaged). Its
 *   cuMemAlloc family answers with FAKE_PTR, so that a test can tell that
 *   cudalloc, not this library, answered.
 * It is NOT a device: no device memory is touched. Pinned host memory
 * (cuMemHostAlloc, cuMemHostRegister) is real host memory, since the core
 * writes to it, and the driver's rules hold: a context, known flags, only
 * what was allocated or registered is freed or unregistered.
 *
 * cuGetProcAddress resolves as the driver does: the newest entry not newer
 * than the requested version, the _ptsz one only when asked for the
 * per-thread default stream, and a version above the driver's is invalid.
 *
 * Built as $(BUILD)/tests/fake/libcuda.so.1 (soname libcuda.so.1, linked
 * -Bsymbolic so that its table holds its own functions even when a preloaded
 * libcudalloc.so exports the same names). A test dlopens it by path; a later
 * dlopen("libcuda.so.1") then finds it by its soname. Knobs (environment):
 *   FAKE_CUDA_INIT_FAIL=1     cuInit returns CUDA_ERROR_NO_DEVICE
 *   FAKE_CUDA_MISSING=<sym>   cuGetProcAddress does not know <sym>
 *   FAKE_CUDA_INIT_DELAY_MS=n cuInit takes n milliseconds (a caller holds
 *                             its locks that long)
 *   FAKE_CUDA_NO_VMM=1        no device supports virtual memory management
 * and one for tests/progs/reentry.c (variables it sets): with
 * fake_cuda_reenter_alloc and _free set, cuMemGetAddressRange_v2 allocates
 * and frees through them, as the runtime calls back into the driver.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define DRIVER_VERSION CUDA_VERSION   /* a driver as new as the headers */
#define GRAN (2ull << 20)
#define TOTAL (8ull << 30)
#define NDEV 2
#define MAXOBJ 256
#define MAXCTX 16
#define FAKE_PTR ((CUdeviceptr)0xfa4e0000ull)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static unsigned long calls;              /* every entry point call, for the tests */
static int pushes;                       /* cuCtxPushCurrent calls */
static int retains[NDEV];

/* Contexts: [0, NDEV) are the devices' primary ones, the rest cuCtxCreate's. */
typedef struct { int dev; int live; } ctx_t;
static ctx_t ctxs[MAXCTX] = {{0, 1}, {1, 1}};
/* Streams and events: the context they belong to; ctx NULL when free. */
typedef struct { CUcontext ctx; } owned_t;
static owned_t streams[MAXOBJ], events[MAXOBJ];
static __thread CUcontext current;
static __thread CUcontext pushed[16];
static __thread int depth;

typedef struct { CUdeviceptr va; size_t size; } range_t;
typedef struct { size_t size; int maps; int released; int live; } handle_t;
typedef struct { CUdeviceptr va; size_t size; int handle; } mapping_t;

static range_t reservations[MAXOBJ];
static handle_t handles[MAXOBJ];
static mapping_t mappings[MAXOBJ];
static size_t used;
static CUdeviceptr next_va = 1ull << 44;

#define ENTER()                                                   \
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);                \
  if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_INITIALIZED
#define NEED_CTX() if (!current) return CUDA_ERROR_INVALID_CONTEXT

/* p names a live entry of table[n] (never followed otherwise). */
static int slot_of(const void *p, const void *table, size_t each, int n) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)table;
  if ((uintptr_t)p < (uintptr_t)table || off % each || off / each >= (uintptr_t)n) return -1;
  return (int)(off / each);
}

static ctx_t *ctx_of(CUcontext c) {
  int i = slot_of(c, ctxs, sizeof ctxs[0], MAXCTX);
  return i >= 0 && ctxs[i].live ? &ctxs[i] : NULL;
}

static owned_t *owned(owned_t *table, const void *handle) {
  int i = slot_of(handle, table, sizeof table[0], MAXOBJ);
  return i >= 0 && table[i].ctx ? &table[i] : NULL;
}

static int default_stream(CUstream s) {
  return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The context of a stream: the default ones are the current context's. */
static CUresult stream_ctx(CUstream s, CUcontext *ctx) {
  if (default_stream(s)) {
    *ctx = current;
    return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  }
  pthread_mutex_lock(&lock);
  owned_t *o = owned(streams, s);
  *ctx = o ? o->ctx : NULL;
  pthread_mutex_unlock(&lock);
  return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A new stream or event of the current context. */
static CUresult make_owned(owned_t *table, void **handle) {
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++)
    if (!table[i].ctx) {
      table[i].ctx = current;
      *handle = &table[i];
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

static CUresult drop_owned(owned_t *table, void *handle) {
  pthread_mutex_lock(&lock);
  owned_t *o = owned(table, handle);
  if (o) o->ctx = NULL;
  pthread_mutex_unlock(&lock);
  return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// ----------------------------------------------------------------------------
// Devices and contexts
// ----------------------------------------------------------------------------

API CUresult cuInit(unsigned flags) {
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (getenv("FAKE_CUDA_INIT_FAIL")) return CUDA_ERROR_NO_DEVICE;
  const char *delay = getenv("FAKE_CUDA_INIT_DELAY_MS");
  if (delay) nanosleep(&(struct timespec){atoi(delay) / 1000, atoi(delay) % 1000 * 1000000L}, NULL);
  __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

API CUresult cuGetErrorName(CUresult e, const char **s) {
  *s = e == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *n) { ENTER(); *n = NDEV; return CUDA_SUCCESS; }

API CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  ENTER();
  if (ordinal < 0 || ordinal >= NDEV) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { ENTER(); (void)d; *b = TOTAL; return CUDA_SUCCESS; }

/* The one attribute the backend asks for: virtual memory management. */
API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  ENTER();
  if (d < 0 || d >= NDEV) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {   /* device d sits at PCI 0000:3b+d:00.0 (NVML's fake knows it so) */
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x3b + d; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = !getenv("FAKE_CUDA_NO_VMM"); return CUDA_SUCCESS;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  ENTER();
  if (len < 16) return CUDA_ERROR_INVALID_VALUE;
  strcpy(name, d ? "Fake GPU 1" : "Fake GPU 0");
  return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
  ENTER();
  if (d < 0 || d >= NDEV) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&retains[d], 1, __ATOMIC_RELAXED);
  *ctx = (CUcontext)&ctxs[d];
  return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *ctx) { ENTER(); *ctx = current; return CUDA_SUCCESS; }

API CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER();
  if (ctx && !ctx_of(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return CUDA_SUCCESS;
}

API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  ENTER();
  if (!ctx_of(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (depth == 16) return CUDA_ERROR_OUT_OF_MEMORY;
  __atomic_add_fetch(&pushes, 1, __ATOMIC_RELAXED);
  pushed[depth++] = current;
  current = ctx;
  return CUDA_SUCCESS;
}

API CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
  ENTER();
  if (!depth) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = current;
  current = pushed[--depth];
  return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *d) {
  ENTER();
  NEED_CTX();
  *d = (CUdevice)ctx_of(current)->dev;
  return CUDA_SUCCESS;
}

/* A context of the program's own, made current (pushed) as the driver does. */
API CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice d) {
  ENTER();
  if (flags || d < 0 || d >= NDEV) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = NDEV; i < MAXCTX; i++)
    if (!ctxs[i].live) {
      ctxs[i] = (ctx_t){d, 1};
      *ctx = (CUcontext)&ctxs[i];
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc == CUDA_SUCCESS ? cuCtxPushCurrent_v2(*ctx) : rc;
}

API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  ENTER();
  ctx_t *c = ctx_of(ctx);
  if (!c || c < &ctxs[NDEV]) return CUDA_ERROR_INVALID_CONTEXT;
  c->live = 0;
  if (current == ctx) current = depth ? pushed[--depth] : NULL;
  return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void) { ENTER(); NEED_CTX(); return CUDA_SUCCESS; }

API CUresult cuMemGetInfo_v2(size_t *fr, size_t *total) {
  ENTER();
  NEED_CTX();
  pthread_mutex_lock(&lock);
  *fr = TOTAL - used;
  pthread_mutex_unlock(&lock);
  *total = TOTAL;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Virtual memory
// ----------------------------------------------------------------------------

API CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p,
                                           CUmemAllocationGranularity_flags o) {
  ENTER();
  if (p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      p->location.id < 0 || p->location.id >= NDEV || o != CU_MEM_ALLOC_GRANULARITY_MINIMUM)
    return CUDA_ERROR_INVALID_VALUE;
  *g = GRAN;
  return CUDA_SUCCESS;
}

API CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                 unsigned long long fl) {
  ENTER();
  /* The driver asks only for whole host pages here, not granularity. */
  if (!size || size % 4096 || (align && align % GRAN) || addr || fl) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++)
    if (!reservations[i].size) {
      reservations[i] = (range_t){next_va, size};
      *p = next_va;
      next_va += (size + GRAN - 1) / GRAN * GRAN + GRAN;
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

API CUresult cuMemAddressFree(CUdeviceptr va, size_t size) {
  ENTER();
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++)
    if (reservations[i].size && reservations[i].va == va && reservations[i].size == size) {
      reservations[i].size = 0;
      rc = CUDA_SUCCESS;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
                         unsigned long long fl) {
  ENTER();
  NEED_CTX();
  if (!size || size % GRAN || fl || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = 1; i < MAXOBJ && used + size <= TOTAL; i++)
    if (!handles[i].live) {
      handles[i] = (handle_t){size, 0, 0, 1};
      used += size;
      *h = (CUmemGenericAllocationHandle)i;
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

static void drop_handle(int i) {
  used -= handles[i].size;
  handles[i].live = 0;
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  ENTER();
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (h < MAXOBJ && handles[h].live && !handles[h].released) {
    handles[h].released = 1;               /* deferred while mapped, as the driver does */
    if (!handles[h].maps) drop_handle((int)h);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

static int reserved(CUdeviceptr va, size_t size) {
  for (int i = 0; i < MAXOBJ; i++)
    if (reservations[i].size && va >= reservations[i].va &&
        va + size <= reservations[i].va + reservations[i].size)
      return 1;
  return 0;
}

static int overlaps_mapping(CUdeviceptr va, size_t size) {
  for (int i = 0; i < MAXOBJ; i++)
    if (mappings[i].size && va < mappings[i].va + mappings[i].size && mappings[i].va < va + size) return 1;
  return 0;
}

API CUresult cuMemMap(CUdeviceptr va, size_t size, size_t off, CUmemGenericAllocationHandle h,
                      unsigned long long fl) {
  ENTER();
  if (!size || size % GRAN || off % GRAN || va % GRAN || fl) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (h < MAXOBJ && handles[h].live && !handles[h].released && off + size <= handles[h].size &&
      reserved(va, size) && !overlaps_mapping(va, size)) {
    for (int i = 0; i < MAXOBJ; i++)
      if (!mappings[i].size) {
        mappings[i] = (mapping_t){va, size, (int)h};
        handles[h].maps++;
        rc = CUDA_SUCCESS;
        break;
      }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Bytes of [va, va+size) covered by whole mappings inside it; size when the
 * range is exactly a run of whole mappings. */
static size_t whole_maps_inside(CUdeviceptr va, size_t size) {
  size_t covered = 0;
  for (int i = 0; i < MAXOBJ; i++) {
    if (!mappings[i].size || mappings[i].va + mappings[i].size <= va || mappings[i].va >= va + size) continue;
    if (mappings[i].va < va || mappings[i].va + mappings[i].size > va + size) return 0;  /* cut */
    covered += mappings[i].size;
  }
  return covered;
}

API CUresult cuMemUnmap(CUdeviceptr va, size_t size) {
  ENTER();
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (size && whole_maps_inside(va, size) == size) {
    for (int i = 0; i < MAXOBJ; i++) {
      if (!mappings[i].size || mappings[i].va < va || mappings[i].va >= va + size) continue;
      handle_t *hd = &handles[mappings[i].handle];
      if (--hd->maps == 0 && hd->released) drop_handle(mappings[i].handle);
      mappings[i].size = 0;
    }
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

API CUresult cuMemSetAccess(CUdeviceptr va, size_t size, const CUmemAccessDesc *d, size_t n) {
  ENTER();
  if (n != 1 || d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
      d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->location.id < 0 || d->location.id >= NDEV)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  int ok = size && whole_maps_inside(va, size) == size;
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ----------------------------------------------------------------------------
// The cuMemAlloc family: one recognizable fake address, no memory
// ----------------------------------------------------------------------------

static CUresult fake_alloc(CUdeviceptr *dptr, size_t size) {
  ENTER();
  NEED_CTX();
  if (!dptr || !size) return CUDA_ERROR_INVALID_VALUE;
  *dptr = FAKE_PTR;
  return CUDA_SUCCESS;
}

static CUresult fake_free(CUdeviceptr dptr) {
  ENTER();
  NEED_CTX();
  return dptr == FAKE_PTR ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#undef cuMemAlloc
/* The 32-bit ABI of CUDA < 3.2, which cudalloc must not serve. */
API CUresult cuMemAlloc(unsigned *dptr, unsigned size) {
  CUdeviceptr p;
  CUresult rc = fake_alloc(&p, size);
  if (rc == CUDA_SUCCESS) *dptr = (unsigned)p;
  return rc;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { return fake_alloc(dptr, size); }
API CUresult cuMemFree_v2(CUdeviceptr dptr) { return fake_free(dptr); }

/* A name that only begins like cuMemAlloc: cudalloc must leave it alone. */
API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags) {
  (void)flags;
  return fake_alloc(dptr, size);
}

// ----------------------------------------------------------------------------
// Pinned host memory: real pages, with a table of what is pinned
// ----------------------------------------------------------------------------

typedef struct { void *p; size_t size; int registered; } pinned_t;
static pinned_t pinned[MAXOBJ];

static int pin_slot(void *p, size_t size, int registered) {
  for (int i = 0; i < MAXOBJ; i++)
    if (!pinned[i].p) { pinned[i] = (pinned_t){p, size, registered}; return 1; }
  return 0;
}

/* Forgets p when it was pinned the given way; 0 when it was not. */
static int unpin_slot(void *p, int registered) {
  for (int i = 0; i < MAXOBJ; i++)
    if (pinned[i].p == p && pinned[i].registered == registered) { pinned[i].p = NULL; return 1; }
  return 0;
}

API CUresult cuMemHostAlloc(void **pp, size_t size, unsigned flags) {
  ENTER();
  NEED_CTX();
  if (!pp || !size || (flags & ~7u)) return CUDA_ERROR_INVALID_VALUE;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  int ok = pin_slot(p, size, 0);
  pthread_mutex_unlock(&lock);
  if (!ok) { munmap(p, size); return CUDA_ERROR_OUT_OF_MEMORY; }
  *pp = p;
  return CUDA_SUCCESS;
}

API CUresult cuMemAllocHost_v2(void **pp, size_t size) { return cuMemHostAlloc(pp, size, 0); }

API CUresult cuMemFreeHost(void *p) {
  ENTER();
  NEED_CTX();
  size_t size = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++)
    if (pinned[i].p == p && !pinned[i].registered) size = pinned[i].size;
  int ok = p && unpin_slot(p, 0);
  pthread_mutex_unlock(&lock);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, size);
  return CUDA_SUCCESS;
}

API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned flags) {
  ENTER();
  NEED_CTX();
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (!p || !size || (uintptr_t)p % page || (flags & ~15u)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  int ok = pin_slot(p, size, 1);
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuMemHostUnregister(void *p) {
  ENTER();
  NEED_CTX();
  pthread_mutex_lock(&lock);
  int ok = p && unpin_slot(p, 1);
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) { (void)s; return fake_alloc(dptr, size); }
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) { (void)s; return fake_alloc(dptr, size); }
API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) { (void)s; return fake_free(dptr); }
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { (void)s; return fake_free(dptr); }

/* The runtime's calls back into the driver, which a test sets to what
 * cuGetProcAddress handed it (cudalloc's entry points, under the preload),
 * and what the last call back got (0: none made). */
API CUresult (*fake_cuda_reenter_alloc)(CUdeviceptr *, size_t);
API CUresult (*fake_cuda_reenter_free)(CUdeviceptr);
API CUdeviceptr fake_cuda_reentered_ptr;

/* As the real runtime does from inside a call that cudalloc passed
 * through: an allocation through the pointers it was handed. */
static void reenter(void) {
  CUdeviceptr d = 0;
  if (fake_cuda_reenter_alloc(&d, 1 << 20) == CUDA_SUCCESS) fake_cuda_reenter_free(d);
  fake_cuda_reentered_ptr = d;
}

/* Nothing the fake hands out is device memory, so no range is known. */
API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  ENTER();
  (void)base, (void)size, (void)p;
  if (fake_cuda_reenter_alloc && fake_cuda_reenter_free) reenter();
  return CUDA_ERROR_NOT_FOUND;
}

// ----------------------------------------------------------------------------
// Events and streams: work completes at once
// ----------------------------------------------------------------------------

API CUresult cuEventCreate(CUevent *e, unsigned flags) {
  ENTER();
  NEED_CTX();
  if (flags != CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_VALUE;
  return make_owned(events, (void **)e);
}

static CUresult event_ctx(CUevent e, CUcontext *ctx) {
  pthread_mutex_lock(&lock);
  owned_t *o = owned(events, e);
  if (o) *ctx = o->ctx;
  pthread_mutex_unlock(&lock);
  return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* As the driver: the event and the stream must be of one context. */
API CUresult cuEventRecord(CUevent e, CUstream s) {
  ENTER();
  CUcontext ec, sc;
  CUresult rc = event_ctx(e, &ec);
  if (rc == CUDA_SUCCESS) rc = stream_ctx(s, &sc);
  return rc != CUDA_SUCCESS ? rc : ec == sc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuEventQuery(CUevent e) { ENTER(); CUcontext c; return event_ctx(e, &c); }
API CUresult cuEventSynchronize(CUevent e) { ENTER(); CUcontext c; return event_ctx(e, &c); }
API CUresult cuEventDestroy_v2(CUevent e) { ENTER(); return drop_owned(events, e); }

API CUresult cuStreamCreate(CUstream *s, unsigned flags) {
  ENTER();
  NEED_CTX();
  if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  return make_owned(streams, (void **)s);
}

API CUresult cuStreamDestroy_v2(CUstream s) { ENTER(); return default_stream(s) ? CUDA_ERROR_INVALID_HANDLE : drop_owned(streams, s); }
API CUresult cuStreamGetCtx(CUstream s, CUcontext *ctx) { ENTER(); return stream_ctx(s, ctx); }
API CUresult cuStreamSynchronize(CUstream s) { ENTER(); CUcontext c; return stream_ctx(s, &c); }
API CUresult cuStreamQuery(CUstream s) { ENTER(); CUcontext c; return stream_ctx(s, &c); }   /* no work runs here */

API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  ENTER();
  CUcontext c;
  CUresult rc = stream_ctx(s, &c);
  if (rc == CUDA_SUCCESS) *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return rc;
}

// ----------------------------------------------------------------------------
// Resolution
// ----------------------------------------------------------------------------

#undef cuGetProcAddress
API CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);

/* What cuGetProcAddress serves: the requested (base) name, the CUDA version
 * that introduced this ABI of it, whether it is the per-thread-stream one. */
static const struct { const char *name; int version; int ptsz; void *fn; } entries[] = {
    {"cuGetProcAddress", 11030, 0, (void *)cuGetProcAddress},
    {"cuGetProcAddress", 12000, 0, (void *)cuGetProcAddress_v2},
    {"cuGetErrorName", 6000, 0, (void *)cuGetErrorName},
    {"cuInit", 2000, 0, (void *)cuInit},
    {"cuDeviceGetCount", 2000, 0, (void *)cuDeviceGetCount},
    {"cuDeviceGet", 2000, 0, (void *)cuDeviceGet},
    {"cuDeviceTotalMem", 3020, 0, (void *)cuDeviceTotalMem_v2},
    {"cuDeviceGetName", 2000, 0, (void *)cuDeviceGetName},
    {"cuDeviceGetAttribute", 2000, 0, (void *)cuDeviceGetAttribute},
    {"cuDevicePrimaryCtxRetain", 7000, 0, (void *)cuDevicePrimaryCtxRetain},
    {"cuCtxGetCurrent", 4000, 0, (void *)cuCtxGetCurrent},
    {"cuCtxSetCurrent", 4000, 0, (void *)cuCtxSetCurrent},
    {"cuCtxPushCurrent", 4000, 0, (void *)cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent", 4000, 0, (void *)cuCtxPopCurrent_v2},
    {"cuCtxGetDevice", 2000, 0, (void *)cuCtxGetDevice},
    {"cuCtxSynchronize", 2000, 0, (void *)cuCtxSynchronize},
    {"cuCtxCreate", 3020, 0, (void *)cuCtxCreate_v2},
    {"cuCtxDestroy", 4000, 0, (void *)cuCtxDestroy_v2},
    {"cuMemGetInfo", 3020, 0, (void *)cuMemGetInfo_v2},
    {"cuMemGetAllocationGranularity", 10020, 0, (void *)cuMemGetAllocationGranularity},
    {"cuMemAddressReserve", 10020, 0, (void *)cuMemAddressReserve},
    {"cuMemAddressFree", 10020, 0, (void *)cuMemAddressFree},
    {"cuMemCreate", 10020, 0, (void *)cuMemCreate},
    {"cuMemRelease", 10020, 0, (void *)cuMemRelease},
    {"cuMemMap", 10020, 0, (void *)cuMemMap},
    {"cuMemUnmap", 10020, 0, (void *)cuMemUnmap},
    {"cuMemSetAccess", 10020, 0, (void *)cuMemSetAccess},
    {"cuMemAlloc", 2000, 0, (void *)cuMemAlloc},
    {"cuMemAlloc", 3020, 0, (void *)cuMemAlloc_v2},
    {"cuMemFree", 3020, 0, (void *)cuMemFree_v2},
    {"cuMemAllocHost", 3020, 0, (void *)cuMemAllocHost_v2},
    {"cuMemAllocManaged", 6000, 0, (void *)cuMemAllocManaged},
    {"cuMemHostAlloc", 2020, 0, (void *)cuMemHostAlloc},
    {"cuMemFreeHost", 2000, 0, (void *)cuMemFreeHost},
    {"cuMemHostRegister", 6050, 0, (void *)cuMemHostRegister_v2},
    {"cuMemHostUnregister", 4000, 0, (void *)cuMemHostUnregister},
    {"cuMemAllocAsync", 11020, 0, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, 1, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, 0, (void *)cuMemFreeAsync},
    {"cuMemFreeAsync", 11020, 1, (void *)cuMemFreeAsync_ptsz},
    {"cuMemGetAddressRange", 3020, 0, (void *)cuMemGetAddressRange_v2},
    {"cuEventCreate", 2000, 0, (void *)cuEventCreate},
    {"cuEventRecord", 2000, 0, (void *)cuEventRecord},
    {"cuEventQuery", 2000, 0, (void *)cuEventQuery},
    {"cuEventSynchronize", 2000, 0, (void *)cuEventSynchronize},
    {"cuEventDestroy", 4000, 0, (void *)cuEventDestroy_v2},
    {"cuStreamSynchronize", 2000, 0, (void *)cuStreamSynchronize},
    {"cuStreamQuery", 2000, 0, (void *)cuStreamQuery},
    {"cuStreamCreate", 2000, 0, (void *)cuStreamCreate},
    {"cuStreamDestroy", 4000, 0, (void *)cuStreamDestroy_v2},
    {"cuStreamGetCtx", 9020, 0, (void *)cuStreamGetCtx},
    {"cuStreamIsCapturing", 10000, 0, (void *)cuStreamIsCapturing},
};
#define NENTRIES (sizeof entries / sizeof entries[0])

static int requests[2];   /* [0] every resolution, [1] those at 12.0 with default flags */

/* The newest entry of sym not newer than version; among equals the
 * per-thread one when ptsz is asked for. -1 when there is none, with
 * *known set when sym exists at some newer version. */
static int lookup(const char *sym, int version, int ptsz, int *known) {
  int best = -1;
  *known = 0;
  for (int i = 0; i < (int)NENTRIES; i++) {
    if (strcmp(entries[i].name, sym) != 0) continue;
    *known = 1;
    if (entries[i].version > version || (entries[i].ptsz && !ptsz)) continue;
    if (best < 0 || entries[i].version > entries[best].version ||
        (entries[i].version == entries[best].version && entries[i].ptsz))
      best = i;
  }
  return best;
}

API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status) {
  const cuuint64_t known_flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  __atomic_add_fetch(&requests[0], 1, __ATOMIC_RELAXED);
  if (version == 12000 && flags == CU_GET_PROC_ADDRESS_DEFAULT) __atomic_add_fetch(&requests[1], 1, __ATOMIC_RELAXED);
  if (!sym || !pfn || version > DRIVER_VERSION || (flags & ~known_flags)) return CUDA_ERROR_INVALID_VALUE;
  const char *missing = getenv("FAKE_CUDA_MISSING");
  int known = 0;
  int i = missing && strcmp(missing, sym) == 0
              ? -1
              : lookup(sym, version, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, &known);
  *pfn = i >= 0 ? entries[i].fn : NULL;
  if (status)
    *status = i >= 0 ? CU_GET_PROC_ADDRESS_SUCCESS
              : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;   /* a symbol not found is no error, as documented */
}

/* The CUDA 11.3 resolver, which reports a symbol not found as an error. */
API CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags) {
  CUresult rc = cuGetProcAddress_v2(sym, pfn, version, flags, NULL);
  return rc == CUDA_SUCCESS && !*pfn ? CUDA_ERROR_NOT_FOUND : rc;
}

// ----------------------------------------------------------------------------
// Probes the tests read (int (*)(int) or unsigned long (*)(void))
// ----------------------------------------------------------------------------

API unsigned long fake_cuda_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
API int fake_cuda_pushes(int unused) { (void)unused; return __atomic_load_n(&pushes, __ATOMIC_RELAXED); }
API int fake_cuda_retains(int dev) { return __atomic_load_n(&retains[dev], __ATOMIC_RELAXED); }

/* Resolutions so far: all of them (0), or those at the CUDA 12.0 ABI with
 * default flags (1). */
API int fake_cuda_requests(int at_12_0) { return __atomic_load_n(&requests[at_12_0 != 0], __ATOMIC_RELAXED); }

API int fake_cuda_reservations(int unused) {
  int n = 0;
  (void)unused;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++) n += reservations[i].size != 0;
  pthread_mutex_unlock(&lock);
  return n;
}

API int fake_cuda_live_handles(void) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++) n += handles[i].live;
  pthread_mutex_unlock(&lock);
  return n;
}
