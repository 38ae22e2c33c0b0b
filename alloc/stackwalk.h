/* "stackwalk.c": the program's stack above an allocating call, fast enough to
 * take on every allocation. */
#ifndef CUDALLOC_STACKWALK_H
#define CUDALLOC_STACKWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "debug.h"
#include "line.h"

/* Turns frames[0..n) into the stored call site (track.c interns them). */
typedef void *(*ca_stackwalk_intern_fn)(void *const *frames, int n);

/* The call site of the allocation whose return address into the program
 * is `caller`, `depth` frames deep (caller first), as intern() stored it.
 * A stack seen before costs one table probe and one load and compare per
 * frame (each frame's return address is checked in the stack slot it was
 * found in); a new one is unwound from the DWARF call frame information
 * once. `cached` false unwinds every time (the reference, track:backtrace). */
void *ca_stackwalk_site(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern);
/* The same, with the CFA that keys the thread's memo given: the CFA of a
 * function that calls it for every allocation, so that the memo can be
 * asked inline there (ca_stackwalk_remembered) before this call. */
void *ca_stackwalk_site_at(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern, const char *cfa);

/* The thread's memo of the stacks it matched last (stackwalk.c says why a
 * match is the same stack), inline so that a stack seen before costs no
 * call: per entry the slot of each frame and the return address it held
 * (pc[0] is the caller: the key); a stack of fewer frames points the rest
 * at their own pc (always equal); frames past CA_STACKWALK_MEMO_FRAMES are
 * checked through the stack's entry (ca_stackwalk_still_deep), out of line:
 * such an entry is keyed by its CFA + 1 (a CFA is a stack pointer,
 * aligned), which the inline memo never asks for. 128 bytes an entry: an
 * index is a shift. */
#define CA_STACKWALK_MEMO_FRAMES 6   /* track_depth's default */
#define CA_STACKWALK_MEMO_LOG2 3     /* entries per thread: 8, in sets of two */

typedef struct ca_stackwalk_memo_s {
  const char *cfa;                   /* NULL: an empty entry; + 1: more frames than the copy */
  int depth;
  void *site;
  const void *stack;                 /* stackwalk.c's entry */
  void *const *slot[CA_STACKWALK_MEMO_FRAMES];
  void *pc[CA_STACKWALK_MEMO_FRAMES];
} ca_stackwalk_memo_t;
_Static_assert(sizeof(ca_stackwalk_memo_t) == 128, "a memo entry is found by a shift");

typedef struct ca_stackwalk_thread_s {
  uintptr_t lo, hi;                  /* the stack's bounds (hi 0: not asked yet) */
  unsigned gen;                      /* the memo is believed while it is ca_stackwalk_generation.v */
  unsigned last_at;                  /* the entry matched last, tried first (its offset in memo, in bytes):
                                      * a loop's stack needs no hash */
  ca_stackwalk_memo_t memo[1 << CA_STACKWALK_MEMO_LOG2];
} ca_stackwalk_thread_t;

/* The calling thread's block, on the heap (thread_heap.h says why); until
 * the thread's first stack is walked, a shared empty one whose gen no
 * generation has, which nothing writes. */
extern __thread ca_stackwalk_thread_t *ca_stackwalk_mine;
extern ca_alone_u32_t ca_stackwalk_generation;   /* .v atomic */
bool ca_stackwalk_still_deep(const ca_stackwalk_memo_t *m);

/* A slot's word, read where the sanitizers do not look: a return address
 * in a caller's frame (never poisoned, but outside every object). */
static inline void *ca_stackwalk_word(void *const *p) {
#if defined(__x86_64__)
  void *v;
  __asm__("movq (%1), %0" : "=r"(v) : "r"(p));
  return v;
#else
  return *p;
#endif
}

/* The CFA first: only under the same CFA are the slots this thread's stack
 * (stackwalk.c); then the key's rest and every copied frame in one test
 * (cfa + 1: a deep entry's, whose further frames the caller checks). */
static inline bool ca_stackwalk_still(const ca_stackwalk_memo_t *m, void *caller, const char *cfa, int depth) {
  if (m->cfa != cfa) return false;
  if (CA_DEBUG(stackwalk_memo_trust)) return m->pc[0] == caller && m->depth == depth;
  uintptr_t differ = ((uintptr_t)m->pc[0] ^ (uintptr_t)caller) | (uintptr_t)(unsigned)(m->depth ^ depth);
#pragma GCC unroll 8
  for (int i = 0; i < CA_STACKWALK_MEMO_FRAMES; i++)
    differ |= (uintptr_t)ca_stackwalk_word(m->slot[i]) ^ (uintptr_t)m->pc[i];
  return !differ;
}

/* The first way of (caller, cfa)'s set of two. */
static inline ca_stackwalk_memo_t *ca_stackwalk_set(ca_stackwalk_thread_t *t, void *caller, const char *cfa) {
  uint32_t h = (uint32_t)((uintptr_t)caller ^ (uintptr_t)cfa) * 0x9e3779b1u;
  return &t->memo[h >> (32 - CA_STACKWALK_MEMO_LOG2) & ~1u];
}

/* The call site of (caller, depth) as the memo remembers it under cfa, or
 * NULL (ask ca_stackwalk_site_at with the same cfa). Always inlined: under
 * the shipped library's link-time optimization GCC made it a function of
 * its own, called from every allocation's front. */
static inline __attribute__((always_inline)) void *ca_stackwalk_remembered(void *caller, const char *cfa, int depth) {
  ca_stackwalk_thread_t *t = ca_stackwalk_mine;
  if (t->gen != __atomic_load_n(&ca_stackwalk_generation.v, __ATOMIC_ACQUIRE)) return NULL;
  const ca_stackwalk_memo_t *m = (const ca_stackwalk_memo_t *)((const char *)t->memo + t->last_at);
  if (!ca_stackwalk_still(m, caller, cfa, depth)) {   /* every entry is checked whole: any may be tried */
    m = ca_stackwalk_set(t, caller, cfa);
    if (!ca_stackwalk_still(m, caller, cfa, depth) && !ca_stackwalk_still(++m, caller, cfa, depth)) return NULL;
    t->last_at = (unsigned)((const char *)m - (const char *)t->memo);
  }
  CA_DEBUG_TALLY(stackwalk_memo_hits);
  return m->site;
}

/* Drops the table of stacks seen (the stored sites it names are freed by
 * their owner). */
void ca_stackwalk_forget(void);

#endif /* CUDALLOC_STACKWALK_H */
