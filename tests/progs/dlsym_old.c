/* A program that calls dlsym@GLIBC_2.2.5, the version that libcudart and
 * programs built against glibc < 2.34 reference: cudalloc's dlsym must
 * answer it too.
 *
 *   dlsym_old [driver]   a library that exports cuMemAlloc_v2, cuInit, ...
 *                        (default libcuda.so.1; the tests pass tests/fake's)
 */
#include "progs.h"

#if defined(__x86_64__)
void *dlsym_2_2_5(void *handle, const char *name);
__asm__(".symver dlsym_2_2_5, dlsym@GLIBC_2.2.5");
#define old_dlsym dlsym_2_2_5
#else
#define old_dlsym dlsym
#endif

int main(int argc, char **argv) {
  void *driver = dlopen(argc > 1 ? argv[1] : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(driver != NULL);
  void *mine = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  CHECK(served_by_cudalloc(mine));
  CHECK(old_dlsym(driver, "cuMemAlloc_v2") == mine);
  CHECK(served_by_cudalloc(old_dlsym(driver, "cuGetProcAddress_v2")));
  CHECK(!served_by_cudalloc(old_dlsym(driver, "cuMemAllocManaged")));
  CHECK(!served_by_cudalloc(old_dlsym(driver, "cuInit")));
  /* RTLD_NEXT through the old version: relative to this program, whose next
   * cudaMalloc is the preloaded one (whether or not it links cudart statically) */
  CHECK(served_by_cudalloc(old_dlsym(RTLD_NEXT, "cudaMalloc")));
  CHECK(old_dlsym(RTLD_NEXT, "cudaMalloc") == dlsym(RTLD_NEXT, "cudaMalloc"));
  printf("dlsym_old: ok\n");
  return 0;
}
