/* Driver API memory calls, served by the allocator core.
 *
 * They answer with the core's CUresult as it is (the core speaks the
 * driver's codes). As the driver documents it, a NULL result pointer or a
 * size of 0 is CUDA_ERROR_INVALID_VALUE. A pointer cudalloc did not
 * allocate goes to the real driver, which answers with its own result; on
 * the simulated device there is none, and the answer is the one the driver
 * gives for an address it does not know. An allocation in a context
 * cudalloc does not serve (the program's own cuCtxCreate) goes to the real
 * driver too: the core answers CUDA_ERROR_NOT_SUPPORTED.
 */
#include "shim.h"

#include <stdint.h>

static void *ptr_of(CUdeviceptr dptr) { return (void *)(uintptr_t)dptr; }

static CUresult drv_malloc(CUdeviceptr *dptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind,
                           void *caller) {
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult rc = ca_malloc(&p, size, stream, kind, caller);
  if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

/* The core's answer rc (a variable), or the real driver's where cudalloc
 * does not serve. */
#define DRV_SERVED(rc, name, ...) \
  ((rc) == CA_NOT_SERVED ? CA_PASS_DRV(CUDA_ERROR_NOT_SUPPORTED, name, __VA_ARGS__) : (rc))

// ----------------------------------------------------------------------------
// Allocation
// ----------------------------------------------------------------------------

CA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
  CA_ENTER(CA_REAL_DRV(cuMemAlloc_v2, dptr, size));
  CUresult rc = drv_malloc(dptr, size, NULL, CA_ALLOC_SYNC, CA_CALLER);
  return DRV_SERVED(rc, cuMemAlloc_v2, dptr, size);
}

/* On a capturing stream the driver records a graph memory node instead. */
CA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuMemAllocAsync, dptr, size, stream));
  if (ca_stream_capturing(stream))
    return CA_PASS_DRV(CUDA_ERROR_NOT_SUPPORTED, cuMemAllocAsync, dptr, size, stream);
  CUresult rc = drv_malloc(dptr, size, stream, CA_ALLOC_ASYNC, CA_CALLER);
  return DRV_SERVED(rc, cuMemAllocAsync, dptr, size, stream);
}

CA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuMemAllocAsync_ptsz, dptr, size, stream));
  if (ca_stream_capturing(ca_ptsz(stream)))
    return CA_PASS_DRV(CUDA_ERROR_NOT_SUPPORTED, cuMemAllocAsync_ptsz, dptr, size, stream);
  CUresult rc = drv_malloc(dptr, size, ca_ptsz(stream), CA_ALLOC_ASYNC, CA_CALLER);
  return DRV_SERVED(rc, cuMemAllocAsync_ptsz, dptr, size, stream);
}

CA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                      unsigned element_size) {
  CA_ENTER(CA_REAL_DRV(cuMemAllocPitch_v2, dptr, pitch, width, height, element_size));
  if (!pitch || !width || !height || (element_size != 4 && element_size != 8 && element_size != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t p = ca_pitch_of(width);
  CUresult rc = drv_malloc(dptr, ca_pitched_size(p, height, 1), NULL, CA_ALLOC_SYNC, CA_CALLER);
  if (rc == CUDA_SUCCESS) *pitch = p;
  return DRV_SERVED(rc, cuMemAllocPitch_v2, dptr, pitch, width, height, element_size);
}

// ----------------------------------------------------------------------------
// Free
// ----------------------------------------------------------------------------

/* cudaFree's promise, as for the runtime; 0 goes to the real driver. */
CA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CA_ENTER(CA_REAL_DRV(cuMemFree_v2, dptr));
  CUresult rc = dptr ? ca_free_sync(ptr_of(dptr)) : CUDA_ERROR_NOT_FOUND;
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2, dptr);
  return rc;
}

CA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuMemFreeAsync, dptr, stream));
  CUresult rc = ca_free(ptr_of(dptr), stream);
  if (rc == CUDA_ERROR_NOT_FOUND) return CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync, dptr, stream);
  return rc;
}

CA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuMemFreeAsync_ptsz, dptr, stream));
  CUresult rc = ca_free(ptr_of(dptr), ca_ptsz(stream));
  if (rc == CUDA_ERROR_NOT_FOUND)
    return CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync_ptsz, dptr, stream);
  return rc;
}

// ----------------------------------------------------------------------------
// Queries and reset
// ----------------------------------------------------------------------------

CA_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  CA_ENTER(CA_REAL_DRV(cuMemGetInfo_v2, free_bytes, total_bytes));
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  return ca_mem_get_info(ca_device_current(), free_bytes, total_bytes);
}

/* The block the program asked for, not the segment around it. Both result
 * pointers are optional, as the driver documents. */
CA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  CA_ENTER(CA_REAL_DRV(cuMemGetAddressRange_v2, pbase, psize, dptr));
  if (!ca_owns(ptr_of(dptr)))
    return CA_PASS_DRV(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange_v2, pbase, psize, dptr);
  void *base = NULL;
  size_t size = 0;
  CUresult rc = ca_address_range(ptr_of(dptr), &base, &size);
  if (rc == CUDA_SUCCESS && pbase) *pbase = (CUdeviceptr)(uintptr_t)base;
  if (rc == CUDA_SUCCESS && psize) *psize = size;
  return rc;
}

/* What cudaDeviceReset does underneath (and what static cudart calls):
 * the device's pools go first, while its context still exists. */
CA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  CA_ENTER(CA_REAL_DRV(cuDevicePrimaryCtxReset_v2, dev));
  CUresult rc = ca_device_reset((int)dev);
  if (rc != CUDA_SUCCESS) return rc;
  return CA_PASS_DRV(CUDA_SUCCESS, cuDevicePrimaryCtxReset_v2, dev);
}
