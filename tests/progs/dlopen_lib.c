/* A program that loads libcudalloc.so late, with dlopen, as Python's
 * ctypes and PyTorch's pluggable allocator do: glibc then has only its
 * small spare of static TLS for the library, so any initial-exec TLS in it
 * (Debian's binary jemalloc has 2.6 KiB) makes the dlopen fail with
 * "cannot allocate memory in static TLS block".
 *
 *   dlopen_lib PATH   exit 0 and "dlopen_lib: ok" once PATH is open and
 *                     its cudalloc_torch_malloc found; else dlerror, exit 1
 *
 * It also says whether glibc gave the library's thread-locals static TLS
 * ("tls: static"), as it does for a library whose TLS uses descriptors
 * and fits in glibc.rtld.optional_static_tls; else "tls: dynamic", where
 * each access is a call to _dl_tlsdesc_dynamic (alloc/include/thread_heap.h).
 * Seen from a thread started after the dlopen that never touched the
 * library: only static TLS is there without a first access.
 *
 * Plain C on purpose: nothing from cudalloc is linked or preloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>

static void *lib;

static void *tls_of_new_thread(void *arg) {
  (void)arg;
  void *data = NULL;
  return dlinfo(lib, RTLD_DI_TLS_DATA, &data) ? (void *)"?" : data ? (void *)"static" : (void *)"dynamic";
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_lib PATH\n");
    return 2;
  }
  void *h = lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen_lib: %s\n", dlerror());
    return 1;
  }
  if (!dlsym(h, "cudalloc_torch_malloc")) {
    fprintf(stderr, "dlopen_lib: no cudalloc_torch_malloc in %s\n", argv[1]);
    return 1;
  }
  pthread_t t;
  void *tls = "?";
  if (!pthread_create(&t, NULL, tls_of_new_thread, NULL)) pthread_join(t, &tls);
  printf("dlopen_lib: ok\ndlopen_lib: tls: %s\n", (const char *)tls);
  return 0;
}
