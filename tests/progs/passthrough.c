/* A device cudalloc does not serve: run under the preload with
 * backend:cuda and the fake driver (tests/fake/libcuda.c) started with
 * FAKE_CUDA_NO_VMM=1, the core refuses the device (no virtual memory
 * management), and the driver-API allocation goes to the driver's own
 * allocator, whose FAKE_PTR tells its memory apart; the free follows it.
 *
 *   passthrough <driver>         the driver library to open
 *   passthrough <driver> torch   PyTorch's entry points instead, then a
 *                                free of a pointer nobody allocated
 */
#include "driver_procs.h"

typedef void *(*torch_malloc_t)(ssize_t, int, cudaStream_t);
typedef void (*torch_free_t)(void *, ssize_t, int, cudaStream_t);

static void torch_entries(void) {
  torch_malloc_t tmalloc;
  torch_free_t tfree;
  *(void **)&tmalloc = dlsym(RTLD_DEFAULT, "cudalloc_torch_malloc");
  *(void **)&tfree = dlsym(RTLD_DEFAULT, "cudalloc_torch_free");
  CHECK(tmalloc && tfree);
  void *p = tmalloc(1 << 20, 0, NULL);
  CHECK(p == (void *)FAKE_PTR);   /* the driver's memory, not NULL */
  tfree(p, 1 << 20, 0, NULL);
  tfree((void *)0x1234000, 4096, 0, NULL);   /* the driver refuses it: one line */
}

int main(int argc, char **argv) {
  open_driver(argc > 1 ? argv[1] : NULL);
  CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 12000);
  CUresult (*release)(CUdeviceptr) = proc("cuMemFree", 12000);
  CHECK(alloc && release);
  make_primary_current();
  if (argc > 2 && !strcmp(argv[2], "torch")) {
    torch_entries();
    puts("passthrough: ok");
    return 0;
  }
  CHECK(served_by_cudalloc((void *)alloc));   /* cudalloc's entry point... */
  CUdeviceptr d = 0;
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS);
  CHECK(d == FAKE_PTR);                        /* ...but the driver's memory */
  CHECK(release(d) == CUDA_SUCCESS);
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS && d == FAKE_PTR);   /* and again, without a second word */
  CHECK(release(d) == CUDA_SUCCESS);
  puts("passthrough: ok");
  return 0;
}
