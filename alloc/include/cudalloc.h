/* cudalloc: a caching CUDA device-memory allocator.
 *
 * Three ways in: preload libcudalloc.so under any CUDA program (no rebuild),
 * plug it into PyTorch (cudalloc_torch_malloc / cudalloc_torch_free), or link
 * libcudalloc.a and call the functions below. Every function is thread-safe.
 * Errors are reported as the cudaError_t a CUDA user expects.
 */
#ifndef CUDALLOC_H
#define CUDALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUDALLOC_API __attribute__((visibility("default")))
#else
#define CUDALLOC_API
#endif

/* The version of this header; cudalloc_version() gives the library's
 * (MAJOR * 10000 + MINOR * 100 + PATCH), which may differ when a program
 * runs against another build than the one it was compiled with. */
#define CUDALLOC_VERSION_MAJOR 0
#define CUDALLOC_VERSION_MINOR 2
#define CUDALLOC_VERSION_PATCH 0
#define CUDALLOC_VERSION \
  (CUDALLOC_VERSION_MAJOR * 10000 + CUDALLOC_VERSION_MINOR * 100 + CUDALLOC_VERSION_PATCH)

CUDALLOC_API int cudalloc_version(void);

// ----------------------------------------------------------------------------
// Set-up and tear-down
// ----------------------------------------------------------------------------

/* Optional explicit start with a configuration string in CUDALLOC_CONF's
 * syntax ("backend:sim,sim_capacity_mb:512"); NULL reads CUDALLOC_CONF.
 * Without it, the first call of any other function starts the allocator
 * from the environment. Returns cudaErrorInitializationError when the
 * backend cannot start (no driver, for the CUDA backend). */
CUDALLOC_API cudaError_t cudalloc_init(const char *conf);

/* Gives every cached page and reservation back to the backend and forgets
 * all state. Live blocks are reported as leaks, not freed: listed on stderr
 * (unless quiet:true) and in the report files, which are written then. */
CUDALLOC_API void cudalloc_shutdown(void);

// ----------------------------------------------------------------------------
// Allocation
// ----------------------------------------------------------------------------

/* Stream-ordered allocation on the stream's device (the current device for
 * the default streams). size 0 succeeds and returns a pointer that may be
 * freed. A stream handle that is unknown, destroyed or garbage gets
 * cudaErrorInvalidResourceHandle and changes nothing. cudaErrorNotSupported:
 * cudalloc does not serve this device (no virtual memory management, or its
 * address reservation failed, said once on stderr); allocate with
 * cudaMalloc. */
CUDALLOC_API cudaError_t cudalloc_malloc(void **ptr, size_t size, cudaStream_t stream);

/* Stream-ordered free: the block is reusable at once by allocations on
 * `stream`, and on other streams once the work queued on `stream` before
 * the free has completed. A bad stream handle, or one of another device
 * than the block's, gets cudaErrorInvalidResourceHandle: nothing is freed. */
CUDALLOC_API cudaError_t cudalloc_free(void *ptr, cudaStream_t stream);

/* cudaFree's promise: the block is not handed out again until the device
 * work issued before this call has completed. Does not block the caller.
 * "All work" is what cudalloc can see: the legacy default stream (which
 * orders every blocking stream and per-thread default stream of the
 * device) and the non-blocking streams it knows. Under the preload it
 * learns of every stream created; a program linked with cudalloc must
 * register its non-blocking streams (cudalloc_stream_register below), or
 * the work on them is NOT waited for. */
CUDALLOC_API cudaError_t cudalloc_free_sync(void *ptr);

/* Tells cudalloc of a stream the program created (flags as given to
 * cudaStreamCreateWithFlags), so that cudalloc_free_sync waits for its work
 * too; needed for cudaStreamNonBlocking streams, harmless for others.
 * Unregister it before destroying it. cudaErrorInvalidResourceHandle for a
 * handle that names no stream. Registering twice is registering once. */
CUDALLOC_API cudaError_t cudalloc_stream_register(cudaStream_t stream, unsigned int flags);
CUDALLOC_API cudaError_t cudalloc_stream_unregister(cudaStream_t stream);

/* Pinned (page-locked) host memory from cudalloc's pinned cache, as
 * cudaHostAlloc (flags: cudaHostAllocPortable | cudaHostAllocMapped;
 * write-combined memory is cudaErrorNotSupported here) and cudaFreeHost.
 * Preloaded, cudaHostAlloc and cudaMallocHost come here themselves. */
CUDALLOC_API cudaError_t cudalloc_host_alloc(void **ptr, size_t size, unsigned flags);
CUDALLOC_API cudaError_t cudalloc_host_free(void *ptr);

/* Gives every cached (unallocated) physical page back to the backend. It
 * first waits for the device work that frees made before the call still
 * wait for (as PyTorch's empty_cache does), so that their memory goes back
 * too; never while a graph capture is underway. Every idle chunk of
 * pinned host memory goes back as well. */
CUDALLOC_API cudaError_t cudalloc_empty_cache(void);

/* 1 when ptr lies inside memory managed by cudalloc, else 0. */
CUDALLOC_API int cudalloc_owns(const void *ptr);

/* The live block containing ptr, as the program asked for it (base and
 * requested size). cudaErrorInvalidValue when ptr is not inside one. */
CUDALLOC_API cudaError_t cudalloc_get_address_range(const void *ptr, void **base, size_t *size);

/* Marks the end of a training step: records the events of cudaFree's
 * pending frees and returns completed frees to the cache, so that
 * statistics read next describe the step's settled state. Blocks freed on
 * a stream stay with it (it reuses them with no event); an allocation
 * that needs them elsewhere records their events then. */
CUDALLOC_API void cudalloc_step(void);

/* The event log (CUDALLOC_CONF=trace:PATH; docs/trace.md). With
 * trace_ring:N, writes the last N events to path (NULL: the trace path)
 * as a complete log, and recording goes on. Without a ring, path must be
 * NULL: every event recorded so far is written to the log now.
 * cudaErrorInitializationError when no log is being recorded,
 * cudaErrorInvalidValue for a path in full mode, cudaErrorUnknown when the
 * file could not be written. */
CUDALLOC_API cudaError_t cudalloc_trace_dump(const char *path);

// ----------------------------------------------------------------------------
// Statistics and checks
// ----------------------------------------------------------------------------

/* One statistic: current value, highest value seen, and running total of
 * increases (total allocations, for instance). */
typedef struct cudalloc_stat_s {
  int64_t current;
  int64_t peak;
  int64_t total;
} cudalloc_stat_t;

/* Every counter listed once; X(name, comment). */
#define CUDALLOC_STAT_BYTES(X)                                                           \
  X(allocated_bytes, "bytes in live blocks, as rounded by the allocator")                \
  X(requested_bytes, "bytes the program asked for in live blocks")                       \
  X(reserved_bytes, "physical bytes held from the driver (mapped, or kept unmapped in the page cache)") \
  X(mapped_bytes, "physical bytes mapped into the allocator's address ranges")           \
  X(active_bytes, "bytes in live blocks plus freed blocks still awaiting device work")    \
  X(cached_bytes, "reserved bytes not in live blocks: reusable without a driver call")

#define CUDALLOC_STAT_COUNTS(X)                                                          \
  X(num_allocs, "successful allocations")                                                \
  X(num_frees, "successful frees")                                                       \
  X(num_segments, "segments (classic mode) or address regions (expandable mode)")       \
  X(num_live_blocks, "live blocks")                                                      \
  X(num_retries, "allocations that needed the slow path (poll, wait, trim, move)")       \
  X(num_ooms, "allocations that failed with out-of-memory")                             \
  X(num_page_moves, "physical pages unmapped from a free hole and mapped where needed") \
  X(num_waits, "times the allocator blocked waiting for device work")                   \
  X(num_bad_frees, "frees of pointers that were not live blocks")                       \
  X(backend_reserve, "virtual address reservations")                                     \
  X(backend_va_free, "virtual address releases")                                         \
  X(backend_create, "physical handle creations")                                         \
  X(backend_release, "physical handle releases")                                         \
  X(backend_map, "map calls")                                                            \
  X(backend_unmap, "unmap calls")                                                        \
  X(backend_set_access, "set-access calls")                                              \
  X(backend_event_record, "events recorded")                                             \
  X(backend_event_query, "events polled")                                                \
  X(backend_sync, "blocking waits (event, stream or device synchronize)")

typedef struct cudalloc_stats_s {
#define CUDALLOC_STAT_FIELD(name, doc) cudalloc_stat_t name;
  CUDALLOC_STAT_BYTES(CUDALLOC_STAT_FIELD)
  CUDALLOC_STAT_COUNTS(CUDALLOC_STAT_FIELD)
#undef CUDALLOC_STAT_FIELD
  uint64_t largest_free_bytes;  /* largest block allocatable without a driver call */
  double fragmentation;         /* 1 - peak allocated / peak reserved */
} cudalloc_stats_t;

/* Pinned host memory (cudaMallocHost, cudaHostAlloc, cuMemHostAlloc, ...),
 * cached by cudalloc for the whole process. */
#define CUDALLOC_STAT_PINNED_BYTES(X)                                                    \
  X(pinned_allocated_bytes, "pinned bytes in live blocks, as the pinned arena sized them") \
  X(pinned_requested_bytes, "pinned bytes the program asked for in live blocks")         \
  X(pinned_reserved_bytes, "pinned bytes held from the driver (chunks)")                 \
  X(pinned_cached_bytes, "reserved pinned bytes not in live blocks: reusable without a driver call") \
  X(pinned_waiting_bytes, "freed pinned blocks not reused until their async copies complete")

#define CUDALLOC_STAT_PINNED_COUNTS(X)                                                   \
  X(pinned_num_allocs, "successful pinned allocations")                                  \
  X(pinned_num_frees, "successful pinned frees")                                         \
  X(pinned_num_live_blocks, "live pinned blocks")                                        \
  X(pinned_num_bad_frees, "frees of pointers inside pinned chunks that were not live blocks") \
  X(pinned_num_ooms, "pinned allocations that failed with out-of-memory")                \
  X(pinned_copies_tracked, "events recorded after async copies that touch pinned blocks") \
  X(pinned_backend_alloc, "chunks pinned (driver calls)")                                \
  X(pinned_backend_free, "chunks given back to the driver")

typedef struct cudalloc_pinned_stats_s {
#define CUDALLOC_STAT_FIELD(name, doc) cudalloc_stat_t name;
  CUDALLOC_STAT_PINNED_BYTES(CUDALLOC_STAT_FIELD)
  CUDALLOC_STAT_PINNED_COUNTS(CUDALLOC_STAT_FIELD)
#undef CUDALLOC_STAT_FIELD
} cudalloc_pinned_stats_t;

/* Statistics of the pinned host-memory cache. */
CUDALLOC_API cudaError_t cudalloc_get_pinned_stats(cudalloc_pinned_stats_t *out);

/* Statistics of one device (device -1: the current device). */
CUDALLOC_API cudaError_t cudalloc_get_stats(int device, cudalloc_stats_t *out);

/* Resets the peaks of every device, and of pinned memory, to the current values. */
CUDALLOC_API void cudalloc_reset_peaks(void);

/* A table in the spirit of torch.cuda.memory_summary(), every device. */
CUDALLOC_API void cudalloc_print_stats(FILE *f);

/* Walks every pool and verifies the allocator's invariants. Returns 0 when
 * consistent, otherwise a non-zero code and one line on stderr naming the
 * broken invariant. */
CUDALLOC_API int cudalloc_check(void);

/* Writes the reports (leaks, summary) to f; NULL writes them to the paths
 * the configuration names. */
CUDALLOC_API void cudalloc_report(FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* CUDALLOC_H */
