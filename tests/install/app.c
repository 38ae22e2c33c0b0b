/* What a user of the installed library writes: the public header found by
 * pkg-config, one allocation, and the library's version against the
 * header's. tests/install/check.sh builds it against the shared library,
 * the archive and the build tree. */
#include <stdio.h>
#include <cudalloc.h>

int main(void) {
  void *p = NULL;
  if (cudalloc_malloc(&p, 1 << 20, 0) != cudaSuccess || !p) return fprintf(stderr, "install_app: malloc failed\n"), 1;
  if (cudalloc_free(p, 0) != cudaSuccess) return fprintf(stderr, "install_app: free failed\n"), 1;
  if (cudalloc_version() != CUDALLOC_VERSION)
    return fprintf(stderr, "install_app: library %d, header %d\n", cudalloc_version(), CUDALLOC_VERSION), 1;
  printf("install_app: ok (version %d.%d.%d)\n", CUDALLOC_VERSION_MAJOR, CUDALLOC_VERSION_MINOR, CUDALLOC_VERSION_PATCH);
  return 0;
}
