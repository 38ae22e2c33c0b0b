/* "track.c": call sites of live blocks. */
#ifndef CUDALLOC_TRACK_H
#define CUDALLOC_TRACK_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "pystack.h"
#include "stackwalk.h"

typedef struct ca_stack_s ca_stack_t;
/* What a block stores as its call site, as deep as the `track` setting
 * asks (NULL with track:off). caller is the allocating call's return
 * address: the program's frames start there. Opaque; equal pointers mean
 * the same stack in every mode (identical stacks are stored once). */
static inline __attribute__((always_inline)) void *ca_track_site(void *caller);
/* The same: every mode (ca_track_site answers the default one inline). */
void *ca_track_site_slow(void *caller);
/* Stores frames[0..n) once (stackwalk.c's intern callback). */
void *ca_track_intern(void *const *frames, int n);
/* The program frames of a stored call site, innermost first; returns their count. */
int ca_track_frames(const void *site, void *const **frames);
/* Its Python frames (track:python, a thread holding the GIL), innermost first. */
int ca_track_py_frames(const void *site, const ca_pyframe_t *const **frames);
/* One line naming a program address: function (file:line), the functions
 * inlined there, the module and offset; from the debug information when
 * there is some, else the symbol table, and it says so. */
void ca_track_symbolize(void *pc, char *buf, size_t cap);
/* One line naming a call site by its innermost functions (Python first),
 * "f (file.c:12) < g (file.c:40) < h (main.c:9)": what every report
 * prints for a site, enough to tell apart the callers of a helper. */
void ca_track_name(const void *site, char *buf, size_t cap);
/* Every frame of a call site, one line each after prefix (Python frames
 * first, then the program's, inlined functions included). */
void ca_track_print(FILE *f, const void *site, const char *prefix);
/* Frees every stored stack and the loaded debug information (at shutdown). */
void ca_track_forget(void);

/* The site without a call: true, with *site, under track:off (none) and
 * track:caller (the caller: ca_track_site_slow's answers), and under
 * track:stack when the memo knows the stack; false: the walk is needed
 * (ca_track_site_at, which asks this first). Before off and caller answered
 * here, they took the allocation's full front and ran slower than the
 * default (docs/benchmarks.md, seventeenth session). */
static inline __attribute__((always_inline)) bool ca_track_site_inline(void *caller, const char *cfa, void **site) {
  ca_track_t mode = ca_config.track;
  if (__builtin_expect(mode == CA_TRACK_STACK, 1))
    return caller && (*site = ca_stackwalk_remembered(caller, cfa, (int)ca_config.track_depth)) != NULL;
  if (mode != CA_TRACK_OFF && mode != CA_TRACK_CALLER) return false;
  *site = mode == CA_TRACK_CALLER ? caller : NULL;
  return true;
}

/* Every mode's site: the answer without a call first, then the stack walk
 * (track:stack) or track.c. The walk's frames below the caller stay the
 * same for every caller. The memo is keyed by the CFA of the entry point
 * that asks (each entry point of alloc.c's malloc_front: ca_malloc,
 * ca_malloc_on, ca_entry_malloc, or cudalloc_malloc when link-time
 * optimization inlines that one), given as cfa also by what that entry
 * calls for it (its full front), and asked there: a stack seen before costs
 * no call. */
static inline __attribute__((always_inline)) void *ca_track_site_at(void *caller, const char *cfa) {
  void *site;
  if (ca_track_site_inline(caller, cfa, &site)) return site;
  if (ca_config.track == CA_TRACK_STACK && caller)
    return ca_stackwalk_site_at(caller, (int)ca_config.track_depth, true, ca_track_intern, cfa);
  return ca_track_site_slow(caller);
}
static inline __attribute__((always_inline)) void *ca_track_site(void *caller) {
  return ca_track_site_at(caller, __builtin_dwarf_cfa());
}

#endif /* CUDALLOC_TRACK_H */
