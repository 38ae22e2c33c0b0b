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

/* Allocation on the calling thread's current device. caller is the call
 * site recorded for leak reports (a return address, or NULL). */
CUresult ca_malloc(void **ptr, size_t size, ca_stream_t stream, void *caller);
/* The same on device dev (-1: the current device). */
CUresult ca_malloc_on(int dev, void **ptr, size_t size, ca_stream_t stream, void *caller);

/* Frees ptr, freed in the order of stream: reusable at once on stream,
 * elsewhere when the stream's earlier work has completed.
 * Both frees return CUDA_ERROR_NOT_FOUND, silently, when ptr lies outside
 * every range cudalloc manages (the shim then hands it to the real free),
 * and CUDA_ERROR_INVALID_VALUE, with one line on stderr, for a pointer
 * inside cudalloc's memory that is not a live block (double free, interior
 * pointer). NULL is a successful no-op. */
CUresult ca_free(void *ptr, ca_stream_t stream);
/* Frees ptr with cudaFree's promise: reusable only when all device work
 * issued before the call has completed (free_mode:stream relaxes this to
 * the block's allocation stream). */
CUresult ca_free_sync(void *ptr);

/* true when ptr lies inside an address range cudalloc manages. */
bool ca_owns(const void *ptr);
/* The live block containing ptr: its base and requested size. */
CUresult ca_address_range(const void *ptr, void **base, size_t *size);

/* Streams the program created, so that cudaFree's fence covers them.
 * Non-blocking streams (and per-thread default streams) are fenced with an
 * event of their own; blocking ones through the legacy default stream. */
void ca_stream_created(ca_stream_t stream, bool nonblocking);
void ca_stream_destroyed(ca_stream_t stream);

/* Graph capture begins or ends on some stream: while any capture is
 * underway the allocator never blocks and never records events; frees are
 * held back until the last capture ends. */
void ca_capture_begin(void);
void ca_capture_end(void);
/* true when stream is being captured into a graph (allocations on it must
 * then reach the driver as graph memory nodes). Cheap while no capture is
 * underway: the core counts them. */
bool ca_stream_capturing(ca_stream_t stream);

/* Free memory as a program should see it: the driver's free memory plus
 * what cudalloc holds but could give back, never above the total. */
CUresult ca_mem_get_info(int dev, size_t *free_bytes, size_t *total_bytes);

/* Drops every pool of dev (cudaDeviceReset): live blocks are forgotten. */
CUresult ca_device_reset(int dev);

/* In a fork() child: forget all state without touching the device. */
void ca_fork_child(void);

/* The cudaError_t that a CUDA runtime user expects for a core error. */
cudaError_t ca_cuda_error(CUresult err);

#endif /* CUDALLOC_CORE_H */
