/* What the allocator core offers the layers above it (the public API in
 * api.c and the interception shim). Errors are CUresult codes (0 = success);
 * the public API and the shim translate them with ca_cuda_error().
 *
 * Every function here starts the allocator on first use, from
 * CUDALLOC_CONF, unless cudalloc_init() started it already. */
#ifndef CUDALLOC_CORE_H
#define CUDALLOC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cuda.h>
#include <driver_types.h>

#include "backend.h"

/* Starts the allocator (configuration, backend) once; later calls return
 * the first call's result. conf NULL: CUDALLOC_CONF. */
CUresult ca_init(const char *conf);
/* true when the backend CUDALLOC_CONF names is a simulated device (whose
 * runtime calls the shim must serve): known without starting anything, so
 * that those calls can be forwarded before the first allocation. */
bool ca_backend_is_simulated(void);
/* The calling thread's current device; 0 when it has none. */
int ca_device_current(void);

/* How an allocation is ordered. A stream-ordered one (cudaMallocAsync) is
 * used on its stream, which may reuse at once what it freed itself. One
 * that is not (cudaMalloc, cuMemAlloc, pitch, 3D) may be used by any stream
 * at once, non-blocking ones included: it takes only memory whose device
 * work has completed, and its stream is ignored. */
typedef enum {
  CA_ALLOC_SYNC,
  CA_ALLOC_ASYNC,
  /* Stream-ordered, but freed with cudaFree's promise (PyTorch's pluggable
   * allocator by default, ca_free_torch): the thread's front cache, which
   * only stream-ordered frees fill, neither serves it nor keeps track of it. */
  CA_ALLOC_ASYNC_UNCACHED,
} ca_alloc_kind_t;

/* Allocation on the stream's device (the current device for the default
 * streams and for CA_ALLOC_SYNC). caller is the call site recorded for leak
 * reports (a return address, or NULL). A stream-ordered call on a stream
 * that is unknown, destroyed or garbage returns CUDA_ERROR_INVALID_HANDLE
 * and changes nothing. CUDA_ERROR_NOT_SUPPORTED: cudalloc does not serve
 * the call: the calling thread's context (or the stream's) is not one it
 * serves (a program's own cuCtxCreate, backend.h), or the device lacks
 * virtual memory management, or its address reservation failed (said once
 * on stderr). The shim then hands the call to the real allocator, whose
 * pointers the frees pass through as foreign (CUDA_ERROR_NOT_FOUND). */
CUresult ca_malloc(void **ptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind, void *caller);
/* The same on device dev (-1: as ca_malloc); a stream of another device
 * is CUDA_ERROR_INVALID_HANDLE. */
CUresult ca_malloc_on(int dev, void **ptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind,
                      void *caller);

/* Frees ptr, freed in the order of stream: reusable at once on stream,
 * elsewhere when the stream's earlier work has completed.
 * Both frees return CUDA_ERROR_NOT_FOUND, silently, when ptr lies outside
 * every range cudalloc manages (the shim then hands it to the real free),
 * and CUDA_ERROR_INVALID_VALUE, with one line on stderr, for a pointer
 * inside cudalloc's memory that is not a live block (double free, interior
 * pointer). NULL is a successful no-op. A stream that is unknown,
 * destroyed, garbage or of another device than the block is
 * CUDA_ERROR_INVALID_HANDLE, and the block stays the program's. */
CUresult ca_free(void *ptr, ca_stream_t stream);
/* Frees ptr with cudaFree's promise: reusable only when all device work
 * issued before the call has completed (free_mode:stream relaxes this to
 * the block's allocation stream and thread, or the device's epoch when
 * that stream is gone). */
CUresult ca_free_sync(void *ptr);
/* Frees a block of PyTorch's pluggable allocator, freed on stream: as
 * ca_free_sync, since PyTorch cannot tell a pluggable allocator the other
 * streams that used it (record_stream), unless torch_free:stream opts into
 * ca_free's reuse at once on stream. */
CUresult ca_free_torch(void *ptr, ca_stream_t stream);
/* Allocates for PyTorch's pluggable allocator on device dev and stream:
 * ca_malloc_on, stream-ordered, uncached unless torch_free:stream (the
 * frees ca_free_torch makes are then the front cache's). */
CUresult ca_malloc_torch(int dev, void **ptr, size_t size, ca_stream_t stream, void *caller);

/* Pinned host memory (cudaHostAlloc, cuMemHostAlloc), from the pinned
 * cache (alloc/pinned.h). flags are cudaHostAlloc's: unknown bits are
 * CUDA_ERROR_INVALID_VALUE; flags the cache does not serve (write-combined)
 * CUDA_ERROR_NOT_SUPPORTED, silently, for the shim to pass the call on.
 * size 0 succeeds with NULL. */
CUresult ca_host_alloc(void **ptr, size_t size, unsigned flags, void *caller);
/* CUDA_ERROR_NOT_FOUND, silently, for a pointer outside every pinned chunk
 * (the shim hands it to the real free); CUDA_ERROR_INVALID_VALUE, with one
 * line on stderr, for one inside that is not a live block. NULL succeeds.
 * A block that async copies still use is reused only once they complete. */
CUresult ca_host_free(void *ptr);
/* The program queued an async copy of n bytes on stream: a pinned block
 * that dst or src lies in is not reused before the copy completes. */
void ca_host_copy_issued(const void *dst, const void *src, size_t n, ca_stream_t stream);

/* true when ptr lies inside an address range cudalloc manages. */
bool ca_owns(const void *ptr);
/* The live block containing ptr: its base and requested size. */
CUresult ca_address_range(const void *ptr, void **base, size_t *size);

/* Streams the program created, so that cudaFree's fence covers them.
 * Non-blocking streams are fenced with an event of their own, on their
 * device; blocking ones through the legacy default stream. A stream whose
 * device cannot be learned now is not forgotten: every later fence tries
 * again, and synchronizes the device until it succeeds. Returns
 * CUDA_ERROR_INVALID_HANDLE for a handle that names no stream. */
CUresult ca_stream_created(ca_stream_t stream, bool nonblocking);
/* Before the stream's handle becomes invalid. */
void ca_stream_destroyed(ca_stream_t stream);
/* A runtime call is about to issue work on stream or wait for it (a copy,
 * a synchronization), from the calling thread: a stream other than the
 * legacy one, or a second thread, ends the legacy queue's mode
 * (alloc/legacyq.c) before the work is issued. */
void ca_stream_used(ca_stream_t stream);
/* Every stream the program creates reaches the shim (its entry points are
 * the ones the program's calls bind to): legacy_queue:auto may then keep
 * cudaFree'd blocks in the legacy stream's queue (alloc/legacyq.c). */
void ca_streams_all_seen(void);

/* Graph capture begins or ends on some stream: while any capture is
 * underway the allocator never blocks and never records events; frees are
 * held back until the last capture ends. */
void ca_capture_begin(void);
void ca_capture_end(void);
/* true when stream is being captured into a graph (allocations on it must
 * then reach the driver as graph memory nodes). While no capture is
 * underway (the core counts them) a load and a compare, inline: no call on
 * each cudaMallocAsync. */
bool ca_stream_capturing_asked(ca_stream_t stream);
extern int *const ca_capture_count;   /* the core's count; const: the link-time optimizer folds it */
static inline bool ca_stream_capturing(ca_stream_t stream) {
  return __atomic_load_n(ca_capture_count, __ATOMIC_ACQUIRE) > 0 && ca_stream_capturing_asked(stream);
}

/* Device dev may now access peer's memory (cudaDeviceEnablePeerAccess on
 * dev): every range of peer's mapped so far, and every later one, is
 * granted to dev too. */
CUresult ca_peer_access_enabled(int dev, int peer);

/* Free memory as a program should see it: the driver's free memory plus
 * what cudalloc holds but could give back, never above the total. */
CUresult ca_mem_get_info(int dev, size_t *free_bytes, size_t *total_bytes);

/* Where device dev's reserved memory is (free blocks by size, holes, what
 * waits in each queue), written to f: a diagnosis (holdings.c). */
CUresult ca_holdings_dump(int dev, FILE *f);

/* Around a synchronization of the calling thread's whole device
 * (cudaDeviceSynchronize): the blocks freed before it are reusable by
 * every stream once it returns successfully, with no event recorded or
 * queried (fence.c); with step_on:sync a step ends there, as at
 * cudalloc_step(). */
#define CA_SYNC_ARENAS 8   /* CA_MAX_ARENAS (config.h) */
typedef struct {
  int dev;
  uint64_t seq[CA_SYNC_ARENAS];   /* per arena of dev; 0: nothing was filed there */
} ca_sync_token_t;
ca_sync_token_t ca_device_sync_begin(void);
void ca_device_sync_end(ca_sync_token_t t, bool ok);
/* The same around a synchronization of stream (cudaStreamSynchronize),
 * which proves as much only while the legacy stream is the only one
 * (legacy_queue:auto, and stream is the legacy one): otherwise the token
 * says nothing was filed. It ends no step. */
ca_sync_token_t ca_stream_sync_begin(ca_stream_t stream);
void ca_stream_sync_end(ca_sync_token_t t, bool ok);

/* Drops every pool of dev (cudaDeviceReset): live blocks are forgotten. */
CUresult ca_device_reset(int dev);

/* In a fork() child: forget all state without touching the device. */
void ca_fork_child(void);

/* The cudaError_t that a CUDA runtime user expects for a core error. */
cudaError_t ca_cuda_error(CUresult err);

#endif /* CUDALLOC_CORE_H */
