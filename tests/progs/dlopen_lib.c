/* A program that loads libcudalloc.so late, with dlopen, as Python's
 * ctypes and PyTorch's pluggable allocator do: glibc then has only its
 * small spare of static TLS for the library, so any initial-exec TLS in it
 * (Debian's binary jemalloc has 2.6 KiB) makes the dlopen fail with
 * "cannot allocate memory in static TLS block".
 *
 *   dlopen_lib PATH           exit 0 and "dlopen_lib: ok" once PATH is open
 *                             and its cudalloc_torch_malloc found; else
 *                             dlerror, exit 1
 *   dlopen_lib PATH dlclose   then, a thread allocates and frees through
 *                             PyTorch's entry points, the program closes the
 *                             library, and the thread exits: "dlclose: ok"
 *
 * It also says whether glibc gave the library's thread-locals static TLS
 * ("tls: static"), as it does for a library whose TLS uses descriptors
 * and fits in glibc.rtld.optional_static_tls; else "tls: dynamic", where
 * each access is a call to _dl_tlsdesc_dynamic (alloc/include/thread_heap.h).
 * Seen from a thread started after the dlopen that never touched the
 * library: only static TLS is there before a first access.
 *
 * The dlclose case: the thread's per-thread blocks are freed by pthread
 * key destructors in the library when the thread exits, after the close;
 * an unloaded library would crash there (hence -z nodelete).
 *
 * Plain C on purpose: nothing from cudalloc is linked or preloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

typedef void *(*torch_malloc_t)(ssize_t size, int device, void *stream);
typedef void (*torch_free_t)(void *ptr, ssize_t size, int device, void *stream);

static void *lib;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;   /* 1: the thread allocated; 2: the library is closed */

static void *tls_of_new_thread(void *arg) {
  (void)arg;
  void *data = NULL;
  return dlinfo(lib, RTLD_DI_TLS_DATA, &data) ? (void *)"?" : data ? (void *)"static" : (void *)"dynamic";
}

static void set_stage(int s) {
  pthread_mutex_lock(&lock);
  stage = s;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

static void await_stage(int s) {
  pthread_mutex_lock(&lock);
  while (stage < s) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
}

static void *allocating_thread(void *arg) {
  torch_malloc_t m = (torch_malloc_t)dlsym(lib, "cudalloc_torch_malloc");
  torch_free_t f = (torch_free_t)dlsym(lib, "cudalloc_torch_free");
  void *p = m ? m(4096, 0, NULL) : NULL;
  if (p) f(p, 4096, 0, NULL);
  *(void **)arg = p;
  set_stage(1);
  await_stage(2);   /* exits once the library is closed: its key destructors run now */
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || (argc == 3 && strcmp(argv[2], "dlclose")) || argc > 3) {
    fprintf(stderr, "usage: dlopen_lib PATH [dlclose]\n");
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
  if (argc == 3) {
    void *p = NULL;
    fflush(stdout);
    if (pthread_create(&t, NULL, allocating_thread, &p)) return 1;
    await_stage(1);
    if (!p) {
      fprintf(stderr, "dlopen_lib: cudalloc_torch_malloc failed\n");
      return 1;
    }
    dlclose(h);
    set_stage(2);
    pthread_join(t, NULL);
    printf("dlopen_lib: dlclose: ok\n");
  }
  return 0;
}
