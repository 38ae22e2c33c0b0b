/* What the front cache's two files share: tcache.c (a thread's cache and
 * the registry, hits, frees) and tcache_flush.c (what goes back to the
 * core: flushes, trims, folds of the counts, a thread's exit). The layout
 * of a thread's cache; tcache.c's opening comment says how it works.
 * Private to those two files. */
#ifndef CUDALLOC_TCACHE_LAYOUT_H
#define CUDALLOC_TCACHE_LAYOUT_H

#include <pthread.h>
#include <stddef.h>

#include "config.h"
#include "debug.h"
#include "line.h"
#include "tcache_lock.h"
#include "types.h"

/* The sizes are tcache.h's, which is above this header in the modules'
 * order (alloc/internal.h) and included first by both its files. */
#ifndef CA_TCACHE_MAX_SIZE
#error "tcache_layout.h: include tcache.h first"
#endif

#define CA_TCACHE_SMALL_CLASSES (CA_TCACHE_MAX_SIZE / CA_MIN_BLOCK)   /* exact: one size each */
/* Above CA_TCACHE_MAX_SIZE, 8 classes per octave up to CA_TCACHE_LARGE_MAX
 * (64 KiB..8 MiB: 7 octaves); a class holds blocks of several sizes, so a
 * hit takes one of at least the request's size (take_at's need). */
#define CA_TCACHE_LARGE_PER_OCTAVE_LOG2 3
#define CA_TCACHE_LARGE_OCTAVES (__builtin_ctz(CA_TCACHE_LARGE_MAX) - __builtin_ctz(CA_TCACHE_MAX_SIZE))
#define CA_TCACHE_LARGE_CLASSES (CA_TCACHE_LARGE_OCTAVES << CA_TCACHE_LARGE_PER_OCTAVE_LOG2)
_Static_assert(CA_TCACHE_MAX_SIZE == 1u << 16, "class_of_large counts octaves from 2^16");
#define CA_TCACHE_CLASSES (CA_TCACHE_SMALL_CLASSES + CA_TCACHE_LARGE_CLASSES)
#define CA_TCACHE_STREAMS_LOG2 7   /* (stream, device) entries per thread: 128, 2-way */
#define CA_TCACHE_STREAMS (1 << CA_TCACHE_STREAMS_LOG2)
/* A small miss may take a block of a larger class, up to 1/CA_TCACHE_NEAR_DIV
 * above its own class's size (tcache.c, take_near): from the class where
 * that is a class away (4 KiB). */
#define CA_TCACHE_NEAR_DIV 8
#define CA_TCACHE_NEAR_FROM (CA_TCACHE_NEAR_DIV - 1)
#define CA_TCACHE_SITE_LOOK 4   /* cached blocks of a list a hit looks at for its call site */
#define CA_TCACHE_HELD_LOG2 11   /* entries of each way of the blocks held */
#define CA_TCACHE_HELD (1 << CA_TCACHE_HELD_LOG2)
#define CA_TCACHE_HELD_WAYS 2

typedef struct tc_list_s {
  ca_stream_t stream;           /* the freeing stream, normalized */
  int dev;
  unsigned blocks;              /* cached in head[]; 0: the entry is free */
  uint64_t owner;               /* its queue's owner (per-thread stream: this thread) */
  /* A created stream's: the stream-device generation under which dev was
   * its device (0: a default handle's, or not asked yet), so that a hit or a
   * free finds its list and its device in one compare (list_known). */
  uint64_t asked;
  ca_block_t *head[CA_TCACHE_CLASSES];   /* by size class */
} tc_list_t;

/* Since the last fold: written by the cache's holder (release stores, so
 * that a reader who loads the hits before the frees never sees more taken
 * out than put in), read by anyone. */
typedef struct tc_counts_s {
  int64_t hits, hit_bytes, hit_requested; /* hand-outs from the cache */
  int64_t hit_old_requested;              /* the requested sizes the hits' blocks had before */
  int64_t frees, free_bytes, free_requested; /* frees into the cache */
  /* What the cache held at the last fold, less what flushes gave back since
   * (written with the device locked and the cache held). */
  int64_t bytes, requested, blocks;
  int64_t pad[6];               /* 128 bytes: a device's counts are found by a shift */
} tc_counts_t;
_Static_assert(sizeof(tc_counts_t) == 128, "a device's counts are found by a shift");

/* What the cache holds, what hits changed the requested sizes of live
 * blocks by: derived from the counts. */
typedef struct tc_held_s {
  int64_t hits, hit_bytes, hit_requested, frees;
  int64_t bytes, requested, blocks, drift;
} tc_held_t;

typedef struct held_s {
  uintptr_t addr;               /* the block's address | its device's ordinal; 0: empty */
  ca_block_t *b;
} held_t;
#define EXAMINED ((uintptr_t)4)   /* b->tc: its thread's free is looking at it (ca_tcache_give) */
_Static_assert(_Alignof(max_align_t) >= 8, "a cache's address (calloc's) leaves b->tc's three low bits free");
#define HELD_DEV ((uintptr_t)CA_MIN_BLOCK - 1)   /* block addresses are multiples of CA_MIN_BLOCK */
_Static_assert(CA_MAX_DEVICES <= CA_MIN_BLOCK, "a held entry keeps the device in the address's low bits");

typedef struct ca_tcache_s {
  ca_tclock_t lock;             /* a try-lock, cheap for the owner (tcache_lock.h) */
  unsigned gen;                 /* the registry's generation it belongs to */
  uint32_t tid;                 /* its thread's id, for the leak stamp of its hits */
  struct ca_tcache_s *prev, *next;
  size_t bytes[2];              /* cached, all devices: small blocks, large ones (each against its cap) */
  size_t last_at;               /* the list of the last hit or cached free, tried first: its offset in
                                 * lists, in bytes (0, a zeroed cache's: the first, no stream's) */
  ca_stream_t sd_stream;        /* the last created stream whose device was asked... */
  int sd_dev;                   /* ...that device... */
  uint64_t sd_gen;              /* ...under this stream-device generation (0: none) */
  void *dd_ctx;                 /* the context the default handles' device was asked under... */
  int dd_dev;                   /* ...that device (the context's)... */
  uint64_t dd_gen;              /* ...under this generation (0: none; else dd_ctx is not NULL) */
  size_t refused;               /* the trim's pressure since the last one, in bytes */
  size_t refused_large;         /* the same for large blocks, against their cap */
  unsigned trim_siblings;       /* a trim skipped other arenas' blocks: what it left to do there, once d's
                                 * lock is let go (bit 0: small classes, bit 1: large; ca_tcache_trim_siblings) */
  unsigned lists_held;          /* its streams' lists that hold blocks (small_room): counted by the owner at
                                 * its trims, its slow paths' flushes and its own flushes of a stream, and
                                 * one more at each list a free takes for a new stream */
  /* What each kind may hold now: small_room's bytes; thread_cache_large_mb's,
   * or less while a slow path's halving is regained. Set at each claim (the
   * owner's: a free that reads them follows its block's claim), and where
   * lists_held changes, with the cache held. */
  size_t room[2];
  tc_list_t lists[CA_TCACHE_STREAMS];
  held_t held[CA_TCACHE_HELD_WAYS][CA_TCACHE_HELD]; /* blocks the program holds from this thread (tcache.c's held_slot) */
  tc_counts_t counts[CA_MAX_SLOTS];   /* by arena: a block's counts go to its own (b->slot) */
} ca_tcache_t;

typedef struct {
  pthread_mutex_t lock;
  ca_tcache_t *caches;
  unsigned gen;                 /* moves on at fork: the child forgets every cache */
  pthread_key_t key;            /* its destructor flushes an exiting thread's cache */
  bool key_ok;
} __attribute__((aligned(CA_LINE))) tc_registry_t;   /* gen: read by every claim (line.h) */

extern tc_registry_t tc_registry;

/* A thread without a cache of its own has this one, zeroed and never
 * written: it lists no stream and remembers no block, so that the fronts'
 * inline tries find nothing in it without a test of the pointer; every
 * path that would write a cache tests for it (has_cache). */
extern ca_tcache_t tc_none;
extern __thread ca_tcache_t *tc_mine;
static inline bool has_cache(const ca_tcache_t *c) { return c != &tc_none || CA_DEBUG(tcache_none_is_a_cache); }
/* The calling thread's cache, or none: never NULL. */
static inline __attribute__((always_inline)) ca_tcache_t *me(void) {
  ca_tcache_t *c = tc_mine;
  if (!c) __builtin_unreachable();
  return c;
}

/* The small helpers of a hit, inlined into it. */
#define HOT static inline __attribute__((always_inline))

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* A count's only writer is the cache's holder (its owner, or a flusher
 * holding it): a plain read of the old value, which lets the compiler add
 * from memory, and a release store for the readers. */
#if defined(__x86_64__) && !defined(CA_TSAN)
/* On x86-64 one add to memory (its store is single-copy atomic and, as
 * every store, released in program order; volatile keeps the compiler's
 * order of the bumps, hits last): where the plain read, the add and the
 * store were three instructions, seven times a pair. Not under TSan,
 * which cannot see into an asm: there the release store below, whose
 * protocol it checks. */
HOT void bump(int64_t *c, int64_t delta) { __asm__ volatile("addq %1, %0" : "+m"(*c) : "er"(delta)); }
#else
HOT void bump(int64_t *c, int64_t delta) { STORE(c, *c + delta); }
#endif

/* n's derived figures; the hits are loaded before the frees. */
static inline tc_held_t held_of(tc_counts_t *n) {
  tc_held_t h = {.hits = LOAD(&n->hits), .hit_bytes = LOAD(&n->hit_bytes), .hit_requested = LOAD(&n->hit_requested)};
  int64_t old_requested = LOAD(&n->hit_old_requested);
  h.frees = LOAD(&n->frees);
  h.bytes = LOAD(&n->bytes) + LOAD(&n->free_bytes) - h.hit_bytes;
  h.requested = LOAD(&n->requested) + LOAD(&n->free_requested) - old_requested;
  h.blocks = LOAD(&n->blocks) + h.frees - h.hits;
  h.drift = h.hit_requested - old_requested;
  return h;
}

/* The owner's takes (the calling thread's own cache). */
HOT bool try_hold(ca_tcache_t *c) { return ca_tclock_try(&c->lock); }
static inline void hold(ca_tcache_t *c) { ca_tclock_hold(&c->lock); }
HOT void unhold(ca_tcache_t *c) { ca_tclock_release(&c->lock); }

static inline size_t capacity(void) { return (size_t)ca_config.thread_cache_kb << 10; }
/* What a thread may cache of small blocks: thread_cache_kb for each of its
 * streams' lists that hold blocks, for up to thread_cache_streams of them.
 * A block freed on a stream serves only that stream: 64 streams sharing one
 * thread_cache_kb kept a few blocks each and served 5% of their pairs, one
 * stream 41% (docs/benchmarks.md, thirteenth session). */
static inline size_t small_room(const ca_tcache_t *c) {
  unsigned n = c->lists_held, most = ca_config.thread_cache_streams;
  return capacity() * (n < 1 ? 1 : n > most ? most : n);
}
static inline size_t large_capacity(void) { return (size_t)ca_config.thread_cache_large_mb << 20; }
/* b->tc: cached, and through a trim since (tcache.c's opening comment). */
#define TC_OLD ((uintptr_t)2)

/* pthread_key's destructor: an exiting thread's cache goes back. */
void tc_thread_exit(void *arg);

#endif /* CUDALLOC_TCACHE_LAYOUT_H */
