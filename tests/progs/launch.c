/* A kernel launch on the simulated device, which cannot run device code:
 * every launch entry point fails with "no kernel image for the device"
 * (cudaErrorNoKernelImageForDevice, CUDA_ERROR_NO_BINARY_FOR_GPU: both 209),
 * left for cudaGetLastError, and cudalloc says why once on stderr. Only
 * meaningful there: on a GPU the "kernel" below is not one. */
#include "progs.h"

#include <cuda.h>

typedef cudaError_t (*rt_launch_t)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef CUresult (*drv_launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, CUstream, void **, void **);
typedef CUresult (*proc_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void not_a_kernel(void) {}

int main(void) {
  if (!on_simulated_device()) {
    printf("launch: skipped (the simulated device's answer)\n");
    return 0;
  }
  dim3 one = {1, 1, 1};
  const cudaError_t none = cudaErrorNoKernelImageForDevice;
  CUDA_EXPECT(cudaLaunchKernel((const void *)&not_a_kernel, one, one, NULL, 0, 0), none);
  CUDA_EXPECT(cudaGetLastError(), none);
  CUDA_EXPECT(cudaGetLastError(), cudaSuccess);
  CUDA_EXPECT(cudaLaunchKernel((const void *)&not_a_kernel, one, one, NULL, 0, 0), none);

  rt_launch_t ptsz;
  *(void **)&ptsz = dlsym(RTLD_DEFAULT, "cudaLaunchKernel_ptsz");
  CHECK(served_by_cudalloc((void *)ptsz));
  CUDA_EXPECT(ptsz((const void *)&not_a_kernel, one, one, NULL, 0, 0), none);

  drv_launch_t drv;
  *(void **)&drv = dlsym(RTLD_DEFAULT, "cuLaunchKernel");
  CHECK(served_by_cudalloc((void *)drv));
  CHECK(drv(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) == CUDA_ERROR_NO_BINARY_FOR_GPU);
  /* what the runtime is given when it asks the driver for its launcher */
  proc_t proc;
  *(void **)&proc = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
  CHECK(proc != NULL);
  void *fn = NULL;
  CHECK(proc("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL) == CUDA_SUCCESS);
  CHECK(fn == (void *)drv);
  CHECK(proc("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == CUDA_SUCCESS);
  CHECK(served_by_cudalloc(fn) && fn != (void *)drv);
  printf("launch: ok\n");
  return 0;
}
