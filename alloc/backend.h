/* The one contract below the allocator core.
 *
 * Two implementations: backend_cuda.c (the CUDA driver, opened at run time)
 * and backend_sim.c (a simulated device on host memory). The core never
 * calls CUDA itself; everything it needs from a device is in this table.
 *
 * Rules that hold for every entry, stated once:
 * - Every call returns 0 (CUDA_SUCCESS) or a CUresult error code, exactly the
 *   code the CUDA driver returns for the same mistake.
 * - Pointers to results are non-NULL. Device ordinals are in [0, count).
 * - Sizes and offsets passed to va_reserve, phys_create, map, unmap and
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
 *   default stream, (void *)0x2 the per-thread default stream. An unknown
 *   stream or event, or an event used with a stream of another device,
 *   returns CUDA_ERROR_INVALID_HANDLE; a bad device ordinal,
 *   CUDA_ERROR_INVALID_DEVICE.
 * - Event queries return 0 when complete and CUDA_ERROR_NOT_READY otherwise.
 */
#ifndef CUDALLOC_BACKEND_H
#define CUDALLOC_BACKEND_H

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
  size_t granularity;   /* page size for reserve/create/map */
  char name[64];
} ca_device_props_t;

/* Every operation, listed once: X(op, default error when a fault is injected). */
#define CA_BACKEND_OPS(X)                                 \
  X(init, CUDA_ERROR_NOT_INITIALIZED)                     \
  X(device_count, CUDA_ERROR_NO_DEVICE)                   \
  X(get_device, CUDA_ERROR_INVALID_CONTEXT)               \
  X(set_device, CUDA_ERROR_INVALID_DEVICE)                \
  X(device_props, CUDA_ERROR_INVALID_DEVICE)              \
  X(mem_info, CUDA_ERROR_UNKNOWN)                         \
  X(reserve, CUDA_ERROR_OUT_OF_MEMORY)                    \
  X(va_free, CUDA_ERROR_UNKNOWN)                          \
  X(create, CUDA_ERROR_OUT_OF_MEMORY)                     \
  X(release, CUDA_ERROR_UNKNOWN)                          \
  X(map, CUDA_ERROR_OUT_OF_MEMORY)                        \
  X(unmap, CUDA_ERROR_UNKNOWN)                            \
  X(set_access, CUDA_ERROR_OUT_OF_MEMORY)                 \
  X(event_create, CUDA_ERROR_OUT_OF_MEMORY)               \
  X(event_record, CUDA_ERROR_LAUNCH_FAILED)               \
  X(event_query, CUDA_ERROR_LAUNCH_FAILED)                \
  X(event_sync, CUDA_ERROR_LAUNCH_FAILED)                 \
  X(event_destroy, CUDA_ERROR_INVALID_HANDLE)             \
  X(stream_sync, CUDA_ERROR_LAUNCH_FAILED)                \
  X(device_sync, CUDA_ERROR_LAUNCH_FAILED)                \
  X(is_capturing, CUDA_ERROR_INVALID_HANDLE)

typedef enum ca_backend_op_e {
#define CA_OP_ENUM(op, err) CA_OP_##op,
  CA_BACKEND_OPS(CA_OP_ENUM)
#undef CA_OP_ENUM
  CA_OP_COUNT
} ca_backend_op_t;

/* The name of an operation ("map"), and back; -1 for an unknown name. */
const char *ca_backend_op_name(ca_backend_op_t op);
int ca_backend_op_from_name(const char *name, size_t len);

typedef struct ca_backend_s {
  const char *name;

  /* Starts the backend; idempotent. When the device cannot be reached it
   * prints one line on stderr and fails: CUDA_ERROR_NOT_INITIALIZED when
   * there is no driver to load, else the driver's own code (cuInit's). A
   * failure is remembered and returned again, silently. Every other entry
   * returns CUDA_ERROR_NOT_INITIALIZED until init has succeeded. */
  CUresult (*init)(void);
  /* Forgets every device object without calling the device: the state
   * after fork() in the child, or after the driver has gone at exit. Until
   * the next init, every entry returns CUDA_ERROR_NOT_INITIALIZED. */
  void (*abandon)(void);

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
  /* Grants dev read-write access to [va, va+size), which may span maps. */
  CUresult (*set_access)(int dev, uintptr_t va, size_t size);

  /* -- ordering --------------------------------------------------------------- */
  /* Events are created on dev, without timing. */
  CUresult (*event_create)(int dev, ca_event_t *event);
  CUresult (*event_record)(ca_event_t event, ca_stream_t stream);
  CUresult (*event_query)(ca_event_t event);
  CUresult (*event_sync)(ca_event_t event);
  CUresult (*event_destroy)(ca_event_t event);
  CUresult (*stream_sync)(ca_stream_t stream);
  CUresult (*device_sync)(int dev);
  /* *capturing = 1 while the stream is being captured into a graph, also
   * when a global-mode capture elsewhere makes using it illegal. */
  CUresult (*is_capturing)(ca_stream_t stream, int *capturing);
} ca_backend_t;

extern const ca_backend_t ca_backend_sim;
extern const ca_backend_t ca_backend_cuda;

/* The backend the configuration selects. */
const ca_backend_t *ca_backend_selected(void);

#endif /* CUDALLOC_BACKEND_H */
