/* Leads GCC 12's ThreadSanitizer runtime into its guess about glibc's
 * dynamic TLS (tests/test_tsan_dtls.c says why it matters). Not a CUDA
 * program: it runs with the sanitizer runtime preloaded and nothing else.
 *
 * Each thread touches, for the first time, the thread-local variable of a
 * dlopen'ed libdw (dwarf_errno), which makes glibc allocate the thread's
 * block of libdw's TLS with malloc. Under the runtime that block comes
 * from its heap, 16 bytes at a time, one page offset further each thread;
 * when it sits 16 bytes into a page, the runtime reads the 16 bytes before
 * it as a glibc 2.19 header {size, start} that glibc 2.36 no longer
 * writes. Before each touch the thread leaves freed heap blocks painted
 * with such a "header": from low application memory to the runtime's heap,
 * a range both of whose ends pass the runtime's check and whose shadow
 * cannot be mapped. Exits 77 without libdw.so.1. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { PAINTED = 64, MAX_SIZE = 512 };

static int (*dw_errno)(void);

static void *touch_dtls(void *arg) {
  (void)arg;
  void *freed[PAINTED * (MAX_SIZE / 16)];
  int n = 0;
  for (size_t size = 16; size <= MAX_SIZE; size += 16)
    for (int k = 0; k < PAINTED; k++) {
      uintptr_t *p = malloc(size);
      if (!p) abort();
      for (size_t i = 0; i + 1 < size / sizeof *p; i += 2) {
        p[i] = 0x7b0000000000u;  /* size */
        p[i + 1] = 0x400000u;    /* start */
      }
      freed[n++] = p;
    }
  for (int i = 0; i < n; i++) free(freed[i]);
  dw_errno();
  return NULL;
}

int main(int argc, char **argv) {
  void *dw = dlopen("libdw.so.1", RTLD_NOW);
  if (!dw) {
    fprintf(stderr, "dtls_guess: no libdw.so.1 (%s)\n", dlerror());
    return 77;
  }
  dw_errno = (int (*)(void))dlsym(dw, "dwarf_errno");
  if (!dw_errno) return 1;
  int threads = argc > 1 ? atoi(argv[1]) : 1024;
  for (int i = 0; i < threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, touch_dtls, NULL) || pthread_join(t, NULL)) return 1;
  }
  printf("dtls_guess: ok\n");
  return 0;
}
