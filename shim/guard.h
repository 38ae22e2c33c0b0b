/* The re-entry guard of the interception layer.
 *
 * A thread that is inside a cudalloc entry point can come back into one:
 * the real runtime, called to pass something through, reaches the driver
 * through the cuGetProcAddress that cudalloc handed it; the backend opens
 * libcuda with dlsym. Such inner calls must go straight to the real
 * functions, so each entry point counts its depth on the thread.
 *
 * General-dynamic TLS, not initial-exec: one initial-exec variable makes
 * glibc put the library's whole TLS block (the private jemalloc's
 * included) in static TLS, and dlopen() of libcudalloc.so (ctypes,
 * PyTorch's pluggable allocator) then fails for want of room. Preloaded,
 * the block is static TLS anyway; dlopen'd, the first access on a thread
 * may allocate through the program's malloc, which cudalloc never hooks.
 */
#ifndef CUDALLOC_SHIM_GUARD_H
#define CUDALLOC_SHIM_GUARD_H

#include <stdbool.h>

extern __thread unsigned ca_guard_depth;

/* A guard held for the rest of the enclosing block. */
typedef struct ca_guard_s {
  unsigned *depth;   /* this thread's ca_guard_depth: looked up once, not again at the leave */
  bool outer;        /* no other cudalloc entry point runs below on this thread */
} ca_guard_t;

static inline ca_guard_t ca_guard_enter(void) {
  unsigned *depth = &ca_guard_depth;
  __asm__("" : "+r"(depth));   /* kept, not looked up again: the compiler would redo the TLS call */
  return (ca_guard_t){.depth = depth, .outer = (*depth)++ == 0};
}

static inline void ca_guard_leave(ca_guard_t *g) { (*g->depth)--; }

/* true while some cudalloc entry point runs on this thread. */
static inline bool ca_guard_busy(void) { return ca_guard_depth != 0; }

#define CA_GUARDED \
  ca_guard_t ca_guard_ __attribute__((cleanup(ca_guard_leave))) = ca_guard_enter()
#define ca_guard_outer() (ca_guard_.outer)

#endif /* CUDALLOC_SHIM_GUARD_H */
