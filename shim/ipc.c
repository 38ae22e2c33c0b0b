/* IPC export: cudaIpcGetMemHandle and cuIpcGetMemHandle.
 *
 * A cudalloc block is a piece of a virtual memory API mapping (cuMemMap of
 * cuMemCreate pages), which CUDA IPC cannot export; and a handle to the
 * block's pages would hand the other process whatever else cudalloc keeps
 * in them. So cudalloc's memory is refused with cudaErrorNotSupported
 * (CUDA_ERROR_NOT_SUPPORTED) and one line that names the reason, and the
 * handle is left untouched. Memory cudalloc does not own goes to the real
 * library, which answers as it would without cudalloc.
 */
#include "shim.h"
#include "log.h"

#include <stdint.h>

static void refused(const char *call, const void *ptr) {
  ca_log_once("%s(%p): cudalloc's memory cannot be exported with CUDA IPC (it is mapped with the "
              "virtual memory API); allocate what other processes must open outside cudalloc",
              call, ptr);
}

CA_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
  CA_ENTER(CA_REAL_RT(cudaIpcGetMemHandle, handle, ptr));
  if (!handle) return ca_rt_error(cudaErrorInvalidValue);
  if (!ca_owns(ptr)) return CA_PASS_RT(cudaErrorInvalidValue, cudaIpcGetMemHandle, handle, ptr);
  refused("cudaIpcGetMemHandle", ptr);
  return ca_rt_error(cudaErrorNotSupported);
}

CA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
  CA_ENTER(CA_REAL_DRV(cuIpcGetMemHandle, handle, dptr));
  void *ptr = (void *)(uintptr_t)dptr;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (!ca_owns(ptr)) return CA_PASS_DRV(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle, handle, dptr);
  refused("cuIpcGetMemHandle", ptr);
  return CUDA_ERROR_NOT_SUPPORTED;
}
