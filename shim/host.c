/* Pinned host memory, served by the core's pinned cache on every backend:
 * cudaMallocHost, cudaHostAlloc, cudaFreeHost, and the driver's
 * cuMemAllocHost_v2, cuMemHostAlloc, cuMemFreeHost. And the async copies,
 * which the cache must see so as not to reuse a block a copy still reads
 * or writes.
 *
 * Flags the cache does not serve (write-combined) go to the real call, and
 * so does the free of a pointer the cache did not hand out: the real
 * runtime answers. On the simulated device there is nothing to pass them
 * to: write-combined memory is cudaErrorNotSupported there, and a foreign
 * pointer cudaErrorInvalidValue, as the runtime says of a pointer it does
 * not know.
 */
#include "shim.h"
#include "sim/sim_runtime.h"

// ----------------------------------------------------------------------------
// Runtime API
// ----------------------------------------------------------------------------

/* size 0 succeeds with NULL, as cudaMalloc does. */
static cudaError_t host_alloc(void **ptr, size_t size, unsigned flags, void *caller) {
  CUresult rc = ca_host_alloc(ptr, size, flags, caller);
  if (rc == CUDA_ERROR_NOT_SUPPORTED) return CA_PASS_RT(cudaErrorNotSupported, cudaHostAlloc, ptr, size, flags);
  return ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size) {
  CA_ENTER(CA_REAL_RT(cudaMallocHost, ptr, size));
  return host_alloc(ptr, size, cudaHostAllocDefault, CA_CALLER);
}

CA_EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned flags) {
  CA_ENTER(CA_REAL_RT(cudaHostAlloc, ptr, size, flags));
  return host_alloc(ptr, size, flags, CA_CALLER);
}

CA_EXPORT cudaError_t cudaFreeHost(void *ptr) {
  CA_ENTER(CA_REAL_RT(cudaFreeHost, ptr));
  CUresult rc = ca_host_free(ptr);
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_RT(cudaErrorInvalidValue, cudaFreeHost, ptr);
  return ca_rt_result(rc);
}

// ----------------------------------------------------------------------------
// Driver API: a NULL result pointer or a size of 0 is CUDA_ERROR_INVALID_VALUE
// ----------------------------------------------------------------------------

static CUresult drv_host_alloc(void **ptr, size_t size, unsigned flags, void *caller) {
  if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ca_host_alloc(ptr, size, flags, caller);
  if (rc == CUDA_ERROR_NOT_SUPPORTED) return CA_PASS_DRV(CUDA_ERROR_NOT_SUPPORTED, cuMemHostAlloc, ptr, size, flags);
  return rc;
}

CA_EXPORT CUresult cuMemAllocHost_v2(void **ptr, size_t size) {
  CA_ENTER(CA_REAL_DRV(cuMemAllocHost_v2, ptr, size));
  return drv_host_alloc(ptr, size, 0, CA_CALLER);
}

CA_EXPORT CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned flags) {
  CA_ENTER(CA_REAL_DRV(cuMemHostAlloc, ptr, size, flags));
  return drv_host_alloc(ptr, size, flags, CA_CALLER);
}

CA_EXPORT CUresult cuMemFreeHost(void *ptr) {
  CA_ENTER(CA_REAL_DRV(cuMemFreeHost, ptr));
  CUresult rc = ptr ? ca_host_free(ptr) : CUDA_ERROR_NOT_FOUND;
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost, ptr);
  return rc;
}

// ----------------------------------------------------------------------------
// Async copies: the simulated device copies at once; a GPU queues the copy
// ----------------------------------------------------------------------------

static cudaError_t copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, ca_stream_t stream,
                              cudaError_t real, void *site) {
  cudaError_t err = ca_shim_sim() ? ca_sim_rt_copy_async(stream, dst, src, n, kind, site) : real;
  if (err == cudaSuccess) ca_host_copy_issued(dst, src, n, stream);
  return err;
}

CA_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMemcpyAsync, dst, src, n, kind, stream));
  ca_stream_used(stream);   /* before the copy is issued */
  cudaError_t real = ca_shim_sim() ? cudaSuccess : CA_REAL_RT(cudaMemcpyAsync, dst, src, n, kind, stream);
  return copy_async(dst, src, n, kind, stream, real, CA_CALLER);
}

CA_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMemcpyAsync_ptsz, dst, src, n, kind, stream));
  ca_stream_used(ca_ptsz(stream));   /* before the copy is issued */
  cudaError_t real = ca_shim_sim() ? cudaSuccess : CA_REAL_RT(cudaMemcpyAsync_ptsz, dst, src, n, kind, stream);
  return copy_async(dst, src, n, kind, ca_ptsz(stream), real, CA_CALLER);
}
