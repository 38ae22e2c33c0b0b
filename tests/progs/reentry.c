/* A call back into cudalloc from inside a call it passed through, as the
 * real runtime makes one: run under the preload with backend:cuda and the
 * fake driver. The fake is given the cuMemAlloc and cuMemFree that
 * cuGetProcAddress handed out (cudalloc's), as the runtime holds them;
 * cuMemGetAddressRange_v2 of an address nobody allocated goes through
 * cudalloc to the driver, which then allocates through them: the re-entry
 * guard must send that inner call to the driver (FAKE_PTR), not to the
 * core (an address of cudalloc's own).
 *
 *   reentry <driver>
 */
#include "driver_procs.h"

int main(int argc, char **argv) {
  CHECK(argc > 1);
  open_driver(argv[1]);
  void *driver = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  CHECK(driver != NULL);
  CUdeviceptr *inner = dlsym(driver, "fake_cuda_reentered_ptr");
  void **inner_alloc = dlsym(driver, "fake_cuda_reenter_alloc");
  void **inner_free = dlsym(driver, "fake_cuda_reenter_free");
  CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 12000);
  CUresult (*release)(CUdeviceptr) = proc("cuMemFree", 12000);
  CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = proc("cuMemGetAddressRange", 3020);
  CHECK(inner && inner_alloc && inner_free && alloc && release && range);
  make_primary_current();
  /* The outer call alone is served by cudalloc: an address of its own. */
  CUdeviceptr d = 0;
  CHECK(served_by_cudalloc((void *)alloc) && served_by_cudalloc((void *)range));
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS && d != 0 && d != FAKE_PTR);
  CHECK(release(d) == CUDA_SUCCESS);
  *inner_alloc = (void *)alloc;
  *inner_free = (void *)release;
  CUdeviceptr base;
  size_t size;
  CHECK(range(&base, &size, (CUdeviceptr)0x1234000) == CUDA_ERROR_NOT_FOUND);   /* passed through */
  CHECK(*inner != 0);          /* the driver called back... */
  CHECK(*inner == FAKE_PTR);   /* ...and the inner cuMemAlloc_v2 reached the driver */
  puts("reentry: ok");
  return 0;
}
