/* A program that loads libcudalloc.so late, with dlopen, as Python's
 * ctypes and PyTorch's pluggable allocator do: glibc then has only its
 * small spare of static TLS for the library, so any initial-exec TLS in it
 * (Debian's binary jemalloc has 2.6 KiB) makes the dlopen fail with
 * "cannot allocate memory in static TLS block".
 *
 *   dlopen_lib PATH   exit 0 and "dlopen_lib: ok" once PATH is open and
 *                     its cudalloc_torch_malloc found; else dlerror, exit 1
 *
 * Plain C on purpose: nothing from cudalloc is linked or preloaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_lib PATH\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen_lib: %s\n", dlerror());
    return 1;
  }
  if (!dlsym(h, "cudalloc_torch_malloc")) {
    fprintf(stderr, "dlopen_lib: no cudalloc_torch_malloc in %s\n", argv[1]);
    return 1;
  }
  printf("dlopen_lib: ok\n");
  return 0;
}
