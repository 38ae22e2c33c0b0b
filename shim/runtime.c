/* Runtime API memory calls, served by the allocator core.
 *
 * Error codes are the ones the CUDA documentation gives: a NULL result
 * pointer is cudaErrorInvalidValue; size 0 succeeds with a NULL pointer;
 * cudaFree(NULL) succeeds; a double free or an interior pointer of a
 * cudalloc block is cudaErrorInvalidValue; a size nothing can hold is
 * cudaErrorMemoryAllocation. A pointer cudalloc did not allocate goes to
 * the real runtime, which answers with its own result.
 */
#include "shim.h"


// ----------------------------------------------------------------------------
// Allocation
// ----------------------------------------------------------------------------

CA_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  CA_ENTER(CA_REAL_RT(cudaMalloc, ptr, size));
  if (!ptr) return ca_rt_error(cudaErrorInvalidValue);
  CUresult rc = ca_malloc(ptr, size, NULL, CA_CALLER);
  if (rc == CA_NOT_SERVED) return CA_PASS_RT(cudaErrorNotSupported, cudaMalloc, ptr, size);
  return ca_rt_result(rc);
}

/* Stream-ordered allocation; on a capturing stream the driver records a
 * graph memory node instead. */
static CUresult malloc_async(void **ptr, size_t size, cudaStream_t stream, void *caller) {
  if (!ptr) return CUDA_ERROR_INVALID_VALUE;
  return ca_malloc(ptr, size, stream, caller);
}

CA_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMallocAsync, ptr, size, stream));
  if (ca_stream_capturing(stream))
    return CA_PASS_RT(cudaErrorStreamCaptureUnsupported, cudaMallocAsync, ptr, size, stream);
  CUresult rc = malloc_async(ptr, size, stream, CA_CALLER);
  if (rc == CA_NOT_SERVED) return CA_PASS_RT(cudaErrorNotSupported, cudaMallocAsync, ptr, size, stream);
  return ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaMallocAsync_ptsz, ptr, size, stream));
  if (ca_stream_capturing(ca_ptsz(stream)))
    return CA_PASS_RT(cudaErrorStreamCaptureUnsupported, cudaMallocAsync_ptsz, ptr, size, stream);
  CUresult rc = malloc_async(ptr, size, ca_ptsz(stream), CA_CALLER);
  if (rc == CA_NOT_SERVED) return CA_PASS_RT(cudaErrorNotSupported, cudaMallocAsync_ptsz, ptr, size, stream);
  return ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  CA_ENTER(CA_REAL_RT(cudaMallocPitch, ptr, pitch, width, height));
  if (!ptr || !pitch) return ca_rt_error(cudaErrorInvalidValue);
  size_t p = ca_pitch_of(width);
  CUresult rc = ca_malloc(ptr, ca_pitched_size(p, height, 1), NULL, CA_CALLER);
  if (rc == CA_NOT_SERVED) return CA_PASS_RT(cudaErrorNotSupported, cudaMallocPitch, ptr, pitch, width, height);
  cudaError_t err = ca_rt_result(rc);
  if (err == cudaSuccess) *pitch = p;
  return err;
}

CA_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *out, struct cudaExtent extent) {
  CA_ENTER(CA_REAL_RT(cudaMalloc3D, out, extent));
  if (!out) return ca_rt_error(cudaErrorInvalidValue);
  size_t p = ca_pitch_of(extent.width);
  void *ptr = NULL;
  CUresult rc = ca_malloc(&ptr, ca_pitched_size(p, extent.height, extent.depth), NULL, CA_CALLER);
  if (rc == CA_NOT_SERVED) return CA_PASS_RT(cudaErrorNotSupported, cudaMalloc3D, out, extent);
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
