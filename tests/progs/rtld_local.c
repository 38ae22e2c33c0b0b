/* Runtimes loaded RTLD_LOCAL (how Python loads extension modules, CuPy's or
 * ONNX Runtime's libcudart): the libraries of tests/progs/scope/ call
 * cudaGetDeviceCount, cudaStreamCreate and cudaGetLastError, which the
 * preloaded cudalloc interposes and must pass to the runtime in the
 * caller's own scope. This program links no runtime itself.
 *
 * Two fake runtimes (3 and 5 devices) at once: each library must reach its
 * own. The real libcudart, reached through a library loaded by a library:
 * the program prints its answers, which tests/test_shim.c compares with
 * those of a run without cudalloc. */
#include "progs.h"

#include <limits.h>
#include <unistd.h>

typedef void (*probe_t)(int out[4]);

/* The probe of library lib (beside this program, in scope/). */
static probe_t probe_of(const char *lib, const char *fn) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
  CHECK(n > 0);
  path[n] = 0;
  snprintf(strrchr(path, '/') + 1, 64, "scope/%s", lib);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "rtld_local: %s\n", dlerror());
    exit(1);
  }
  probe_t p;
  *(void **)&p = dlsym(h, fn);
  CHECK(p != NULL);
  return p;
}

static void expect_fake(const char *lib, int count) {
  int r[4];
  probe_of(lib, "scope_probe")(r);
  printf("rtld_local: %s: count %d (%d), stream %d, last %d\n", lib, r[0], r[1], r[2], r[3]);
  CHECK(r[1] == cudaSuccess && r[0] == count);
  CHECK(r[2] == cudaErrorNotPermitted);
  CHECK(r[3] == cudaErrorNotPermitted);   /* the runtime's own last error */
}

int main(void) {
  CHECK(dlsym(RTLD_DEFAULT, "cudaGetErrorString") == NULL);   /* no runtime in the global scope */
  expect_fake("libscope_caller3.so", 3);
  expect_fake("libscope_caller5.so", 5);
  int r[4];
  probe_of("libscope_outer.so", "scope_outer_probe")(r);
  printf("rtld_local: libcudart: count %d (%d), stream %d, last %d\n", r[0], r[1], r[2], r[3]);
  CHECK(r[1] != cudaErrorNotSupported || r[2] != cudaErrorNotSupported);   /* not "no runtime" */
  printf("rtld_local: ok\n");
  return 0;
}
