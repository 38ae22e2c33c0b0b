/* A program linked with libcudalloc.a (no preload, no shim): it calls the
 * public API, keeps one 1 MiB block live to the end, and writes its own
 * lines on stdout without flushing them. tests/test_static.c checks that
 * the static library writes the exit summary after those lines and the
 * report files, as the preloaded library does.
 *   static_app            exit with the block live: a leak at exit
 *   static_app shutdown   cudalloc_shutdown() first: the leak reported there */
#include "progs.h"

int main(int argc, char **argv) {
  void *keep, *p;
  CUDA_OK(cudalloc_malloc(&keep, 1 << 20, 0));
  for (int i = 0; i < 8; i++) {
    CUDA_OK(cudalloc_malloc(&p, (size_t)(i + 1) << 16, 0));
    CUDA_OK(cudalloc_free(p, 0));
  }
  CHECK(cudalloc_owns(keep));
  printf("static_app: version %d\n", cudalloc_version());
  if (argc > 1 && strcmp(argv[1], "shutdown") == 0) cudalloc_shutdown();
  printf("static_app: ok\n");
  return 0;
}
