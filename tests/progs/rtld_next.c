/* dlsym(RTLD_NEXT, ...) must stay relative to its caller with cudalloc's
 * dlsym in front of glibc's: from this program, the next cudaMalloc after
 * it is the preloaded cudalloc's, not libcudart's (a dlsym wrapper written
 * in C, whose own return address glibc would see, gets libcudart's). Other
 * lookups are untouched, errors included. Built with nvcc's static cudart,
 * the program holds the runtime itself, and only the first check applies. */
#include "progs.h"

static int in_library(const void *fn, const char *name) {
  Dl_info info;
  return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, name);
}

int main(void) {
  void *next = dlsym(RTLD_NEXT, "cudaMalloc");
  CHECK(next != NULL);
  if (!served_by_cudalloc(next)) {
    Dl_info info;
    dladdr(next, &info);
    fprintf(stderr, "rtld_next: dlsym(RTLD_NEXT, \"cudaMalloc\") found %s, not cudalloc's\n", info.dli_fname);
    return 1;
  }
  if (in_library((void *)&cudaGetErrorString, "libcudart")) {
    CHECK(next == dlsym(RTLD_DEFAULT, "cudaMalloc"));
    CHECK(next == (void *)&cudaMalloc);
    /* what cudalloc does not serve comes from where it always did */
    CHECK(in_library(dlsym(RTLD_NEXT, "cudaGetErrorString"), "libcudart"));
    CHECK(in_library(dlsym(RTLD_DEFAULT, "cudaGetErrorName"), "libcudart"));
  }
  CHECK(dlsym(RTLD_NEXT, "malloc") == dlsym(RTLD_DEFAULT, "malloc"));
  CHECK(dlsym(RTLD_NEXT, "cudalloc_no_such_symbol") == NULL);
  CHECK(dlerror() != NULL);
  CHECK(dlsym(RTLD_DEFAULT, "cudalloc_no_such_symbol") == NULL && dlerror() != NULL);
  printf("rtld_next: ok\n");
  return 0;
}
