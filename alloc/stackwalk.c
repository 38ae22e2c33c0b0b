/* The program's stack above an allocating call, on every allocation.
 *
 * glibc's backtrace() (DWARF call frame information, every frame, every
 * time) costs about 2 us for 16 frames; a frame-pointer walk is cheap but
 * wrong in code built without frame pointers (the default at -O2), where
 * it silently skips the very callers a report must name. So the DWARF
 * unwinder runs once per new stack, and remembers where it found each
 * return address: as offsets from the slot of the allocating call's own
 * return address (`caller`), which sits at a fixed distance from this
 * file's frame. A later allocation from the same stack then costs one load
 * and compare per frame: each remembered return address must be in its
 * remembered slot, checked innermost first. Frame i's size is fixed by
 * the code at its return address (no alloca, no VLA), so once frames
 * 0..i match, slot i+1 is where frame i+1's return address really is: a
 * full match is the same stack. Every read stays inside the thread's stack
 * (its bounds, cached per thread). A caller with several stacks (a helper
 * called from many places) is told apart by its own caller's return
 * address, which selects the table entry.
 *
 * Two tables, neither ever shrinking until ca_stackwalk_forget: per `caller`
 * where its slot and its caller's slot are; per (caller, its caller,
 * depth) the frames and their slots. Entries are immutable once
 * published, so readers take no lock.
 *
 * In front of them, each thread remembers the last few stacks it matched,
 * keyed by (caller, this file's CFA): the same CFA puts every remembered
 * slot at the very address it was read at, inside the thread's stack
 * bounds, when the stack last matched (a thread on another stack, a
 * coroutine's, has another CFA there: the thread's own stack owns those
 * addresses), so the reads need no bounds check, and a full compare of
 * every frame's return address in its slot is the same stack by the
 * argument above. No hash of the tables, no probe. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include "stackwalk.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

#include "debug.h"
#include "log.h"
#include "thread_heap.h"

#define MAX_FRAMES 64
#define OWN_FRAMES 32        /* cudalloc's frames below the caller, at most */
#define CALLERS 4096         /* slots of the callers' table (a power of two) */
#define STACKS 16384         /* slots of the stacks' table (a power of two) */
#define PROBES 8
#define MAX_ENTRIES (1 << 16) /* stacks remembered, at most: a bound on memory */
#define NO_SLOT INTPTR_MIN   /* the unwinder did not find the caller: nothing to check */

typedef struct caller_s {
  void *caller;
  intptr_t delta;            /* caller's slot minus ca_stackwalk_site's CFA */
  intptr_t up;               /* the next frame's slot minus caller's; 0: caller is outermost */
  void *site;                /* delta == NO_SLOT: the one-frame site */
  void *first_up;            /* the next frame of the first stack seen (a test switch's) */
  struct caller_s *all;
} caller_t;

typedef struct frame_s {
  void *pc;
  intptr_t off;              /* its slot minus caller's slot */
} frame_t;

typedef struct stack_s {
  void *caller, *up_pc;      /* the table's key, with depth */
  int depth, n;
  void *site;
  struct stack_s *all;
  frame_t f[];               /* f[0] is the caller, at offset 0 */
} stack_t_;

static caller_t *callers[CALLERS];
static stack_t_ *stacks[STACKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static caller_t *all_callers;
static stack_t_ *all_stacks;
static int entries;

typedef struct bounds_s {
  uintptr_t lo, hi;
} bounds_t;

#define MEMO_FRAMES CA_STACKWALK_MEMO_FRAMES
typedef ca_stackwalk_memo_t memo_t;
_Static_assert(sizeof(bounds_t) == 2 * sizeof(uintptr_t), "the thread block starts with its bounds");

/* One block per thread (stackwalk.h): the stack's bounds and the memo.
 * The memo is believed only while its gen is the tables' (ca_stackwalk_forget
 * frees the stacks it names, and moves the generation on, past 0: the gen of
 * a new block and of the empty one). */
static ca_stackwalk_thread_t none;
__thread ca_stackwalk_thread_t *ca_stackwalk_mine = &none;
ca_alone_u32_t ca_stackwalk_generation = {.v = 1};
#define generation ca_stackwalk_generation.v

/* own(): the calling thread's own block, made on first use; NULL without
 * memory (every stack is then unwound). */
CA_THREAD_HEAP_OR(ca_stackwalk_thread_t, ca_stackwalk_mine, own, &none)

/* Bounds no address is inside (word_at reads nothing): the tables' stacks
 * are then unwound. (It was {0, 1}, whose hi - 8 wrapped and let every
 * read through.) */
#define UNKNOWN_BOUNDS ((bounds_t){UINTPTR_MAX, UINTPTR_MAX})

static const bounds_t *stack_bounds(void) {
  static const bounds_t unknown = UNKNOWN_BOUNDS;
  ca_stackwalk_thread_t *t = own();
  if (!t || CA_DEBUG(stackwalk_bounds_unknown)) return &unknown;
  bounds_t *b = (bounds_t *)&t->lo;
  if (b->hi) return b;
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (!pthread_getattr_np(pthread_self(), &attr)) {
    if (!pthread_attr_getstack(&attr, &addr, &size)) *b = (bounds_t){(uintptr_t)addr, (uintptr_t)addr + size};
    pthread_attr_destroy(&attr);
  }
  if (!b->hi) *b = UNKNOWN_BOUNDS;   /* asked once: hi is not 0 */
  return b;
}

static size_t mix(uintptr_t a, uintptr_t b, uintptr_t c) {
  uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull) ^ (c << 48)) * 0xff51afd7ed558ccdull;
  return (size_t)(h ^ (h >> 29));
}

/* The word at p, if it lies inside the stack; else NULL (no return address). */
__attribute__((no_sanitize("address"))) static void *word_at(const bounds_t *b, uintptr_t p) {
  if (p < b->lo || p > b->hi - sizeof(void *)) return NULL;
  return *(void *const *)p;
}

static const caller_t *find_caller(void *caller) {
  size_t h = mix((uintptr_t)caller, 0, 0);
  for (int p = 0; p < PROBES; p++) {
    const caller_t *c = __atomic_load_n(&callers[(h + (size_t)p) & (CALLERS - 1)], __ATOMIC_ACQUIRE);
    if (!c || c->caller == caller) return c;
  }
  return NULL;
}

static bool frames_match(const stack_t_ *s, const bounds_t *b, uintptr_t slot0) {
  if (CA_DEBUG(stackwalk_trust_caller)) return true;
  for (int i = 2; i < s->n; i++)   /* 0 and 1 are in the key, checked already */
    if (word_at(b, slot0 + (uintptr_t)s->f[i].off) != s->f[i].pc) return false;
  return true;
}

// ----------------------------------------------------------------------------
// The slow path: the DWARF unwinder, and what it teaches the tables
// ----------------------------------------------------------------------------

typedef struct walk_s {
  void *caller;
  int depth, found, total;
  void *ip[OWN_FRAMES + MAX_FRAMES];
  uintptr_t cfa[OWN_FRAMES + MAX_FRAMES];
} walk_t;

static _Unwind_Reason_Code walk_step(struct _Unwind_Context *ctx, void *arg) {
  walk_t *w = arg;
  void *ip = (void *)_Unwind_GetIP(ctx);
  if (!ip) return _URC_END_OF_STACK;   /* the outermost frame's "return address" */
  if (w->found < 0 && ip == w->caller) w->found = w->total;
  w->ip[w->total] = ip;
  w->cfa[w->total] = _Unwind_GetCFA(ctx);
  w->total++;
  if (w->found < 0 ? w->total == OWN_FRAMES : w->total - w->found == w->depth) return _URC_END_OF_STACK;
  return _URC_NO_REASON;
}

/* Where frame k's return address is: just below the CFA of the frame it
 * returns from, which libgcc's context for frame k holds (it has unwound
 * that frame to reach k). x86-64; elsewhere the check fails and nothing is
 * remembered: every allocation then unwinds, correctly and slowly. */
static bool slot_of(const walk_t *w, int k, uintptr_t *slot) {
  *slot = w->cfa[k] - sizeof(void *);
  return *(void *const *)*slot == w->ip[k];
}

/* Under the lock, after find_caller found none: false when the probes are full. */
static bool insert_caller(caller_t *c) {
  size_t h = mix((uintptr_t)c->caller, 0, 0);
  for (int p = 0; p < PROBES; p++) {
    caller_t **slot = &callers[(h + (size_t)p) & (CALLERS - 1)];
    if (!*slot) {
      c->all = all_callers;
      all_callers = c;
      entries++;
      __atomic_store_n(slot, c, __ATOMIC_RELEASE);
      return true;
    }
  }
  return false;
}

static void insert_stack(stack_t_ *s) {
  size_t h = mix((uintptr_t)s->caller, (uintptr_t)s->up_pc, (uintptr_t)s->depth);
  static unsigned victim;
  stack_t_ **slot = NULL;
  for (int p = 0; p < PROBES && !slot; p++) {
    stack_t_ **at = &stacks[(h + (size_t)p) & (STACKS - 1)];
    if (!*at) slot = at;
  }
  if (!slot) slot = &stacks[(h + victim++ % PROBES) & (STACKS - 1)];   /* the replaced one stays in all_stacks */
  s->all = all_stacks;
  all_stacks = s;
  entries++;
  __atomic_store_n(slot, s, __ATOMIC_RELEASE);
}

static void learn(const walk_t *w, void *caller, int depth, const char *cfa, void *site, int n) {
  caller_t *c = NULL;
  stack_t_ *s = NULL;
  intptr_t delta = NO_SLOT, up = 0;
  if (w->found < 1) {   /* not found: the one-frame site is all there is to know */
    if ((c = malloc(sizeof *c))) *c = (caller_t){caller, NO_SLOT, 0, site, NULL, NULL};
  } else {
    uintptr_t slots[MAX_FRAMES] = {0};
    for (int i = 0; i < n; i++)
      if (!slot_of(w, w->found + i, &slots[i])) return;
    delta = (intptr_t)(slots[0] - (uintptr_t)cfa);
    up = n > 1 ? (intptr_t)(slots[1] - slots[0]) : 0;
    if ((c = malloc(sizeof *c))) *c = (caller_t){caller, delta, up, NULL, n > 1 ? w->ip[w->found + 1] : NULL, NULL};
    if ((s = malloc(sizeof *s + (size_t)n * sizeof(frame_t)))) {
      *s = (stack_t_){caller, n > 1 ? w->ip[w->found + 1] : NULL, depth, n, site, NULL};
      for (int i = 0; i < n; i++) s->f[i] = (frame_t){w->ip[w->found + i], (intptr_t)(slots[i] - slots[0])};
    }
  }
  pthread_mutex_lock(&lock);
  if (entries >= MAX_ENTRIES) {
    ca_log_once("more than %d call stacks seen: new ones are unwound on every allocation", MAX_ENTRIES);
    free(c);
    free(s);
    c = NULL;
    s = NULL;
  }
  const caller_t *known = find_caller(caller);
  if (c && !known && insert_caller(c)) known = c;
  else free(c);
  /* A stack is found through its caller's slots: they must be these. */
  if (s && known && known->delta == delta && known->up == up) insert_stack(s);
  else free(s);
  pthread_mutex_unlock(&lock);
}

static __attribute__((noinline)) void *unwind(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern,
                                              const char *cfa) {
  CA_DEBUG_TALLY(stackwalk_unwinds);
  walk_t w;
  w.caller = caller;
  w.depth = depth;
  w.found = -1;
  w.total = 0;
  _Unwind_Backtrace(walk_step, &w);
  int n = w.found < 0 ? 1 : w.total - w.found;
  void *site = intern(w.found < 0 ? &caller : &w.ip[w.found], n);
  if (cached && site) learn(&w, caller, depth, cfa, site, n);
  return site;
}

// ----------------------------------------------------------------------------

/* The memo's set of (caller, cfa): two ways, so that two callers of a
 * helper at one depth (the same key) alternate without a miss. */
static memo_t *memo_of(ca_stackwalk_thread_t *t, void *caller, const char *cfa) {
  return ca_stackwalk_set(t, caller, cfa);
}

/* The frames of m's stack past its copy (track_depth > MEMO_FRAMES). */
__attribute__((no_sanitize("address"))) bool ca_stackwalk_still_deep(const memo_t *m) {
  const stack_t_ *st = m->stack;
  uintptr_t slot0 = (uintptr_t)m->slot[0];
  for (int i = MEMO_FRAMES; i < st->n; i++)
    if (*(void *const *)(slot0 + (uintptr_t)st->f[i].off) != st->f[i].pc) return false;
  return true;
}

/* The memo, after a generation moved on: emptied for the new one. */
static void *remembered(void *caller, const char *cfa, int depth) {
  unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
  ca_stackwalk_thread_t *t = own();
  if (!t) return NULL;
  if (t->gen != gen) {
    memset(t->memo, 0, sizeof t->memo);
    t->gen = gen;
    return NULL;
  }
  void *site = ca_stackwalk_remembered(caller, cfa, depth);
  if (site || depth <= MEMO_FRAMES) return site;
  const memo_t *m = memo_of(t, caller, cfa);   /* a deep stack's entry: its own key, its further frames */
  for (int w = 0; w < 2; w++, m++) {
    if (!ca_stackwalk_still(m, caller, cfa + 1, depth)) continue;
    if (!CA_DEBUG(stackwalk_memo_shallow) && !ca_stackwalk_still_deep(m)) continue;
    CA_DEBUG_TALLY(stackwalk_memo_hits);
    return m->site;
  }
  return NULL;
}

/* The newest in the first way, the one before it in the second. */
static void *remember(void *caller, const char *cfa, int depth, uintptr_t slot0, const stack_t_ *s) {
  ca_stackwalk_thread_t *t = ca_stackwalk_mine;   /* &none (never written) unless remembered() made it */
  if (!CA_DEBUG(stackwalk_trust_caller) && t != &none && t->gen == __atomic_load_n(&generation, __ATOMIC_ACQUIRE)) {
    memo_t *m = memo_of(t, caller, cfa);
    m[1] = m[0];
    m[0] = (memo_t){s->n > MEMO_FRAMES ? cfa + 1 : cfa, depth, s->site, s, {0}, {0}};   /* pc[0] is caller: f[0] */
    for (int i = 0; i < MEMO_FRAMES; i++) {
      m->pc[i] = i < s->n ? s->f[i].pc : NULL;
      m->slot[i] = i < s->n ? (void *const *)(slot0 + (uintptr_t)s->f[i].off) : &m->pc[i];
    }
  }
  return s->site;
}

/* The tables, then the unwinder; cfa is ca_stackwalk_site's. */
static __attribute__((noinline)) void *look_up(void *caller, int depth, ca_stackwalk_intern_fn intern,
                                               const char *cfa) {
  const caller_t *c = find_caller(caller);
  if (c && c->delta == NO_SLOT) return c->site;
  if (c) {
    const bounds_t *b = stack_bounds();
    uintptr_t slot0 = (uintptr_t)cfa + (uintptr_t)c->delta;
    if (word_at(b, slot0) == caller) {
      void *up_pc = depth > 1 && c->up ? word_at(b, slot0 + (uintptr_t)c->up) : NULL;
      if (CA_DEBUG(stackwalk_trust_caller)) up_pc = c->first_up;
      size_t h = mix((uintptr_t)caller, (uintptr_t)up_pc, (uintptr_t)depth);
      for (int p = 0; p < PROBES; p++) {
        const stack_t_ *s = __atomic_load_n(&stacks[(h + (size_t)p) & (STACKS - 1)], __ATOMIC_ACQUIRE);
        if (!s) break;
        if (s->caller == caller && s->up_pc == up_pc && s->depth == depth && frames_match(s, b, slot0))
          return remember(caller, cfa, depth, slot0, s);
      }
    }
  }
  return unwind(caller, depth, true, intern, cfa);
}

void *ca_stackwalk_site_at(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern, const char *cfa) {
  if (depth > MAX_FRAMES) depth = MAX_FRAMES;
  if (!cached) return unwind(caller, depth, false, intern, cfa);
  void *site = remembered(caller, cfa, depth);
  return site ? site : look_up(caller, depth, intern, cfa);
}

void *ca_stackwalk_site(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern) {
  return ca_stackwalk_site_at(caller, depth, cached, intern, __builtin_dwarf_cfa());
}

void ca_stackwalk_forget(void) {
  pthread_mutex_lock(&lock);
  if (!__atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL)) __atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
  memset(callers, 0, sizeof callers);
  memset(stacks, 0, sizeof stacks);
  while (all_callers) {
    caller_t *c = all_callers;
    all_callers = c->all;
    free(c);
  }
  while (all_stacks) {
    stack_t_ *s = all_stacks;
    all_stacks = s->all;
    free(s);
  }
  entries = 0;
  pthread_mutex_unlock(&lock);
}
