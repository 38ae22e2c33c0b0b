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

/* Makes dev current for the allocation; returns the device to restore
 * afterwards, or -1 when nothing changed. */
static int switch_device(const ca_backend_t *be, int dev, bool *ok) {
  int cur = -1;
  *ok = true;
  if (be->get_device(&cur) == CUDA_SUCCESS && cur == dev) return -1;
  *ok = be->set_device(dev) == CUDA_SUCCESS;
  return *ok ? cur : -1;
}

CA_EXPORT void *cudalloc_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  if (size < 0 || !ca_shim_start()) return NULL;
  const ca_backend_t *be = ca_backend();
  bool ok;
  int prev = switch_device(be, device, &ok);
  void *ptr = NULL;
  if (ok && ca_malloc(&ptr, (size_t)size, stream, CA_CALLER) != CUDA_SUCCESS) ptr = NULL;
  if (prev >= 0) be->set_device(prev);
  return ptr;
}

/* The block's device is the core's to know; the size is its own. */
CA_EXPORT void cudalloc_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size;
  (void)device;
  if (ca_shim_start()) ca_free(ptr, stream);
}
