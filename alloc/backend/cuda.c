/* The CUDA driver backend: backend.h implemented with the driver's virtual
 * memory API.
 *
 * Nothing links against libcuda. init() opens libcuda.so.1 with dlopen,
 * takes only cuGetProcAddress from dlsym, and resolves every other entry
 * point through it at the CUDA 12 ABI, so the library loads (and the
 * simulated backend works) on a machine without a driver, and the versioned
 * entry points (_v2 and so on) are the ones a CUDA 12 program would get.
 *
 * Contexts: every device operation runs in the device's primary context (the
 * one the runtime API uses), events included: an event is recorded with its
 * device's primary context current, so that the default stream handles name
 * that device's streams whatever the calling thread has current. The
 * context is pushed only when it is not already current, so the common case
 * costs one cuCtxGetCurrent. A program's own contexts (cuCtxCreate) are not
 * served: stream_device answers CUDA_ERROR_NOT_SUPPORTED for them, and the
 * allocations go to the real allocator (finding that out retains the
 * device's primary context once). Physical handles and reservations are
 * the driver's; this file keeps no record of them, only the retained
 * primary contexts, the granularities, and each event's device.
 */
#include "backend.h"
#include "cuda_entries.h"
#include "log.h"
#include "nvml.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CUDA_ABI_VERSION 12000   /* the ABI every entry point is resolved at */
#define MAX_DEVICES 64           /* more devices than this are not used */

// ----------------------------------------------------------------------------
// The driver's entry points, resolved once through cuGetProcAddress
// ----------------------------------------------------------------------------

#define DRIVER_ENTRIES CA_CUDA_DRIVER_ENTRIES

typedef struct driver_s {
#define DRIVER_FIELD(field, sym, type) type field;
  DRIVER_ENTRIES(DRIVER_FIELD)
#undef DRIVER_FIELD
} driver_t;

static const struct { const char *sym; size_t offset; } driver_syms[] = {
#define DRIVER_SYM(field, sym, type) {sym, offsetof(driver_t, field)},
  DRIVER_ENTRIES(DRIVER_SYM)
#undef DRIVER_SYM
};
#define NSYMS (sizeof(driver_syms) / sizeof(driver_syms[0]))

/* The resolver: cuGetProcAddress_v2 (CUDA >= 12.0) or the older one. */
typedef struct resolver_s {
  PFN_cuGetProcAddress_v12000 v2;
  PFN_cuGetProcAddress_v11030 v1;
} resolver_t;

// ----------------------------------------------------------------------------
// State
// ----------------------------------------------------------------------------

enum { STATE_UNTRIED, STATE_READY, STATE_FAILED };

static struct {
  pthread_mutex_t lock;       /* serializes init and context retains */
  int state;                  /* atomic; entries work only when READY */
  CUresult failure;           /* init's error once FAILED (reported once) */
  bool loaded;                /* drv holds resolved entry points */
  driver_t drv;
  int count;                  /* devices, at most MAX_DEVICES */
  CUdevice dev[MAX_DEVICES];
  CUcontext ctx[MAX_DEVICES]; /* atomic; retained primary contexts */
  size_t gran[MAX_DEVICES];   /* atomic; 0 until first asked */
  bool host_register;         /* pin with mmap + cuMemHostRegister */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define drv (g.drv)

static bool ready(void) {
  return __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == STATE_READY;
}

static bool valid_device(int dev) { return dev >= 0 && dev < g.count; }

// ----------------------------------------------------------------------------
// Starting: load, resolve, cuInit
// ----------------------------------------------------------------------------

static const char *error_name(CUresult rc) {
  const char *s = NULL;
  if (!drv.get_error_name || drv.get_error_name(rc, &s) != CUDA_SUCCESS || !s) return "unknown error";
  return s;
}

/* One line on stderr for every way the driver can be out of reach. */
#define INIT_FAILED(fmt, ...)                                                \
  ca_log("CUDA backend unavailable: " fmt "; set CUDALLOC_CONF=backend:sim to use the simulated device", \
         __VA_ARGS__)

static CUresult resolve(const resolver_t *r, const char *sym, void **pfn) {
  *pfn = NULL;
  if (r->v2) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc = r->v2(sym, pfn, CUDA_ABI_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (rc == CUDA_SUCCESS && status != CU_GET_PROC_ADDRESS_SUCCESS) rc = CUDA_ERROR_NOT_FOUND;
    return rc;
  }
  return r->v1(sym, pfn, CUDA_ABI_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
}

static CUresult load_driver(void) {
  if (g.loaded) return CUDA_SUCCESS;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    INIT_FAILED("cannot load libcuda.so.1 (%s): no CUDA driver on this machine",
                why ? why : "not found");
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  resolver_t r = {0};
  *(void **)&r.v2 = dlsym(lib, "cuGetProcAddress_v2");
  if (!r.v2) *(void **)&r.v1 = dlsym(lib, "cuGetProcAddress");
  if (!r.v2 && !r.v1) {
    INIT_FAILED("%s", "libcuda.so.1 has no cuGetProcAddress (a driver older than CUDA 11.3)");
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  for (size_t i = 0; i < NSYMS; i++) {
    void **slot = (void **)((char *)&drv + driver_syms[i].offset);
    CUresult rc = resolve(&r, driver_syms[i].sym, slot);
    if (rc != CUDA_SUCCESS || !*slot) {
      memset(&drv, 0, sizeof drv);
      INIT_FAILED("the driver does not provide %s at the CUDA %d.%d ABI (error %d); update the driver",
                  driver_syms[i].sym, CUDA_ABI_VERSION / 1000, CUDA_ABI_VERSION % 1000 / 10, (int)rc);
      return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_NOT_FOUND;
    }
  }
  g.loaded = true;   /* lib stays open: its entry points are in drv */
  return CUDA_SUCCESS;
}

static CUresult start_driver(void) {
  CUresult rc = drv.init(0);
  if (rc != CUDA_SUCCESS) {
    INIT_FAILED("cuInit failed with %s (%d)", error_name(rc), (int)rc);
    return rc;
  }
  int count = 0;
  rc = drv.device_get_count(&count);
  if (rc == CUDA_SUCCESS && count <= 0) rc = CUDA_ERROR_NO_DEVICE;
  for (int i = 0; rc == CUDA_SUCCESS && i < count && i < MAX_DEVICES; i++)
    rc = drv.device_get(&g.dev[i], i);
  if (rc != CUDA_SUCCESS) {
    INIT_FAILED("no usable device: %s (%d)", error_name(rc), (int)rc);
    return rc;
  }
  if (count > MAX_DEVICES) ca_log("CUDA backend: using the first %d of %d devices", MAX_DEVICES, count);
  g.count = count < MAX_DEVICES ? count : MAX_DEVICES;
  return CUDA_SUCCESS;
}

/* A fork child has only the forking thread: a lock another thread held
 * (inside a slow cuInit, say) would stay held for ever. */
static void fork_child(void) { g.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER; }

static void arm_fork_handler(void) { pthread_atfork(NULL, NULL, fork_child); }

/* Idempotent; a failure is reported once and then returned by every call
 * until abandon() (a fork child may try again). */
static CUresult cuda_init(const ca_backend_options_t *options) {
  static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
  /* the options are the simulated device's, but for the way to pin */
  if (ready()) return CUDA_SUCCESS;
  pthread_once(&fork_once, arm_fork_handler);   /* before anyone takes the lock */
  pthread_mutex_lock(&g.lock);
  CUresult rc = CUDA_SUCCESS;
  int state = __atomic_load_n(&g.state, __ATOMIC_RELAXED);
  if (state == STATE_FAILED) rc = g.failure;
  else if (state == STATE_UNTRIED) {
    rc = load_driver();
    if (rc == CUDA_SUCCESS) rc = start_driver();
    g.failure = rc;
    g.host_register = options && options->host_register;
    __atomic_store_n(&g.state, rc == CUDA_SUCCESS ? STATE_READY : STATE_FAILED, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g.lock);
  return rc;
}

/* No driver call here: after fork() the child's driver state is unusable,
 * and at exit the driver may already be gone. The resolved entry points stay
 * (the library stays mapped) so that a later init() can start again. */
static void cuda_abandon(void) {
  __atomic_store_n(&g.state, STATE_UNTRIED, __ATOMIC_RELEASE);
  for (int i = 0; i < MAX_DEVICES; i++) {
    __atomic_store_n(&g.ctx[i], NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&g.gran[i], 0, __ATOMIC_RELAXED);
  }
  g.count = 0;
}

// ----------------------------------------------------------------------------
// Primary contexts
// ----------------------------------------------------------------------------

/* The device's primary context, retained the first time it is needed and
 * kept for the life of the process. */
static CUresult primary_ctx(int dev, CUcontext *ctx) {
  *ctx = __atomic_load_n(&g.ctx[dev], __ATOMIC_ACQUIRE);
  if (*ctx) return CUDA_SUCCESS;
  pthread_mutex_lock(&g.lock);
  CUresult rc = CUDA_SUCCESS;
  *ctx = __atomic_load_n(&g.ctx[dev], __ATOMIC_ACQUIRE);
  if (!*ctx) {
    rc = drv.primary_retain(ctx, g.dev[dev]);
    if (rc == CUDA_SUCCESS) __atomic_store_n(&g.ctx[dev], *ctx, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g.lock);
  return rc;
}

/* Makes dev's primary context current for one operation; *pushed says
 * whether ctx_leave() must pop it. */
static CUresult ctx_enter(int dev, bool *pushed) {
  *pushed = false;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUcontext want, cur = NULL;
  CUresult rc = primary_ctx(dev, &want);
  if (rc == CUDA_SUCCESS) rc = drv.ctx_get_current(&cur);
  if (rc != CUDA_SUCCESS || cur == want) return rc;
  rc = drv.ctx_push(want);
  *pushed = rc == CUDA_SUCCESS;
  return rc;
}

static void ctx_leave(bool pushed) {
  CUcontext popped;
  if (pushed) drv.ctx_pop(&popped);
}

// ----------------------------------------------------------------------------
// Devices
// ----------------------------------------------------------------------------

static CUresult cuda_device_count(int *count) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = g.count;
  return CUDA_SUCCESS;
}

static CUresult cuda_set_device(int dev) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUcontext ctx;
  CUresult rc = primary_ctx(dev, &ctx);
  return rc != CUDA_SUCCESS ? rc : drv.ctx_set_current(ctx);
}

/* The device of the current context, which must exist. */
static CUresult current_ctx_device(int *dev) {
  CUdevice d;
  CUresult rc = drv.ctx_get_device(&d);
  if (rc != CUDA_SUCCESS) return rc;
  for (int i = 0; i < g.count; i++)
    if (g.dev[i] == d) { *dev = i; return CUDA_SUCCESS; }
  return CUDA_ERROR_INVALID_DEVICE;   /* a device beyond MAX_DEVICES */
}

/* The current context's device; a thread with no context gets device 0's
 * primary context, as the runtime API does on first use. */
static CUresult cuda_get_device(int *dev) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext cur = NULL;
  CUresult rc = drv.ctx_get_current(&cur);
  if (rc != CUDA_SUCCESS) return rc;
  if (!cur) {
    rc = cuda_set_device(0);
    if (rc == CUDA_SUCCESS) *dev = 0;
    return rc;
  }
  return current_ctx_device(dev);
}

static CUmemAllocationProp pinned_prop(int dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = (int)g.dev[dev];
  return prop;
}

static CUresult granularity(int dev, size_t *out) {
  size_t gran = __atomic_load_n(&g.gran[dev], __ATOMIC_RELAXED);
  if (!gran) {
    CUmemAllocationProp prop = pinned_prop(dev);
    CUresult rc = drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS) return rc;
    __atomic_store_n(&g.gran[dev], gran, __ATOMIC_RELAXED);
  }
  *out = gran;
  return CUDA_SUCCESS;
}

static CUresult cuda_device_props(int dev, ca_device_props_t *props) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  memset(props, 0, sizeof *props);
  CUresult rc = drv.device_total_mem(&props->total_bytes, g.dev[dev]);
  if (rc == CUDA_SUCCESS) rc = drv.device_get_name(props->name, (int)sizeof props->name - 1, g.dev[dev]);
  int vmm = 0;
  if (rc == CUDA_SUCCESS)
    rc = drv.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, g.dev[dev]);
  props->vmm = vmm != 0;
  /* Without VMM there is no allocation granularity to ask for. */
  if (rc == CUDA_SUCCESS && props->vmm) rc = granularity(dev, &props->granularity);
  return rc;
}

static CUresult cuda_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
  bool pushed;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = drv.mem_get_info(free_bytes, total_bytes);
  ctx_leave(pushed);
  return rc;
}

// ----------------------------------------------------------------------------
// Virtual addresses and physical pages
// ----------------------------------------------------------------------------

/* The driver reserves any whole number of host pages; backend.h promises
 * CUDA_ERROR_INVALID_VALUE for a size that is not whole granules. */
static CUresult cuda_reserve(int dev, size_t size, uintptr_t *va) {
  bool pushed;
  size_t align = 0;
  CUdeviceptr ptr = 0;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = granularity(dev, &align);
  if (rc == CUDA_SUCCESS && (size == 0 || size % align)) rc = CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS) rc = drv.address_reserve(&ptr, size, align, 0, 0);
  ctx_leave(pushed);
  if (rc == CUDA_SUCCESS) *va = (uintptr_t)ptr;
  return rc;
}

static CUresult cuda_va_free(uintptr_t va, size_t size) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.address_free((CUdeviceptr)va, size);
}

static CUresult cuda_create(int dev, size_t size, ca_phys_t *handle) {
  bool pushed;
  CUmemGenericAllocationHandle h = 0;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) {
    CUmemAllocationProp prop = pinned_prop(dev);
    rc = drv.mem_create(&h, size, &prop, 0);
  }
  ctx_leave(pushed);
  if (rc == CUDA_SUCCESS) *handle = (ca_phys_t)h;
  return rc;
}

static CUresult cuda_release(ca_phys_t handle) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.mem_release((CUmemGenericAllocationHandle)handle);
}

static CUresult cuda_map(uintptr_t va, size_t size, ca_phys_t handle, size_t offset) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.mem_map((CUdeviceptr)va, size, offset, (CUmemGenericAllocationHandle)handle, 0);
}

static CUresult cuda_unmap(uintptr_t va, size_t size) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.mem_unmap((CUdeviceptr)va, size);
}

static CUresult cuda_set_access(int dev, uintptr_t va, size_t size) {
  bool pushed;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) {
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = (int)g.dev[dev];
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = drv.mem_set_access((CUdeviceptr)va, size, &desc, 1);
  }
  ctx_leave(pushed);
  return rc;
}

// ----------------------------------------------------------------------------
// Ordering
// ----------------------------------------------------------------------------

/* An event and its device, whose context it is recorded in. */
typedef struct cuda_event_s {
  CUevent ev;
  int dev;
} cuda_event_t;

static CUevent ev_of(ca_event_t event) { return ((cuda_event_t *)event)->ev; }

static CUresult cuda_event_create(int dev, ca_event_t *event) {
  bool pushed;
  cuda_event_t *e = malloc(sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->dev = dev;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = drv.event_create(&e->ev, CU_EVENT_DISABLE_TIMING);
  ctx_leave(pushed);
  if (rc == CUDA_SUCCESS) *event = (ca_event_t)e;
  else free(e);
  return rc;
}

/* In the event's context: the default handles are its device's streams,
 * and a thread with no context (or another one) current still records. */
static CUresult cuda_event_record(ca_event_t event, ca_stream_t stream) {
  bool pushed;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = ctx_enter(((cuda_event_t *)event)->dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = drv.event_record(ev_of(event), (CUstream)stream);
  ctx_leave(pushed);
  return rc;
}

static CUresult cuda_event_query(ca_event_t event) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.event_query(ev_of(event));
}

static CUresult cuda_event_sync(ca_event_t event) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return drv.event_sync(ev_of(event));
}

static CUresult cuda_event_destroy(ca_event_t event) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = drv.event_destroy(ev_of(event));
  free(event);
  return rc;
}

static bool default_stream(ca_stream_t stream) {
  return stream == NULL || stream == CA_STREAM_LEGACY || stream == CA_STREAM_PER_THREAD;
}

/* The default streams are the current context's: a thread without one
 * gets device 0's primary context first, as the runtime API does. */
static CUresult ensure_context(ca_stream_t stream) {
  int dev;
  return default_stream(stream) ? cuda_get_device(&dev) : CUDA_SUCCESS;
}

static CUresult cuda_stream_sync(ca_stream_t stream) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = ensure_context(stream);
  return rc != CUDA_SUCCESS ? rc : drv.stream_sync((CUstream)stream);
}

static CUresult cuda_stream_query(ca_stream_t stream) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = ensure_context(stream);
  return rc != CUDA_SUCCESS ? rc : drv.stream_query((CUstream)stream);
}

static CUresult cuda_device_sync(int dev) {
  bool pushed;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = drv.ctx_sync();
  ctx_leave(pushed);
  return rc;
}

/* The device whose retained primary context ctx is, without a driver call;
 * -1 when none is. */
static int retained_primary_of(CUcontext ctx) {
  for (int i = 0; i < g.count; i++)
    if (__atomic_load_n(&g.ctx[i], __ATOMIC_ACQUIRE) == ctx) return i;
  return -1;
}

/* The device of a context that is not current, asked with it pushed. */
static CUresult device_of_other_ctx(CUcontext ctx, int *dev) {
  CUcontext popped;
  CUresult rc = drv.ctx_push(ctx);
  if (rc != CUDA_SUCCESS) return rc;
  rc = current_ctx_device(dev);
  drv.ctx_pop(&popped);
  return rc;
}

/* NOT_SUPPORTED unless ctx is dev's primary context. */
static CUresult served(CUcontext ctx, int dev) {
  CUcontext primary;
  CUresult rc = primary_ctx(dev, &primary);
  return rc == CUDA_SUCCESS && primary != ctx ? CUDA_ERROR_NOT_SUPPORTED : rc;
}

/* The default streams: the current context's device (device 0's primary
 * context for a thread that has none, as the runtime API does). */
static CUresult default_stream_device(int *dev) {
  CUcontext cur = NULL;
  CUresult rc = drv.ctx_get_current(&cur);
  if (rc != CUDA_SUCCESS) return rc;
  if (!cur) return cuda_get_device(dev);
  rc = current_ctx_device(dev);
  return rc != CUDA_SUCCESS ? rc : served(cur, *dev);
}

static CUresult cuda_stream_device(ca_stream_t stream, int *dev) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (default_stream(stream)) return default_stream_device(dev);
  CUcontext ctx = NULL, cur = NULL;
  CUresult rc = drv.stream_get_ctx((CUstream)stream, &ctx);
  /* A destroyed stream's context may be reported gone: still a bad handle. */
  if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_CONTEXT_IS_DESTROYED) return CUDA_ERROR_INVALID_HANDLE;
  if (rc != CUDA_SUCCESS) return rc;
  if ((*dev = retained_primary_of(ctx)) >= 0) return CUDA_SUCCESS;   /* the common case */
  rc = drv.ctx_get_current(&cur);
  if (rc == CUDA_SUCCESS) rc = cur == ctx ? current_ctx_device(dev) : device_of_other_ctx(ctx, dev);
  return rc != CUDA_SUCCESS ? rc : served(ctx, *dev);
}

/* A legacy-stream query while another stream captures in global mode
 * answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: synchronizing would break that
 * capture, so it counts as capturing. An invalidated capture counts too. */
static CUresult cuda_is_capturing(ca_stream_t stream, int *capturing) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = ensure_context(stream);
  if (rc == CUDA_SUCCESS) rc = drv.stream_is_capturing((CUstream)stream, &status);
  if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    *capturing = 1;
    return CUDA_SUCCESS;
  }
  if (rc == CUDA_SUCCESS) *capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
  return rc;
}

// ----------------------------------------------------------------------------
// Pinned host memory: portable and mapped, so that one chunk serves every
// context and cudaHostAllocMapped alike
// ----------------------------------------------------------------------------

#define PIN_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
#define REGISTER_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)

/* mmap + cuMemHostRegister: the pages come from the kernel, the driver
 * only locks them. */
static CUresult register_pages(size_t size, void **ptr) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = drv.mem_host_register(p, size, REGISTER_FLAGS);
  if (rc != CUDA_SUCCESS) munmap(p, size);
  else *ptr = p;
  return rc;
}

static CUresult cuda_host_alloc(int dev, size_t size, void **ptr) {
  bool pushed;
  CUresult rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = g.host_register ? register_pages(size, ptr) : drv.mem_host_alloc(ptr, size, PIN_FLAGS);
  ctx_leave(pushed);
  return rc;
}

/* In a context, as the driver requires: the memory is portable, so the
 * calling thread's current device's does. */
static CUresult cuda_host_free(void *ptr, size_t size) {
  bool pushed = false;
  int dev = 0;
  CUresult rc = cuda_get_device(&dev);
  if (rc == CUDA_SUCCESS) rc = ctx_enter(dev, &pushed);
  if (rc == CUDA_SUCCESS) rc = g.host_register ? drv.mem_host_unregister(ptr) : drv.mem_free_host(ptr);
  ctx_leave(pushed);
  if (rc == CUDA_SUCCESS && g.host_register) munmap(ptr, size);
  return rc;
}

// ----------------------------------------------------------------------------
// The processes on a device (optional entry): NVML
// ----------------------------------------------------------------------------

/* NVML names the device by its PCI bus id, in NVML's own form. */
static CUresult cuda_processes(int dev, ca_process_t *out, unsigned cap, unsigned *n) {
  *n = 0;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  int domain = 0, bus = 0, device = 0;
  CUresult rc = drv.device_get_attribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, g.dev[dev]);
  if (rc == CUDA_SUCCESS) rc = drv.device_get_attribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, g.dev[dev]);
  if (rc == CUDA_SUCCESS) rc = drv.device_get_attribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, g.dev[dev]);
  if (rc != CUDA_SUCCESS) return CUDA_ERROR_NOT_SUPPORTED;
  char bus_id[32];
  snprintf(bus_id, sizeof bus_id, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus, (unsigned)device);
  return ca_nvml_processes(bus_id, out, cap, n);
}

/* The current context itself: a served one is a primary context the
 * backend retains, so its handle is never reused while the key is kept. */
static void *cuda_context_key(void) {
  CUcontext cur = NULL;
  return ready() && drv.ctx_get_current(&cur) == CUDA_SUCCESS ? (void *)cur : NULL;
}

const ca_backend_t ca_backend_cuda = {
    .name = "cuda",
    .init = cuda_init,
    .abandon = cuda_abandon,
    /* The device objects the core made are gone by then; what remains is
     * the retained primary contexts, which the runtime shares with the
     * program: keep them, and forget the rest as after a fork. */
    .shutdown = cuda_abandon,
    .device_count = cuda_device_count,
    .get_device = cuda_get_device,
    .set_device = cuda_set_device,
    .device_props = cuda_device_props,
    .mem_info = cuda_mem_info,
    .reserve = cuda_reserve,
    .va_free = cuda_va_free,
    .create = cuda_create,
    .release = cuda_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .set_access = cuda_set_access,
    .event_create = cuda_event_create,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .stream_sync = cuda_stream_sync,
    .stream_query = cuda_stream_query,
    .device_sync = cuda_device_sync,
    .is_capturing = cuda_is_capturing,
    .stream_device = cuda_stream_device,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .processes = cuda_processes,
    .context_key = cuda_context_key,
};
