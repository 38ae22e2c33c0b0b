/* PyTorch's pluggable allocator interface:
 *
 *   torch.cuda.memory.CUDAPluggableAllocator("libcudalloc.so",
 *       "cudalloc_torch_malloc", "cudalloc_torch_free")
 *
 * PyTorch asks for memory on a given device and stream, and frees it on the
 * stream it was allocated on. Its contract lets a tensor be used on other
 * streams too when marked with Tensor.record_stream(), which PyTorch does
 * not forward to a pluggable allocator from Python: the free cannot know
 * those streams, so by default it keeps cudaFree's promise (ca_free_torch;
 * torch_free:stream opts into reuse at once on the stream).
 *
 * Errors cannot be returned: a failed allocation is NULL. PyTorch's
 * CUDAPluggableAllocator::malloc does not check it (torch/csrc/cuda/
 * CUDAPluggableAllocator.cpp): the tensor gets data pointer 0 and no
 * torch.OutOfMemoryError is raised, so cudalloc says so on stderr, beside
 * its out-of-memory report.
 *
 * A device cudalloc does not serve (no virtual memory management, or the
 * program's own context current) gets the driver's own cuMemAlloc in the
 * current context, as the program would without cudalloc, and its blocks
 * go back through cuMemFree, whose implicit synchronization keeps any
 * stream's work safe. PyTorch makes the device current before it asks.
 */
#include "shim.h"
#include "log.h"

#include <stdint.h>
#include <sys/types.h>

CA_EXPORT void *cudalloc_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  void *ptr = NULL;
  if (size < 0 || !ca_shim_start()) return NULL;
  CUresult rc = ca_malloc_torch(device, &ptr, (size_t)size, stream, CA_CALLER);
  if (rc == CA_NOT_SERVED) {
    CUdeviceptr dptr = 0;
    rc = CA_PASS_DRV(CUDA_ERROR_NOT_SUPPORTED, cuMemAlloc_v2, &dptr, (size_t)size);
    ptr = (void *)(uintptr_t)dptr;
  }
  if (rc != CUDA_SUCCESS) {
    ca_log("cudalloc_torch_malloc: %zd bytes on device %d failed (error %d); PyTorch does not check the "
           "NULL returned: the tensor gets address 0 and its first use faults",
           size, device, (int)rc);
    ptr = NULL;
  }
  return ptr;
}

/* The block's device is the core's to know; the size is its own. */
CA_EXPORT void cudalloc_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size;
  (void)device;
  if (!ca_shim_start() || ca_free_torch(ptr, stream) != CUDA_ERROR_NOT_FOUND) return;
  CUresult rc = CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2, (CUdeviceptr)(uintptr_t)ptr);
  if (rc != CUDA_SUCCESS)
    ca_log("cudalloc_torch_free: %p is neither cudalloc's nor the driver's (error %d); nothing was freed", ptr,
           (int)rc);
}
