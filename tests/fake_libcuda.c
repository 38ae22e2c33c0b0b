/* A fake CUDA driver (libcuda.so.1) for testing backend_cuda.c without a GPU.
 *
 * It exports only cuGetProcAddress_v2 (the one symbol the backend takes from
 * dlsym) plus cuCtxGetCurrent and a few fake_cuda_* probes for the tests,
 * and keeps the driver's rules where the backend depends on them: nothing
 * works before cuInit, contexts are per thread with a push/pop stack, memory
 * calls need a current context, sizes and offsets must be granularity
 * multiples, maps may not overlap, an unmap covers whole maps, a mapped
 * handle's release is deferred. It is NOT a device: no memory is touched.
 *
 * Built as $(BUILD)/tests/fake/libcuda.so.1 (soname libcuda.so.1); a test
 * dlopens it by path, and the backend's dlopen("libcuda.so.1") then finds it
 * by its soname. Knobs (environment, read at cuInit / resolution):
 *   FAKE_CUDA_INIT_FAIL=1     cuInit returns CUDA_ERROR_NO_DEVICE
 *   FAKE_CUDA_MISSING=<sym>   cuGetProcAddress does not know <sym>
 */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define GRAN (2ull << 20)
#define TOTAL (8ull << 30)
#define NDEV 2
#define MAXOBJ 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static unsigned long calls;              /* every entry point call, for the tests */
static int pushes;                       /* cuCtxPushCurrent calls */
static int retains[NDEV];
static char primary[NDEV];               /* the primary contexts are &primary[dev] */
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

// ----------------------------------------------------------------------------
// Devices and contexts
// ----------------------------------------------------------------------------

static CUresult f_init(unsigned flags) {
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (getenv("FAKE_CUDA_INIT_FAIL")) return CUDA_ERROR_NO_DEVICE;
  __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

static CUresult f_error_name(CUresult e, const char **s) {
  *s = e == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

static CUresult f_count(int *n) { ENTER(); *n = NDEV; return CUDA_SUCCESS; }

static CUresult f_get(CUdevice *d, int ordinal) {
  ENTER();
  if (ordinal < 0 || ordinal >= NDEV) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

static CUresult f_total(size_t *b, CUdevice d) { ENTER(); (void)d; *b = TOTAL; return CUDA_SUCCESS; }

static CUresult f_name(char *name, int len, CUdevice d) {
  ENTER();
  if (len < 16) return CUDA_ERROR_INVALID_VALUE;
  strcpy(name, d ? "Fake GPU 1" : "Fake GPU 0");
  return CUDA_SUCCESS;
}

static CUresult f_retain(CUcontext *ctx, CUdevice d) {
  ENTER();
  __atomic_add_fetch(&retains[d], 1, __ATOMIC_RELAXED);
  *ctx = (CUcontext)&primary[d];
  return CUDA_SUCCESS;
}

static CUresult f_get_current(CUcontext *ctx) { ENTER(); *ctx = current; return CUDA_SUCCESS; }
static CUresult f_set_current(CUcontext ctx) { ENTER(); current = ctx; return CUDA_SUCCESS; }

static CUresult f_push(CUcontext ctx) {
  ENTER();
  if (depth == 16) return CUDA_ERROR_OUT_OF_MEMORY;
  __atomic_add_fetch(&pushes, 1, __ATOMIC_RELAXED);
  pushed[depth++] = current;
  current = ctx;
  return CUDA_SUCCESS;
}

static CUresult f_pop(CUcontext *ctx) {
  ENTER();
  if (!depth) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = current;
  current = pushed[--depth];
  return CUDA_SUCCESS;
}

static CUresult f_ctx_device(CUdevice *d) {
  ENTER();
  NEED_CTX();
  *d = (CUdevice)((char *)current - primary);
  return CUDA_SUCCESS;
}

static CUresult f_ctx_sync(void) { ENTER(); NEED_CTX(); return CUDA_SUCCESS; }

static CUresult f_mem_info(size_t *fr, size_t *total) {
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

static CUresult f_granularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o) {
  ENTER();
  if (p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      p->location.id < 0 || p->location.id >= NDEV || o != CU_MEM_ALLOC_GRANULARITY_MINIMUM)
    return CUDA_ERROR_INVALID_VALUE;
  *g = GRAN;
  return CUDA_SUCCESS;
}

static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long fl) {
  ENTER();
  if (!size || size % GRAN || (align && align % GRAN) || addr || fl) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++)
    if (!reservations[i].size) {
      reservations[i] = (range_t){next_va, size};
      *p = next_va;
      next_va += size + GRAN;
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

static CUresult f_address_free(CUdeviceptr va, size_t size) {
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

static CUresult f_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
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

static CUresult f_release(CUmemGenericAllocationHandle h) {
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

static CUresult f_map(CUdeviceptr va, size_t size, size_t off, CUmemGenericAllocationHandle h,
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

static CUresult f_unmap(CUdeviceptr va, size_t size) {
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

static CUresult f_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *d, size_t n) {
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
// Events and streams: work completes at once
// ----------------------------------------------------------------------------

static CUresult f_event_create(CUevent *e, unsigned flags) {
  ENTER();
  NEED_CTX();
  if (flags != CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_VALUE;
  *e = (CUevent)malloc(16);
  return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_event_record(CUevent e, CUstream s) { ENTER(); (void)s; return e ? 0 : CUDA_ERROR_INVALID_HANDLE; }
static CUresult f_event_query(CUevent e) { ENTER(); return e ? 0 : CUDA_ERROR_INVALID_HANDLE; }
static CUresult f_event_sync(CUevent e) { ENTER(); return e ? 0 : CUDA_ERROR_INVALID_HANDLE; }
static CUresult f_event_destroy(CUevent e) { ENTER(); free(e); return CUDA_SUCCESS; }
static CUresult f_stream_sync(CUstream s) { ENTER(); (void)s; return CUDA_SUCCESS; }

static CUresult f_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  ENTER();
  (void)s;
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Resolution, and the probes the tests read
// ----------------------------------------------------------------------------

static const struct { const char *name; void *fn; } entries[] = {
    {"cuGetErrorName", (void *)f_error_name}, {"cuInit", (void *)f_init},
    {"cuDeviceGetCount", (void *)f_count}, {"cuDeviceGet", (void *)f_get},
    {"cuDeviceTotalMem", (void *)f_total}, {"cuDeviceGetName", (void *)f_name},
    {"cuDevicePrimaryCtxRetain", (void *)f_retain}, {"cuCtxGetCurrent", (void *)f_get_current},
    {"cuCtxSetCurrent", (void *)f_set_current}, {"cuCtxPushCurrent", (void *)f_push},
    {"cuCtxPopCurrent", (void *)f_pop}, {"cuCtxGetDevice", (void *)f_ctx_device},
    {"cuCtxSynchronize", (void *)f_ctx_sync}, {"cuMemGetInfo", (void *)f_mem_info},
    {"cuMemGetAllocationGranularity", (void *)f_granularity},
    {"cuMemAddressReserve", (void *)f_reserve}, {"cuMemAddressFree", (void *)f_address_free},
    {"cuMemCreate", (void *)f_create}, {"cuMemRelease", (void *)f_release},
    {"cuMemMap", (void *)f_map}, {"cuMemUnmap", (void *)f_unmap},
    {"cuMemSetAccess", (void *)f_set_access}, {"cuEventCreate", (void *)f_event_create},
    {"cuEventRecord", (void *)f_event_record}, {"cuEventQuery", (void *)f_event_query},
    {"cuEventSynchronize", (void *)f_event_sync}, {"cuEventDestroy", (void *)f_event_destroy},
    {"cuStreamSynchronize", (void *)f_stream_sync}, {"cuStreamIsCapturing", (void *)f_is_capturing},
};

/* Only the CUDA 12.0 ABI with default flags is served: the backend must ask
 * for exactly that. */
#undef cuGetProcAddress
API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status) {
  const char *missing = getenv("FAKE_CUDA_MISSING");
  *pfn = NULL;
  if (version != 12000 || flags != CU_GET_PROC_ADDRESS_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (missing && strcmp(missing, sym) == 0) return CUDA_SUCCESS;
  for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
    if (strcmp(entries[i].name, sym) == 0) {
      *pfn = entries[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      break;
    }
  return CUDA_SUCCESS;
}

#undef cuCtxGetCurrent
API CUresult cuCtxGetCurrent(CUcontext *ctx) { return f_get_current(ctx); }

API unsigned long fake_cuda_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
API int fake_cuda_pushes(int unused) { (void)unused; return __atomic_load_n(&pushes, __ATOMIC_RELAXED); }
API int fake_cuda_retains(int dev) { return __atomic_load_n(&retains[dev], __ATOMIC_RELAXED); }
API int fake_cuda_live_handles(void) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAXOBJ; i++) n += handles[i].live;
  pthread_mutex_unlock(&lock);
  return n;
}
