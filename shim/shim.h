/* What the files of the interception layer share.
 *
 * The shim translates: each entry point checks its arguments as CUDA does,
 * forwards to the allocator core (core.h) and answers in the caller's
 * language (cudaError_t for the runtime API, CUresult for the driver API).
 * No allocator logic lives here.
 */
#ifndef CUDALLOC_SHIM_H
#define CUDALLOC_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core.h"
#include "guard.h"
#include "symbols.h"

/* An entry point the library exports (everything else is hidden). */
#define CA_EXPORT __attribute__((visibility("default")))
/* The call site recorded for leak reports: the program's return address. */
#define CA_CALLER __builtin_return_address(0)

// ----------------------------------------------------------------------------
// Declarations the CUDA headers make only for other compilation modes
// ----------------------------------------------------------------------------

/* cuda.h maps these names to newer versions; the library also exports the
 * older entry points under their own names. */
#undef cuStreamBeginCapture
#undef cuGetProcAddress
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* Per-thread default stream forms (what -default-stream per-thread calls). */
extern __typeof__(cudaMallocAsync) cudaMallocAsync_ptsz;
extern __typeof__(cudaFreeAsync) cudaFreeAsync_ptsz;
extern __typeof__(cudaStreamBeginCapture) cudaStreamBeginCapture_ptsz;
extern __typeof__(cudaStreamBeginCaptureToGraph) cudaStreamBeginCaptureToGraph_ptsz;
extern __typeof__(cudaStreamEndCapture) cudaStreamEndCapture_ptsz;
extern __typeof__(cudaStreamSynchronize) cudaStreamSynchronize_ptsz;
extern __typeof__(cudaStreamQuery) cudaStreamQuery_ptsz;
extern __typeof__(cudaStreamWaitEvent) cudaStreamWaitEvent_ptsz;
extern __typeof__(cudaEventRecord) cudaEventRecord_ptsz;
extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;
extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;
extern __typeof__(cudaMemset) cudaMemset_ptds;
extern __typeof__(cudaMemsetAsync) cudaMemsetAsync_ptsz;
extern __typeof__(cuMemAllocAsync) cuMemAllocAsync_ptsz;
extern __typeof__(cuMemFreeAsync) cuMemFreeAsync_ptsz;
extern __typeof__(cuStreamBeginCapture) cuStreamBeginCapture_ptsz;
extern __typeof__(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
extern __typeof__(cuStreamBeginCaptureToGraph) cuStreamBeginCaptureToGraph_ptsz;
extern __typeof__(cuStreamEndCapture) cuStreamEndCapture_ptsz;
extern __typeof__(cudaLaunchKernel) cudaLaunchKernel_ptsz;
extern __typeof__(cuLaunchKernel) cuLaunchKernel_ptsz;

// ----------------------------------------------------------------------------
// "real.c": the functions cudalloc stands in front of
// ----------------------------------------------------------------------------

typedef enum ca_sym_e {
#define CA_SYM_ENUM(name) CA_SYM_##name,
#define CA_SYM_ENUM_DRV(name, req, ver, kind) CA_SYM_##name,
  CA_SYMS_RUNTIME(CA_SYM_ENUM) CA_SYMS_SIM_RUNTIME(CA_SYM_ENUM) CA_SYMS_DRIVER(CA_SYM_ENUM_DRV)
  CA_SYMS_SIM_DRIVER(CA_SYM_ENUM_DRV)
#undef CA_SYM_ENUM
#undef CA_SYM_ENUM_DRV
  CA_SYM_COUNT
} ca_sym_t;

/* The exported name of sym, and cudalloc's own entry point for it. */
const char *ca_sym_name(ca_sym_t sym);
void *ca_sym_wrapper(ca_sym_t sym);
/* The entry point called exactly name, or -1. */
int ca_sym_find(const char *name);
/* true for a driver API entry point. */
bool ca_sym_is_driver(ca_sym_t sym);
/* true for a driver entry point replaced only on the simulated device
 * (CA_SYMS_SIM_DRIVER). */
bool ca_sym_sim_only_driver(ca_sym_t sym);

/* The real function behind sym (the runtime's or the driver's) for a call
 * made from the code at caller (a return address: the library whose scope
 * is searched first), resolved on first use; NULL when the process has
 * none (no driver, for instance). */
void *ca_real_from(ca_sym_t sym, const void *caller);
/* Records real as the function behind sym, found in the library handle
 * (the program's own dlsym found it there first). */
void ca_real_learn(ca_sym_t sym, void *handle, void *real);
/* The ordinal of ctx's device, asked of the loaded driver (no driver:
 * CUDA_ERROR_NOT_INITIALIZED). */
CUresult ca_real_ctx_device(CUcontext ctx, int *dev);

/* The real dlsym, which the interposed one jumps to. */
extern void *(*ca_real_dlsym)(void *, const char *);
void ca_real_dlsym_init(void);

/* Used in an exported entry point, so that CA_CALLER is the program's call
 * site; a helper that is not an entry point is given its caller instead. */
#define CA_REAL(name) CA_REAL_FROM(name, CA_CALLER)
#define CA_REAL_FROM(name, caller) ((__typeof__(&name))ca_real_from(CA_SYM_##name, caller))
/* Calls the real runtime (driver) function, or answers as a process
 * without one would. */
#define CA_REAL_RT(name, ...) \
  (CA_REAL(name) ? CA_REAL(name)(__VA_ARGS__) : ca_rt_missing(#name))
#define CA_REAL_DRV(name, ...) \
  (CA_REAL(name) ? CA_REAL(name)(__VA_ARGS__) : ca_drv_missing(#name))
cudaError_t ca_rt_missing(const char *name);
CUresult ca_drv_missing(const char *name);

// ----------------------------------------------------------------------------
// "lifecycle.c": modes and start
// ----------------------------------------------------------------------------

/* true when CUDALLOC_CONF selects a simulated device (known without
 * starting anything): the runtime calls around allocations are then served
 * by shim/sim/. */
bool ca_shim_sim(void);
/* Starts the core on first use. false when it cannot start: the caller
 * then behaves as if cudalloc were absent. Inline, as every entry point
 * asks: once started, one load. */
enum { CA_SHIM_UNTRIED, CA_SHIM_STARTED, CA_SHIM_FAILED };
extern int ca_shim_started __attribute__((visibility("hidden")));   /* atomic: CA_SHIM_*; no GOT */
bool ca_shim_start_slow(void);
static inline bool ca_shim_start(void) {
  return __atomic_load_n(&ca_shim_started, __ATOMIC_ACQUIRE) == CA_SHIM_STARTED || ca_shim_start_slow();
}

/* Opens an exported entry point. Calls made while another cudalloc entry
 * point runs on this thread (the real runtime reaching the driver through
 * cudalloc's cuGetProcAddress, for instance), and calls made when the core
 * cannot start, go to `passthrough`, as if cudalloc were absent. */
#define CA_ENTER(passthrough)                                  \
  CA_GUARDED;                                                  \
  if (!ca_guard_outer() || !ca_shim_start()) return (passthrough)

/* The core's answer for a call it does not serve (a program's own
 * context; a device without virtual memory management or without its
 * address reservation: core.h): the allocation goes to the real library
 * instead, as if cudalloc were absent. */
#define CA_NOT_SERVED CUDA_ERROR_NOT_SUPPORTED

/* What a pass-through to the real library answers on the simulated device,
 * which has no real library behind it: `sim_error`. */
#define CA_PASS_RT(sim_error, name, ...) \
  (ca_shim_sim() ? ca_rt_error(sim_error) : CA_REAL_RT(name, __VA_ARGS__))
#define CA_PASS_DRV(sim_error, name, ...) \
  (ca_shim_sim() ? (CUresult)(sim_error) : CA_REAL_DRV(name, __VA_ARGS__))

// ----------------------------------------------------------------------------
// "errors.c": the runtime's last error
// ----------------------------------------------------------------------------

/* Records err as the calling thread's last error (unless cudaSuccess), as
 * the runtime does for a failed call; returns err. */
cudaError_t ca_rt_error(cudaError_t err);
/* ca_rt_error of the runtime error that stands for a core result. Inline:
 * success, most calls, needs no conversion (the error table's switch). */
static inline cudaError_t ca_rt_result(CUresult rc) {
  return rc == CUDA_SUCCESS ? cudaSuccess : ca_rt_error(ca_cuda_error(rc));
}

/* The stream a _ptsz entry point means: NULL is the per-thread stream. */
static inline ca_stream_t ca_ptsz(const void *stream) {
  return stream ? (ca_stream_t)stream : CA_STREAM_PER_THREAD;
}

// ----------------------------------------------------------------------------
// Pitched allocations (runtime.c, driver.c)
// ----------------------------------------------------------------------------

/* The row alignment of cudaMallocPitch and cuMemAllocPitch: the driver
 * aligns pitched rows to its texture pitch alignment, and 512 bytes meets
 * that of every GPU. */
#define CA_PITCH_ALIGN ((size_t)512)

static inline size_t ca_pitch_of(size_t width) {
  if (width > SIZE_MAX - (CA_PITCH_ALIGN - 1)) return SIZE_MAX / CA_PITCH_ALIGN * CA_PITCH_ALIGN;
  return (width + CA_PITCH_ALIGN - 1) / CA_PITCH_ALIGN * CA_PITCH_ALIGN;
}

/* pitch * height * depth, or SIZE_MAX (which no device holds) on overflow. */
static inline size_t ca_pitched_size(size_t pitch, size_t height, size_t depth) {
  size_t n;
  if (__builtin_mul_overflow(pitch, height, &n) || __builtin_mul_overflow(n, depth, &n)) return SIZE_MAX;
  return n;
}

#endif /* CUDALLOC_SHIM_H */
