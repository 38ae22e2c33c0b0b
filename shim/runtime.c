/* Runtime API memory calls, served by the allocator core.
 *
 * Error codes are the ones the CUDA documentation gives: a NULL result
 * pointer is cudaErrorInvalidValue; size 0 succeeds with a NULL pointer;
 * cudaFree(NULL) succeeds; a double free or an interior pointer of a
 * cudalloc block is cudaErrorInvalidValue; a size nothing can hold is
 * cudaErrorMemoryAllocation; a bad stream handle is
 * cudaErrorInvalidResourceHandle. A pointer cudalloc did not allocate goes
 * to the real runtime, which answers with its own result, and so does an
 * allocation in a context cudalloc does not serve (a program's own
 * cuCtxCreate current: the core answers CUDA_ERROR_NOT_SUPPORTED).
 */
#include "shim.h"


// ----------------------------------------------------------------------------
// Allocation
// ----------------------------------------------------------------------------

/* The core's answer rc (a variable); CA_NOT_SERVED (a context or device
 * cudalloc does not serve) sends the call to the real runtime. */
#define RT_SERVED(rc, name, ...) \
  ((rc) == CA_NOT_SERVED ? CA_PASS_RT(cudaErrorNotSupported, name, __VA_ARGS__) : ca_rt_result(rc))

CA_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  CA_ENTER(CA_REAL_RT(cudaMalloc, ptr, size));
  if (!ptr) return ca_rt_error(cudaErrorInvalidValue);
  CUresult rc = ca_malloc(ptr, size, NULL, CA_ALLOC_SYNC, CA_CALLER);
  return RT_SERVED(rc, cudaMalloc, ptr, size);
}

/* Stream-ordered allocation; on a capturing stream the driver records a
 * graph memory node instead. */
CA_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMallocAsync, ptr, size, stream));
  if (ca_stream_capturing(stream))
    return CA_PASS_RT(cudaErrorStreamCaptureUnsupported, cudaMallocAsync, ptr, size, stream);
  if (!ptr) return ca_rt_error(cudaErrorInvalidValue);
  CUresult rc = ca_malloc(ptr, size, stream, CA_ALLOC_ASYNC, CA_CALLER);
  return RT_SERVED(rc, cudaMallocAsync, ptr, size, stream);
}

CA_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMallocAsync_ptsz, ptr, size, stream));
  if (ca_stream_capturing(ca_ptsz(stream)))
    return CA_PASS_RT(cudaErrorStreamCaptureUnsupported, cudaMallocAsync_ptsz, ptr, size, stream);
  if (!ptr) return ca_rt_error(cudaErrorInvalidValue);
  CUresult rc = ca_malloc(ptr, size, ca_ptsz(stream), CA_ALLOC_ASYNC, CA_CALLER);
  return RT_SERVED(rc, cudaMallocAsync_ptsz, ptr, size, stream);
}

CA_EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  CA_ENTER(CA_REAL_RT(cudaMallocPitch, ptr, pitch, width, height));
  if (!ptr || !pitch) return ca_rt_error(cudaErrorInvalidValue);
  size_t p = ca_pitch_of(width);
  CUresult rc = ca_malloc(ptr, ca_pitched_size(p, height, 1), NULL, CA_ALLOC_SYNC, CA_CALLER);
  if (rc == CUDA_SUCCESS) *pitch = p;
  return RT_SERVED(rc, cudaMallocPitch, ptr, pitch, width, height);
}

CA_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *out, struct cudaExtent extent) {
  CA_ENTER(CA_REAL_RT(cudaMalloc3D, out, extent));
  if (!out) return ca_rt_error(cudaErrorInvalidValue);
  size_t p = ca_pitch_of(extent.width);
  void *ptr = NULL;
  CUresult rc = ca_malloc(&ptr, ca_pitched_size(p, extent.height, extent.depth), NULL, CA_ALLOC_SYNC, CA_CALLER);
  if (rc == CA_NOT_SERVED) return RT_SERVED(rc, cudaMalloc3D, out, extent);
  cudaError_t err = ca_rt_result(rc);
  if (err == cudaSuccess)
    *out = (struct cudaPitchedPtr){.ptr = ptr, .pitch = p, .xsize = extent.width, .ysize = extent.height};
  return err;
}

// ----------------------------------------------------------------------------
// Free
// ----------------------------------------------------------------------------

/* cudaFree's promise (no reuse before the device work issued so far has
 * completed) is ca_free_sync's. cudaFree(NULL) goes to the real runtime
 * too: programs call cudaFree(0) to start the runtime. */
CA_EXPORT cudaError_t cudaFree(void *ptr) {
  CA_ENTER(CA_REAL_RT(cudaFree, ptr));
  if (!ptr) return CA_PASS_RT(cudaSuccess, cudaFree, ptr);
  CUresult rc = ca_free_sync(ptr);
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_RT(cudaErrorInvalidValue, cudaFree, ptr);
  return ca_rt_result(rc);
}

/* Stream-ordered free; a pointer from a graph memory node (or any other
 * not cudalloc's) goes to the real runtime. */
CA_EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaFreeAsync, ptr, stream));
  CUresult rc = ca_free(ptr, stream);
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_RT(cudaErrorInvalidValue, cudaFreeAsync, ptr, stream);
  return ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaFreeAsync_ptsz, ptr, stream));
  CUresult rc = ca_free(ptr, ca_ptsz(stream));
  if (rc == CUDA_ERROR_NOT_FOUND)
    return CA_PASS_RT(cudaErrorInvalidValue, cudaFreeAsync_ptsz, ptr, stream);
  return ca_rt_result(rc);
}

// ----------------------------------------------------------------------------
// Device-wide
// ----------------------------------------------------------------------------

/* Free memory as the program should see it: the driver's free memory plus
 * what cudalloc caches and could give back, never above the total. */
CA_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  CA_ENTER(CA_REAL_RT(cudaMemGetInfo, free_bytes, total_bytes));
  if (!free_bytes || !total_bytes) return ca_rt_error(cudaErrorInvalidValue);
  return ca_rt_result(ca_mem_get_info(ca_device_current(), free_bytes, total_bytes));
}

/* The device's pools go first, while its context still exists; then the
 * real reset destroys the context. */
CA_EXPORT cudaError_t cudaDeviceReset(void) {
  CA_ENTER(CA_REAL_RT(cudaDeviceReset));
  cudaError_t err = ca_rt_result(ca_device_reset(ca_device_current()));
  if (err != cudaSuccess) return err;
  return ca_shim_sim() ? cudaSuccess : CA_REAL_RT(cudaDeviceReset);
}
