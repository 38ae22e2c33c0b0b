/* Leads the sanitizers' runtimes (GCC 12) into their guess about glibc's
 * dynamic TLS (tests/test_sanitizer_dtls.c says why it matters). Not a
 * CUDA program: it runs with a sanitizer's runtime preloaded and nothing
 * else.
 *
 * Each thread touches, for the first time, the thread-local variable of a
 * dlopen'ed libdw (dwarf_errno), which makes glibc allocate the thread's
 * block of libdw's TLS with malloc, from the runtime's heap, one heap
 * block further each thread. When the block sits 16 bytes into a page,
 * the runtime takes the 16 bytes before it for a glibc 2.19 header
 * {size, start}, which glibc 2.36 no longer writes:
 * - ThreadSanitizer resets the shadow of that range at once. Before each
 *   touch the thread leaves freed heap blocks painted with such a
 *   "header": from low application memory to the runtime's heap, a range
 *   both of whose ends pass the runtime's check and whose shadow cannot be
 *   mapped.
 * - AddressSanitizer reads its own chunk header there; LeakSanitizer scans
 *   the range at exit, for threads still alive then: with "hold" the
 *   threads wait, alive, until the process exits, and paint nothing
 *   (painted blocks in ASan's quarantine moved the TLS blocks so that no
 *   guess went wrong in 10 runs; unpainted, 10 of 10 died).
 * Exits 77 without libdw.so.1. Usage: dtls_guess THREADS [hold] */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAINTED = 64, MAX_SIZE = 512 };

static int (*dw_errno)(void);
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;   /* taken by main in "hold": never given */
static int holding, touched;   /* touched: atomic */

static void *touch_dtls(void *arg) {
  (void)arg;
  void *freed[PAINTED * (MAX_SIZE / 16)];
  int n = 0;
  for (size_t size = 16; !holding && size <= MAX_SIZE; size += 16)
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
  __atomic_add_fetch(&touched, 1, __ATOMIC_RELEASE);
  if (holding) pthread_mutex_lock(&held);
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
  holding = argc > 2 && !strcmp(argv[2], "hold");
  if (holding) pthread_mutex_lock(&held);
  for (int i = 0; i < threads; i++) {
    pthread_t t;
    pthread_attr_t a;   /* small stacks: in "hold" every thread is alive at once */
    if (pthread_attr_init(&a) || pthread_attr_setstacksize(&a, 256 << 10) ||
        pthread_create(&t, &a, touch_dtls, NULL))
      return 1;
    pthread_attr_destroy(&a);
    if (holding ? pthread_detach(t) : pthread_join(t, NULL)) return 1;
  }
  while (__atomic_load_n(&touched, __ATOMIC_ACQUIRE) < threads) sched_yield();
  printf("dtls_guess: ok\n");
  return 0;
}
