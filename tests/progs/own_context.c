/* A driver-API program with a context of its own (cuCtxCreate), run under
 * the preload with CUDALLOC_CONF=backend:cuda on the fake driver
 * (tests/fake/libcuda.c, which answers its own cuMemAlloc family with one
 * recognizable address). cudalloc does not serve a context that is not the
 * device's primary one (its fences live in the primary context, which does
 * not order this context's work): the allocations reach the driver. In the
 * primary context, cudalloc serves them.
 *
 *   own_context <fake libcuda.so.1>
 */
#include "driver_procs.h"

int main(int argc, char **argv) {
  open_driver(argc > 1 ? argv[1] : NULL);
  CUresult (*init)(unsigned) = proc("cuInit", 2000);
  CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice) = proc("cuCtxCreate", 3020);
  CUresult (*ctx_destroy)(CUcontext) = proc("cuCtxDestroy", 4000);
  CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 12000);
  CUresult (*release)(CUdeviceptr) = proc("cuMemFree", 12000);
  CHECK(init && ctx_create && ctx_destroy && alloc && release);
  CHECK(served_by_cudalloc((void *)alloc));
  CHECK(init(0) == CUDA_SUCCESS);

  CUcontext mine;
  CUdeviceptr d = 0;
  CHECK(ctx_create(&mine, 0, 0) == CUDA_SUCCESS);
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS);
  CHECK(d == FAKE_PTR);                    /* the driver's answer, not cudalloc's */
  CHECK(release(d) == CUDA_SUCCESS);       /* and its free goes there too */
  CHECK(ctx_destroy(mine) == CUDA_SUCCESS);

  /* No context current: the runtime's rule, device 0's primary context. */
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS);
  CHECK(d != FAKE_PTR && owned_by_cudalloc((void *)d));
  CHECK(release(d) == CUDA_SUCCESS);
  printf("own_context: ok\n");
  return 0;
}
