/* IPC export of cudalloc memory: cudalloc's blocks are pieces of virtual
 * memory API mappings, which cudaIpcGetMemHandle cannot export (and a
 * handle for the block's pages would give the other process whatever else
 * lies in them). Both APIs refuse with cudaErrorNotSupported /
 * CUDA_ERROR_NOT_SUPPORTED and one line on stderr, leaving the handle
 * untouched; a pointer cudalloc does not own goes to the real runtime
 * (driver), or on the simulated device gets the answer for an unknown
 * pointer (cudaErrorInvalidValue). */
#include "progs.h"

#include <cuda.h>
#include <stdint.h>

typedef CUresult (*cu_ipc_get_t)(CUipcMemHandle *, CUdeviceptr);

static int untouched(const void *h, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)h)[i] != 0x5a) return 0;
  return 1;
}

int main(void) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, 1 << 20));
  CHECK(owned_by_cudalloc(p));
  cudaIpcMemHandle_t h;
  memset(&h, 0x5a, sizeof h);
  CUDA_EXPECT(cudaIpcGetMemHandle(&h, p), cudaErrorNotSupported);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorNotSupported);
  CHECK(untouched(&h, sizeof h));
  CUDA_EXPECT(cudaIpcGetMemHandle(&h, (char *)p + 4096), cudaErrorNotSupported);   /* interior */
  CUDA_EXPECT(cudaIpcGetMemHandle(NULL, p), cudaErrorInvalidValue);

  cu_ipc_get_t get;
  *(void **)&get = dlsym(RTLD_DEFAULT, "cuIpcGetMemHandle");
  CHECK(served_by_cudalloc((void *)get));
  CUipcMemHandle dh;
  memset(&dh, 0x5a, sizeof dh);
  CHECK(get(&dh, (CUdeviceptr)(uintptr_t)p) == CUDA_ERROR_NOT_SUPPORTED);
  CHECK(untouched(&dh, sizeof dh));

  /* not cudalloc's: the real library answers (none on the simulated device) */
  static char host[64];
  cudaError_t e = cudaIpcGetMemHandle(&h, host);
  CHECK(e != cudaSuccess && e != cudaErrorNotSupported);
  (void)cudaGetLastError();
  if (on_simulated_device()) CHECK(e == cudaErrorInvalidValue);
  CUDA_OK(cudaFree(p));
  printf("ipc: ok\n");
  return 0;
}
