/* PyTorch's pluggable allocator interface:
 *
 *   torch.cuda.memory.CUDAPluggableAllocator("libcudalloc.so",
 *       "cudalloc_torch_malloc", "cudalloc_torch_free")
 *
 * PyTorch asks for memory on a given device and stream, and frees it on the
 * stream it was allocated on (its contract: a block is used on its
 * allocation stream, or marked with record_stream). Errors cannot be
 * returned: a failed allocation is NULL, which PyTorch reports as
 * out-of-memory.
 */
#include "shim.h"

#include <sys/types.h>

CA_EXPORT void *cudalloc_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  void *ptr = NULL;
  if (size < 0 || !ca_shim_start()) return NULL;
  if (ca_malloc_on(device, &ptr, (size_t)size, stream, CA_ALLOC_ASYNC, CA_CALLER) != CUDA_SUCCESS) ptr = NULL;
  return ptr;
}

/* The block's device is the core's to know; the size is its own. */
CA_EXPORT void cudalloc_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size;
  (void)device;
  if (ca_shim_start()) ca_free(ptr, stream);
}
