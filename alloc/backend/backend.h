/* The one contract below the allocator core.
 *
 * Two implementations: cuda.c (the CUDA driver, opened at run time) and
 * sim/ (a simulated device on host memory). The core never calls CUDA
 * itself and never names a backend: it asks ca_backend_find() for the one
 * the configuration names; everything it needs from a device is in the
 * table.
 *
 * Rules that hold for every entry, stated once:
 * - Every call returns 0 (CUDA_SUCCESS) or a CUresult error code, exactly the
 *   code the CUDA driver returns for the same mistake.
 * - Pointers to results are non-NULL. Device ordinals are in [0, count).
 * - Sizes and offsets passed to reserve, create, map, unmap and
 *   set_access are non-zero multiples of the device's granularity; virtual
 *   addresses are granularity-aligned. Breaking this returns
 *   CUDA_ERROR_INVALID_VALUE and changes nothing.
 * - A map must lie inside one reservation and over unmapped addresses; access
 *   must be set after each map before the memory is touched; an unmap covers
 *   exactly whole earlier maps (one or several adjacent ones, no gap); a
 *   handle is released only when no mapping uses it (the driver defers such
 *   a release; the simulation refuses it with CUDA_ERROR_ILLEGAL_STATE, so
 *   that a core which relies on the deferral is caught). Each of these
 *   mistakes returns CUDA_ERROR_INVALID_VALUE otherwise.
 * - Streams are the driver's handles: NULL and (void *)0x1 name the legacy
 *   default stream, (void *)0x2 the per-thread default stream, of the
 *   calling thread's current context (a thread with none gets
 *   CUDA_ERROR_INVALID_CONTEXT; get_device and set_device give it one),
 *   except in event_record, where they name those of the event's device.
 *   An unknown, destroyed or garbage stream or event, or an event used with
 *   a stream of another device, returns CUDA_ERROR_INVALID_HANDLE; a bad
 *   device ordinal, CUDA_ERROR_INVALID_DEVICE.
 * - Contexts: a backend serves each device in one context (on CUDA the
 *   device's primary context, the runtime API's). A calling thread whose
 *   current context is another one (a program's own cuCtxCreate), or a
 *   stream of such a context, is not served: get_device still answers, but
 *   stream_device returns CUDA_ERROR_NOT_SUPPORTED, and the core then leaves
 *   the call to the real allocator.
 * - While a stream captures a graph (global mode), querying or waiting for
 *   an event returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates
 *   the capture.
 * - Event queries return 0 when complete and CUDA_ERROR_NOT_READY otherwise.
 */
#ifndef CUDALLOC_BACKEND_H
#define CUDALLOC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

typedef uint64_t ca_phys_t;     /* a physical allocation handle */
typedef void *ca_stream_t;      /* a stream, as the driver names it */
typedef void *ca_event_t;       /* an event, as the driver names it */

#define CA_STREAM_LEGACY ((ca_stream_t)0x1)
#define CA_STREAM_PER_THREAD ((ca_stream_t)0x2)

typedef struct ca_device_props_s {
  size_t total_bytes;   /* physical memory of the device */
  /* Virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED):
   * without it reserve/create/map cannot be used and granularity is 0. */
  bool vmm;
  size_t granularity;   /* page size for reserve/create/map */
  char name[64];
} ca_device_props_t;

/* Every operation, listed once. */
#define CA_BACKEND_OPS(X)                                                        \
  X(init) X(device_count) X(get_device) X(set_device) X(device_props) X(mem_info) \
  X(reserve) X(va_free) X(create) X(release) X(map) X(unmap) X(set_access)       \
  X(event_create) X(event_record) X(event_query) X(event_sync) X(event_destroy)  \
  X(stream_sync) X(stream_query) X(device_sync) X(is_capturing) X(stream_device) X(host_alloc) X(host_free)

typedef enum ca_backend_op_e {
#define CA_OP_ENUM(op) CA_OP_##op,
  CA_BACKEND_OPS(CA_OP_ENUM)
#undef CA_OP_ENUM
  CA_OP_COUNT
} ca_backend_op_t;

/* The name of an operation ("map"), and back; -1 for an unknown name. */
const char *ca_backend_op_name(ca_backend_op_t op);
int ca_backend_op_from_name(const char *name, size_t len);

#define CA_BACKEND_MAX_FAULTS 8

/* A fault a simulated backend injects: the nth call of op fails (1-based). */
typedef struct ca_fault_spec_s {
  ca_backend_op_t op;
  uint64_t nth;
} ca_fault_spec_t;

/* A process that holds memory on a device: what `nvidia-smi` lists, and
 * what the out-of-memory report names. name may be empty (the core then
 * reads /proc/PID/comm). */
#define CA_PROCESS_NAME_MAX 32
typedef struct ca_process_s {
  uint32_t pid;
  uint64_t bytes;               /* UINT64_MAX: the driver does not say */
  char name[CA_PROCESS_NAME_MAX];
} ca_process_t;

#define CA_BACKEND_MAX_OTHERS 4

/* When simulated device work completes (sim_events). */
typedef enum ca_sim_events_e {
  CA_SIM_EVENTS_AUTO,           /* at once: nothing is ever pending */
  CA_SIM_EVENTS_MANUAL,         /* when a test completes it, or something waits */
  CA_SIM_EVENTS_LAG,            /* as manual, or by itself after 1..lag_ops later calls */
} ca_sim_events_t;

/* Settings a backend reads when it starts: CUDALLOC_CONF's sim_* keys,
 * which only the simulated device has (a real backend ignores them). */
typedef struct ca_backend_options_s {
  unsigned devices;
  uint64_t capacity;            /* bytes per device */
  uint64_t granularity;         /* bytes */
  bool no_vmm;                  /* the devices say they lack virtual memory management */
  unsigned events;              /* a ca_sim_events_t */
  unsigned lag_ops;             /* CA_SIM_EVENTS_LAG: the most calls work lags behind */
  ca_fault_spec_t fail[CA_BACKEND_MAX_FAULTS];
  unsigned fail_count;
  double fail_rate;
  uint64_t seed;
  unsigned latency_us[CA_OP_COUNT];
  uint64_t pinned_capacity;     /* simulated: pinned host bytes the machine allows */
  bool host_register;           /* CUDA: pin with mmap + cuMemHostRegister, not cuMemHostAlloc */
  /* sim_other_process: processes that pretend to hold memory on every
   * simulated device (its free memory shrinks by their bytes). */
  ca_process_t others[CA_BACKEND_MAX_OTHERS];
  unsigned others_count;
} ca_backend_options_t;

typedef struct ca_backend_s {
  const char *name;
  /* true when device memory is host memory and the runtime calls around
   * allocations (streams, events, copies) must be emulated by the shim. */
  bool simulated;

  /* Starts the backend; idempotent. When the device cannot be reached it
   * prints one line on stderr and fails: CUDA_ERROR_NOT_INITIALIZED when
   * there is no driver to load, else the driver's own code (cuInit's). A
   * failure is remembered and returned again, silently. Every other entry
   * returns CUDA_ERROR_NOT_INITIALIZED until init has succeeded. */
  CUresult (*init)(const ca_backend_options_t *options);
  /* Forgets every device object without calling the device: the state
   * after fork() in the child, or after the driver has gone at exit. Until
   * the next init, every entry returns CUDA_ERROR_NOT_INITIALIZED. */
  void (*abandon)(void);
  /* Gives back every device object the backend still holds, so that the
   * next init starts afresh (cudalloc_shutdown). */
  void (*shutdown)(void);

  /* -- devices ------------------------------------------------------------ */
  CUresult (*device_count)(int *count);
  /* The calling thread's current device (the current context's, on CUDA). */
  CUresult (*get_device)(int *dev);
  CUresult (*set_device)(int dev);
  CUresult (*device_props)(int dev, ca_device_props_t *props);
  /* Free and total physical memory of the device, as the driver sees it. */
  CUresult (*mem_info)(int dev, size_t *free_bytes, size_t *total_bytes);

  /* -- virtual addresses and physical pages -------------------------------- */
  CUresult (*reserve)(int dev, size_t size, uintptr_t *va);
  CUresult (*va_free)(uintptr_t va, size_t size);
  CUresult (*create)(int dev, size_t size, ca_phys_t *handle);
  CUresult (*release)(ca_phys_t handle);
  /* Maps [offset, offset+size) of handle at va. */
  CUresult (*map)(uintptr_t va, size_t size, ca_phys_t handle, size_t offset);
  CUresult (*unmap)(uintptr_t va, size_t size);
  /* Grants dev read-write access to [va, va+size), which may span maps,
   * leaving other devices' access as it was (the core grants a peer the
   * memory of the device it enabled access to this way). */
  CUresult (*set_access)(int dev, uintptr_t va, size_t size);

  /* -- ordering --------------------------------------------------------------- */
  /* Events are created on dev, without timing. */
  CUresult (*event_create)(int dev, ca_event_t *event);
  /* Records on stream in the event's device's context, whatever context
   * the calling thread has current (or none): the default stream handles
   * name that device's default streams. */
  CUresult (*event_record)(ca_event_t event, ca_stream_t stream);
  CUresult (*event_query)(ca_event_t event);
  CUresult (*event_sync)(ca_event_t event);
  CUresult (*event_destroy)(ca_event_t event);
  CUresult (*stream_sync)(ca_stream_t stream);
  /* CUDA_SUCCESS once every piece of work issued on stream so far has
   * completed, CUDA_ERROR_NOT_READY before (cuStreamQuery). */
  CUresult (*stream_query)(ca_stream_t stream);
  CUresult (*device_sync)(int dev);
  /* *capturing = 1 while the stream is being captured into a graph, also
   * when a global-mode capture elsewhere makes using it illegal. */
  CUresult (*is_capturing)(ca_stream_t stream, int *capturing);
  /* The device stream belongs to; the default stream handles: the calling
   * thread's current device. CUDA_ERROR_INVALID_HANDLE for an unknown,
   * destroyed or garbage handle; CUDA_ERROR_NOT_SUPPORTED for a stream (or,
   * with a default handle, a current context) of a context the backend does
   * not serve. Cheap: the core asks on every stream-ordered call. */
  CUresult (*stream_device)(ca_stream_t stream, int *dev);
  /* An opaque key of the calling thread's current context, NULL when it has
   * none: equal keys name the same context, so the same current device and
   * default streams. No counted call, never fails, cheap enough for every
   * allocation (on CUDA, cuCtxGetCurrent alone), so that the core can
   * remember what stream_device said for the default streams. Required
   * (the hot path calls it with no test): a backend with no key returns
   * NULL, and nothing is remembered. */
  void *(*context_key)(void);

  /* -- pinned host memory -------------------------------------------------- */
  /* Page-locked host memory of size bytes (a non-zero multiple of the host
   * page), page-aligned, that every device can reach (portable, mapped:
   * cuMemHostAlloc's PORTABLE | DEVICEMAP, or mmap + cuMemHostRegister),
   * pinned in dev's context. Pinning costs far more than a map: the core
   * asks for large chunks and caches them (alloc/pinned_chunks.c). Out of
   * pinned memory: CUDA_ERROR_OUT_OF_MEMORY. */
  CUresult (*host_alloc)(int dev, size_t size, void **ptr);
  /* Gives back a whole earlier host_alloc (ptr and size as returned and
   * asked); anything else is CUDA_ERROR_INVALID_VALUE. */
  CUresult (*host_free)(void *ptr, size_t size);

  /* -- optional (NULL when the backend has none) ------------------------------ */
  /* Told of every block the core hands out, [va, va+size) for stream, by the
   * allocating call at site (a return address): a backend that sees device
   * work checks that none still pending can touch it. stream_ordered: the
   * block may be used at once only by work on stream (and what is ordered
   * after it); otherwise by any stream, so no work may be pending on it. */
  void (*check_handout)(uintptr_t va, size_t size, ca_stream_t stream, bool stream_ordered,
                        void *site);
  /* With check_handout: a word that reads 0 (an acquire load) while no
   * device work is pending that a hand-out could meet, when check_handout
   * has nothing to check; the core then skips the call (ca_backend_handout_watch).
   * NULL: the call is made at every hand-out. */
  const unsigned *handout_pending;
  /* The processes that hold memory on dev, this one included, at most cap
   * of them into out; *n: how many were written. Asked only when an
   * allocation fails (it may be slow and may allocate host memory).
   * CUDA_ERROR_NOT_SUPPORTED when the backend cannot tell (no NVML). */
  CUresult (*processes)(int dev, ca_process_t *out, unsigned cap, unsigned *n);
} ca_backend_t;

/* The word whose value says whether be's check_handout must see a
 * hand-out now (not 0: call it): its handout_pending, or a word that
 * always reads 1 (a check without one) or 0 (no check). With no device
 * work pending the check has nothing to look at, and the call would cost
 * a front-cache hit an indirect call and its arguments (docs/benchmarks.md,
 * eighteenth session). Chosen once, when the backend starts, so that a
 * hand-out asks with two loads (ca_handout_checked, types.h). */
const unsigned *ca_backend_handout_watch(const ca_backend_t *be);

extern const ca_backend_t ca_backend_sim;
extern const ca_backend_t ca_backend_cuda;

/* The backend called name ("cuda", "sim"), or NULL. */
const ca_backend_t *ca_backend_find(const char *name);

#endif /* CUDALLOC_BACKEND_H */
