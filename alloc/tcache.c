/* The per-thread, per-stream front cache of small blocks, and of large ones
 * when thread_cache_large_mb allows (tcache.h says what it promises).
 *
 * A thread's cache holds:
 * - lists of cached blocks, one per (freeing stream, device, size class):
 *   a 2-way table of (stream, device) entries, each with one list head per
 *   size class, so that a hit is one entry compare and one index; a free
 *   that finds no room for its stream goes to the core, so nothing is ever
 *   evicted. Small blocks (<= 64 KiB) have one class per size; large ones
 *   (to 8 MiB) 8 per octave, and a hit takes a block of its class at least
 *   as large as the request, or any of the next class (no rounding in the
 *   core: a request that never reaches the cache pays nothing);
 * - the blocks the thread was handed for stream-ordered small requests and
 *   still holds, by address in a table of two ways (held_slot: way 0 by the
 *   address itself, way 1 by its hash; when both entries of a block hold
 *   blocks still held, a newer one takes the first, and the older one's
 *   free goes to the core), so that their free needs no device
 *   lock to find the block. An entry may be stale (another thread freed the
 *   block through the core): it is believed only while the block says the
 *   thread holds it (b->tc), which the core's free clears;
 * - counts of its hits and frees, per device, which readers add to the
 *   core's statistics, and a flush moves into them. A hit or a free bumps
 *   only what cannot be derived: what the cache holds is what it held at
 *   the last fold plus what was freed into it minus what hits took out.
 *
 * b->tc: 0 when no thread's cache has a claim on b; the owning cache's
 * address while the program holds b; that address | 1 while cached, | 2
 * as well once it has stayed cached through a trim (OLD); | 4 (EXAMINED)
 * while a free of the owning thread looks at whether b is the block it
 * was asked to free (ca_tcache_give), which a core free waits out.
 *
 * Trims: a free the cap refuses goes to the core; once requests that found
 * only other call sites' blocks of their class, and a quarter of the frees
 * the cap refused, add up to the cap, the thread's next core free trims its
 * cache: blocks
 * still cached since the previous trim (neither taken nor freed anew
 * since) go back to the core, the others are marked OLD. So a block cached
 * from a call site or a size that does not come back does not hold its
 * room for good, and what the program reuses stays. Large blocks are
 * trimmed apart, under their own cap, from refused frees alone (their
 * sizes vary too much for a miss to say anything). With arenas:N a
 * thread's lists hold blocks of every arena of the ordinal, and the trim
 * runs under one arena's lock: the others' blocks get the same trim once
 * that lock is let go, one arena lock at a time (ca_tcache_trim_siblings).
 *
 * Large blocks' room: a slow path that finds large blocks in the thread's
 * cache (they took memory the core needed) gives back only those and
 * halves what the thread may keep of them; refused frees regain it slowly
 * (CA_TCACHE_ROOM_REGAIN).
 *
 * This file: a thread's cache and the registry, hits, frees; what goes back
 * to the core (flushes, trims, folds, a thread's exit) is tcache_flush.c's,
 * the layout both read tcache_layout.h's. */
#include "tcache.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "blocks.h"
#include "fence.h"
#include "stamp.h"
#include "ptrmap.h"
#include "sitelive.h"
#include "streamdev.h"
#include "streams.h"
#include "tcache_layout.h"
#include "tcache_lock.h"
#include "trace.h"
#include "track.h"
#include "tsan.h"

tc_registry_t tc_registry = {.lock = PTHREAD_MUTEX_INITIALIZER, .gen = 1};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
ca_tcache_t tc_none;   /* zeroed, never written (tcache_layout.h) */
__thread ca_tcache_t *tc_mine = &tc_none;

/* After a slow path halved the large blocks' room, each free it refuses
 * gives this fraction of the block's size back. */
#define CA_TCACHE_ROOM_REGAIN 32

/* A free the cap refused: the trim's pressure (a quarter of its size: in a
 * sequence of many sizes the cap refuses often, and each trim moves blocks
 * back and forth between the cache and the core); for a large block, some
 * of the room a slow path took. */
HOT void refuse_small(ca_tcache_t *c, size_t size) { c->refused += size / 4; }
static void refuse(ca_tcache_t *c, size_t size, bool large) {
  if (!large) {
    refuse_small(c, size);
    return;
  }
  c->refused_large += size / 4;
  size_t cap = large_capacity();
  if (c->room[1] < cap) c->room[1] = cap - c->room[1] > size / CA_TCACHE_ROOM_REGAIN ? c->room[1] + size / CA_TCACHE_ROOM_REGAIN : cap;
}

// ----------------------------------------------------------------------------
// The thread's cache and the registry
// ----------------------------------------------------------------------------

static void make_key(void) { tc_registry.key_ok = pthread_key_create(&tc_registry.key, tc_thread_exit) == 0; }

/* The calling thread's cache, made on first use; NULL when it cannot be. */
static ca_tcache_t *my_cache(void) {
  ca_tcache_t *c = me();
  if (has_cache(c) && c->gen == __atomic_load_n(&tc_registry.gen, __ATOMIC_ACQUIRE)) return c;
  pthread_once(&key_once, make_key);
  if (!tc_registry.key_ok || !(c = calloc(1, sizeof *c))) return NULL;
  ca_tclock_make(&c->lock);   /* in the locks' mode, chosen at the first */
  c->room[0] = small_room(c);   /* and again at each claim */
  c->room[1] = SIZE_MAX;   /* the cap, at the first claim */
  c->tid = ca_stamp_my_tid();   /* kept: after the core's fork handler a child's thread makes a cache of its own */
  pthread_mutex_lock(&tc_registry.lock);
  c->gen = tc_registry.gen;
  c->next = tc_registry.caches;
  if (c->next) c->next->prev = c;
  tc_registry.caches = c;
  pthread_mutex_unlock(&tc_registry.lock);
  pthread_setspecific(tc_registry.key, c);
  return tc_mine = c;
}

/* The stream alone (a created stream has one device: list_known finds its
 * list before it knows the device; a default handle's devices share a set). */
HOT unsigned way_of(ca_stream_t s) {
  /* every bit of the handle counts: a simulated stream's differ in the low ones */
  uint64_t h = (uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull;
  return (unsigned)(h >> (64 - CA_TCACHE_STREAMS_LOG2));
}

/* The entry of way w for the block at p. Way 0 is indexed by the address
 * itself: small blocks are cut next to each other from the same pages, so
 * the entries of a thread's live blocks share cache lines, and the free of
 * one of a thousand live blocks seldom waits for its entry (bench_alloc's
 * (s=) tiny pair, one stream and 1,024 live blocks: 39 ns with one hashed
 * table of 4-way sets, 34 with these two ways). Way 1 is indexed by a
 * hash, so that two blocks a multiple of 1 MiB apart, which meet in way 0,
 * both find room. p is a multiple of CA_MIN_BLOCK (512): the product's top
 * bits mix every bit of p (no shift first). */
HOT held_t *held_slot(ca_tcache_t *c, uintptr_t p, int w) {
  size_t i = w == 0 ? (size_t)(p / CA_MIN_BLOCK) & (CA_TCACHE_HELD - 1)
                    : (size_t)((uint64_t)p * 0x9e3779b97f4a7c15ull >> (64 - CA_TCACHE_HELD_LOG2));
  return &c->held[w][i];
}

/* An entry that names no block the thread holds. Only b->tc may be read:
 * another thread may have freed the block through the core, and the core
 * may be reusing its struct for another block right now. A struct the
 * thread holds again, at another address, looks held: the free's claim
 * (ca_tcache_give) tells them apart once it owns the struct. */
HOT bool stale(const ca_tcache_t *c, const held_t *h) {
  return !h->addr || __atomic_load_n(&h->b->tc, __ATOMIC_ACQUIRE) != (uintptr_t)c;
}

HOT void hold_block(ca_tcache_t *c, ca_block_t *b, int dev) {
  held_t *slot = held_slot(c, b->addr, 0);
  for (int w = 0; w < (CA_DEBUG(tcache_held_one_way) ? 1 : CA_TCACHE_HELD_WAYS); w++) {
    held_t *h = held_slot(c, b->addr, w);
    if ((h->addr & ~HELD_DEV) == b->addr || stale(c, h)) {
      slot = h;
      break;
    }
  }
  *slot = (held_t){b->addr | (uintptr_t)dev, b};
  b->tc_slot = slot;
}

/* A hit's entry for b: the one its hold_block made, still b's unless a
 * newer block took its slot (a cached block's entry is stale, so any
 * may), so that a hit hashes nothing. b->tc_slot is the thread's: set by
 * its hold_block when b came to it, and b has been its own since, at the
 * same address. An entry that names b is b's at that address: every clear
 * of an entry clears its block too. */
HOT void rehold_block(ca_tcache_t *c, ca_block_t *b, int dev) {
  const held_t *h = b->tc_slot;
  if (h->b == b || CA_DEBUG(tcache_trust_slot)) return;
  hold_block(c, b, dev);
}

/* The list tried first, kept as an offset (a zeroed cache's: the first). */
HOT tc_list_t *last_list(ca_tcache_t *c) {
  return (tc_list_t *)((char *)c + offsetof(ca_tcache_t, lists) + c->last_at);
}
HOT void set_last(ca_tcache_t *c, const tc_list_t *l) {
  c->last_at = (size_t)((const char *)l - (const char *)c->lists);
}

/* An entry of (s, dev), in use or not: its owner is ca_stream_owner(s)'s
 * for this thread whenever it was claimed, and a normalized stream is never
 * NULL, so a zeroed entry names none (nor does the first, where a new cache's
 * last_at points). */
HOT bool same_list(const tc_list_t *l, ca_stream_t s, int dev) {
  return l->stream == s && l->dev == dev;
}

/* A list taken for a new stream by a free, which caches a block there:
 * what the thread may cache grows with it (small_room). */
static void took_list(ca_tcache_t *c) {
  c->lists_held++;
  c->room[0] = small_room(c);
}

/* The lists of (s, dev); with room, a free entry claimed for them. asked:
 * the generation under which dev was asked to be created stream s's (0: a
 * default handle), remembered in the entry for list_known. */
HOT tc_list_t *list_of(ca_tcache_t *c, ca_stream_t s, int dev, bool room, uint64_t asked) {
  tc_list_t *l = last_list(c);
  if (!same_list(l, s, dev)) {   /* one stream's pairs: no hash */
    unsigned w = way_of(s);
    tc_list_t *a = &c->lists[w], *b = &c->lists[w ^ 1];
    l = same_list(a, s, dev) ? a : same_list(b, s, dev) ? b : NULL;
    if (!l && room && (l = !a->blocks ? a : !b->blocks ? b : NULL)) {   /* an empty entry of another stream */
      l->stream = s;
      l->dev = dev;
      l->owner = ca_stream_owner(s);
      l->asked = 0;
      took_list(c);
    }
    if (!l) return NULL;
    set_last(c, l);
  }
  if (asked) l->asked = asked;
  return l;
}

/* The generation under which a stream's device, asked now, is remembered. */
HOT uint64_t streamdev_gen(void) { return __atomic_load_n(&ca_streamdev_generation.v, __ATOMIC_ACQUIRE); }

/* Created stream s's list and device, as list_of found them under the
 * generation that stands (stream_device's promise), without asking; NULL:
 * not known (a default handle, a new stream, a generation moved on). The
 * test switch stale_stream_devices keeps the answers through every change.
 * Only the owner writes an entry's stream and asked: read unheld. */
HOT tc_list_t *list_known(ca_tcache_t *c, ca_stream_t s, uint64_t gen) {
  tc_list_t *l = last_list(c);
  bool stale = CA_DEBUG(stale_stream_devices);
#define KNOWN(l) ((l)->stream == s && ((l)->asked == gen || (stale && (l)->asked)))
  if (KNOWN(l)) return l;
  if (ca_streamdev_is_default(s)) return NULL;
  unsigned w = way_of(s);
  tc_list_t *a = &c->lists[w], *b = &c->lists[w ^ 1];
  l = KNOWN(a) ? a : KNOWN(b) ? b : NULL;
#undef KNOWN
  if (l) set_last(c, l);
  return l;
}

/* ca_stream_device(stream), from the thread's last answer while the
 * generation under which it was asked stands (streamdev.h: a created
 * stream's device changes only with a change that moves it) and, for the
 * default handles (all of them the current context's), while the thread's
 * current context is the one it was asked under: cudaSetDevice,
 * cuCtxSetCurrent, a push or a pop change it, seen by the shim or not.
 * The test switch stale_stream_devices keeps the answers through every
 * change. */
static __attribute__((noinline)) CUresult stream_device_asked(ca_tcache_t *c, ca_stream_t stream, uint64_t gen,
                                                              int *dev) {
  CUresult rc = ca_stream_device(stream, dev);
  if (rc) return rc;
  if (!ca_streamdev_is_default(stream)) {
    c->sd_stream = stream;
    c->sd_dev = *dev;
    c->sd_gen = gen;
  } else {   /* keyed after the call, which may have bound a context; none: nothing kept */
    c->dd_ctx = ca_streamdev_context();
    c->dd_dev = *dev;
    c->dd_gen = c->dd_ctx ? gen : 0;
  }
  return rc;
}
HOT CUresult stream_device(ca_tcache_t *c, ca_stream_t stream, int *dev) {
  uint64_t gen = __atomic_load_n(&ca_streamdev_generation.v, __ATOMIC_ACQUIRE);
  bool stale = CA_DEBUG(stale_stream_devices);
  /* The created stream first, as cheap as before (sd_stream is never a default handle). */
  if (stream == c->sd_stream && (gen == c->sd_gen || (stale && c->sd_gen))) {
    *dev = c->sd_dev;
    return CUDA_SUCCESS;
  }
  if (ca_streamdev_is_default(stream) && c->dd_gen &&
      ((stale && c->dd_ctx) || (gen == c->dd_gen && ca_streamdev_context() == c->dd_ctx))) {
    *dev = c->dd_dev;
    return CUDA_SUCCESS;
  }
  return stream_device_asked(c, stream, gen, dev);
}

/* Not during a capture (frees are held back), nor while the event log
 * records (its hooks run under the device lock, in the core's order), nor
 * once the process exits (the core answers then). thread_cache_kb:0 is
 * tested where a block is claimed (ca_tcache_claim): no block is then
 * held or cached, and the hits and frees find none. The fronts' inline
 * tries test none of the three: they run only while calm (calm.h), which
 * a capture, the event log and the exit stir first. */
HOT bool usable(void) {   /* one test of the three (no branch each: each is nearly always clear) */
  return !((unsigned)__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) | (unsigned)ca_trace_on() |
           (unsigned)__atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE));
}

/* A small block's class: its size exactly. */
HOT unsigned class_of(size_t size) { return (unsigned)(size / CA_MIN_BLOCK) - 1; }
/* ca_round_size(size)'s class, the smallest without a call. */
HOT unsigned class_of_request(size_t size) { return size <= CA_MIN_BLOCK ? 0 : class_of(ca_round_size(size)); }
/* The same with no call on any path: false where roundup_power2_divisions
 * rounds further (ca_round_size's call); else (size - 1) / CA_MIN_BLOCK,
 * its plain rounding's class (size > 0). The setting is tested first: it
 * decides alone in the default configuration, so that the branch does not
 * follow the sizes (with the size first, a tiny pair mispredicted it about
 * once in six; docs/benchmarks.md, eighteenth session). */
HOT bool class_of_request_inline(size_t size, unsigned *cls) {
  *cls = (unsigned)((size - 1) / CA_MIN_BLOCK);
  return ca_config.roundup_power2_divisions <= 1 || size <= CA_MIN_BLOCK;
}
/* A large block's (CA_TCACHE_MAX_SIZE < size <= CA_TCACHE_LARGE_MAX): for
 * size in (2^k, 2^(k+1)], the eighth of the octave it ends in. */
static inline unsigned class_of_large(size_t size) {
  unsigned k = 63u - (unsigned)__builtin_clzll(size - 1);
  unsigned j = (unsigned)((size - 1) >> (k - CA_TCACHE_LARGE_PER_OCTAVE_LOG2)) & ((1u << CA_TCACHE_LARGE_PER_OCTAVE_LOG2) - 1);
  return CA_TCACHE_SMALL_CLASSES + ((k - 16) << CA_TCACHE_LARGE_PER_OCTAVE_LOG2) + j;
}
static inline unsigned class_of_block(size_t size) {
  return size <= CA_TCACHE_MAX_SIZE ? class_of(size) : class_of_large(size);
}

// ----------------------------------------------------------------------------
// Hits
// ----------------------------------------------------------------------------

/* The device a stream-ordered request of dev (-1: the stream's own) on
 * stream goes to, as the core's device_of() finds it; -1 when the core
 * should answer (a bad handle, a device mismatch: its error). */
HOT int device_for(ca_tcache_t *c, int dev, ca_stream_t stream) {
  int sdev = dev;
  if (dev < 0 || !ca_streamdev_is_default(stream)) {
    if (stream_device(c, stream, &sdev) || (dev >= 0 && sdev != dev)) return -1;
  }
  return sdev;
}

/* A block of l's size class cls, of at least need bytes, last handed out
 * at site: the per-site live totals (sitelive.c, under the device lock)
 * counted it there, and it stays there. A few are looked at; the rest is a
 * miss. */
HOT ca_block_t *take_at(tc_list_t *l, unsigned cls, void *site, size_t need) {
  ca_block_t **at = &l->head[cls];
  for (int k = 0; *at && k < CA_TCACHE_SITE_LOOK; at = &(*at)->tc_next, k++) {
    ca_block_t *b = *at;
    if (b->site != site || b->size < need) continue;
    *at = b->tc_next;   /* tc_next is read only while b is cached: left as it is */
    l->blocks--;
    return b;
  }
  return NULL;
}

/* The broken policy of a test switch: any stream's list of the class. */
static tc_list_t *any_stream(ca_tcache_t *c, int dev, unsigned cls) {
  for (int i = 0; i < CA_TCACHE_STREAMS; i++)
    if (c->lists[i].blocks && c->lists[i].dev == dev && c->lists[i].head[cls]) return &c->lists[i];
  return NULL;
}

/* A small request's take from l when its own class has none of its site's:
 * the first block of the next classes whose size is at most an eighth
 * above its class's (the large classes' measure: they hold blocks of
 * several sizes). A stream's cache holds a few blocks of sizes that vary;
 * with exact classes a request of a size near one of them went to the core
 * (the core splits; a cached block cannot be cut without the device lock):
 * 28% of the GPU-like sequence's small requests, 4% with near classes.
 * What a hit hands out beyond its request is the block's, counted where
 * the core counts it (allocated bytes). Classes under 4 KiB have no
 * neighbour that close: nothing to look at. Out of line: a miss. */
static __attribute__((noinline)) ca_block_t *take_near(tc_list_t *l, unsigned cls, void *site) {
  size_t own = (size_t)(cls + 1) * CA_MIN_BLOCK;
  unsigned top = (unsigned)((own + own / CA_TCACHE_NEAR_DIV) / CA_MIN_BLOCK);   /* classes below top fit */
  if (top > CA_TCACHE_SMALL_CLASSES || CA_DEBUG(tcache_near_any)) top = CA_TCACHE_SMALL_CLASSES;
  ca_block_t *b = NULL;
  for (unsigned k = cls + 1; !b && k < top; k++)
    if (l->head[k]) b = take_at(l, k, site, 0);
  return b;
}

/* A large request's take from l: a block of its class that fits (the
 * class holds blocks of several sizes), else any of the next class (all
 * larger than the request, by at most two eighths of an octave). */
static __attribute__((noinline)) ca_block_t *take_large(tc_list_t *l, unsigned cls, size_t size, void *site) {
  size_t need = ca_round_size(size);
  ca_block_t *b = take_at(l, cls, site, CA_DEBUG(tcache_ignore_fit) ? 0 : need);
  if (!b && cls + 1 < CA_TCACHE_CLASSES) b = take_at(l, cls + 1, site, need);
  return b;
}

/* ca_tcache_hit's take: the block handed out, with the thread's cache still
 * held; NULL: nothing changed, nothing held. large: size is above
 * CA_TCACHE_MAX_SIZE (a constant in each caller, so that the small hit's
 * code has no branch of the large classes). fast: no call on the way (the
 * fronts' inline try, tcache.h); what would need one sets *slow instead,
 * before anything changed, for the full try to answer. left (non-NULL): on
 * a miss, whether the list looked at still holds blocks, read before the
 * cache is let go (a flusher may take them right after). */
HOT ca_block_t *tcache_malloc(ca_tcache_t *c, int dev, size_t size, ca_stream_t stream, void *site, bool large,
                              bool fast, bool near, bool *slow, bool *left) {
  if (!(fast || (has_cache(c) && usable()))) return NULL;
  stream = ca_stream_normal(stream);
  unsigned cls = 0;
  tc_list_t *l;
  if (fast) {   /* a created stream seen under this generation, the thread's lock free, the real policy */
    l = list_known(c, stream, streamdev_gen());
    if (!l || (dev >= 0 && l->dev != dev) || !class_of_request_inline(size, &cls) || CA_DEBUG(tcache_any_stream) ||
        !ca_tclock_try_inline(&c->lock)) {
      *slow = true;
      return NULL;
    }
    dev = l->dev;
  } else {
    cls = large ? class_of_large(ca_round_size(size)) : class_of_request(size);
    uint64_t gen = streamdev_gen();   /* before the device is asked: a change after it moves gen on */
    if ((dev = device_for(c, dev, stream)) < 0 || !try_hold(c)) return NULL;
    l = CA_DEBUG(tcache_any_stream) ? any_stream(c, dev, cls)
                                    : list_of(c, stream, dev, false, ca_streamdev_is_default(stream) ? 0 : gen);
  }
  ca_block_t *b = !l ? NULL : large ? take_large(l, cls, size, site) : take_at(l, cls, site, 0);
  if (!b && near && l && !large && cls >= CA_TCACHE_NEAR_FROM && l->blocks) b = take_near(l, cls, site);
  if (!b) {
    /* blocks of the class from other sites: a trim's business too (the
     * near try's miss was counted by the inline try before it) */
    if (l && !large && l->head[cls] && !(fast && near)) c->refused += size;
    if (left) *left = l && l->blocks;
    unhold(c);
    if (CA_DEBUG(tcache_miss_pause)) ca_debug_pause();   /* from here, another thread's flush may take the list's blocks */
    return NULL;
  }
  rehold_block(c, b, dev);
  c->bytes[large] -= b->size;
  tc_counts_t *n = &c->counts[b->slot];
  bump(&n->hit_old_requested, (int64_t)b->requested);
  bump(&n->hit_bytes, (int64_t)b->size);
  bump(&n->hit_requested, (int64_t)size);
  bump(&n->hits, 1);   /* last: a reader that sees it sees the others */
  b->requested = size;
  /* Handed out for this stream now: a cudaFree under free_mode:stream
   * fences it there, as the core's hand-out would have set it. */
  b->stream = stream;
  b->owner = l->owner;
  __atomic_store_n(&b->tc, (uintptr_t)c, __ATOMIC_RELEASE);
  CA_DEBUG_TALLY(tcache_hits);
  return b;   /* c stays held for the caller's hooks */
}

static __attribute__((noinline)) ca_block_t *tcache_malloc_large(ca_tcache_t *c, int dev, size_t size,
                                                                  ca_stream_t stream, void *site) {
  return tcache_malloc(c, dev, size, stream, site, true, false, false, NULL, NULL);
}

/* thread_cache_large_mb's blocks (tested before any call: while they are
 * off, a large request costs the hit two compares and a load). */
HOT bool cacheable_large(size_t size) { return size <= CA_TCACHE_LARGE_MAX && ca_config.thread_cache_large_mb; }

/* A hit's hooks, c held, and its answer: the backend's check last, so that
 * nothing is left to do after its call (a front saves no register for it). */
HOT void handed_out(ca_tcache_t *c, ca_block_t *b, void **ptr, size_t size, void *caller) {
  ca_leaks_stamp_as(b, c->tid);   /* the cache held over the hooks: a reader holding the caches sees them done */
  ca_tcache_on_handout(b->seg->pool->dev, b, true);
  unhold(c);
  *ptr = (void *)b->addr;
  if (ca_handout_checked()) ca_state.be->check_handout(b->addr, size, b->stream, true, caller);
}

bool ca_tcache_hit(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller) {
  ca_tcache_t *c = me();   /* once: in the shared library each access is a __tls_get_addr call */
  ca_block_t *b = size <= CA_TCACHE_MAX_SIZE ? tcache_malloc(c, dev, size, stream, site, false, false, true, NULL, NULL)
                  : cacheable_large(size)    ? tcache_malloc_large(c, dev, size, stream, site)
                                             : NULL;
  if (!b) return false;
  handed_out(c, b, ptr, size, caller);
  return true;
}

/* The inline try (near false) and the near try: a hit handed out, or what
 * the miss leaves to whom. The inline one's miss goes to the near try when
 * a class above may hold a block (the list it looked at held some when
 * the miss let the cache go, and the request is of a class that has near
 * ones). */
HOT ca_tcache_try_t small_try(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller,
                              bool near) {
  ca_tcache_t *c = me();
  bool slow = false, left = false;
  ca_block_t *b = tcache_malloc(c, dev, size, stream, site, false, true, near, &slow, &left);
  if (!b) {
    if (slow) return CA_TCACHE_FULL;
    bool may_near = !near && size > CA_TCACHE_NEAR_FROM * CA_MIN_BLOCK && left;
    return may_near ? CA_TCACHE_NEAR : CA_TCACHE_CORE;
  }
  handed_out(c, b, ptr, size, caller);
  return CA_TCACHE_DONE;
}

ca_tcache_try_t ca_tcache_hit_inline(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller) {
  if (size > CA_TCACHE_MAX_SIZE) return cacheable_large(size) ? CA_TCACHE_FULL : CA_TCACHE_CORE;
  return small_try(dev, ptr, size, stream, site, caller, false);
}

ca_tcache_try_t ca_tcache_hit_near(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller) {
  CA_DEBUG_TALLY(tcache_near_tries);
  return small_try(dev, ptr, size, stream, site, caller, true);
}

/* ca_tcache_claim once the block may be cached (apart: the refusals, the
 * commoner answer for large blocks, save no registers). */
static __attribute__((noinline)) bool claim(ca_block_t *b) {
  ca_tcache_t *c = my_cache();
  if (!c) return false;
  c->room[0] = small_room(c);
  if (c->room[1] > large_capacity()) c->room[1] = large_capacity();
  __atomic_store_n(&b->tc, (uintptr_t)c, __ATOMIC_RELEASE);
  CA_DEBUG_TALLY(tcache_claims);
  return true;
}

bool ca_tcache_claim(ca_device_t *d, ca_block_t *b, ca_stream_t stream) {
  (void)d, (void)stream;
  /* thread_cache_kb:0 turns the whole cache off, large blocks too */
  if ((b->size > CA_TCACHE_MAX_SIZE && !cacheable_large(b->size)) || !ca_config.thread_cache_kb || !usable())
    return false;
  return claim(b);
}

void ca_tcache_remember(ca_block_t *b) {
  ca_tcache_t *c = me();
  if (!has_cache(c)) return;
  hold(c);
  hold_block(c, b, b->seg->pool->dev->ordinal);
  unhold(c);
}

/* The entry of the block at p, if the thread was handed one there;
 * whether the program still holds it from this thread is b->tc's to say
 * (ca_tcache_give's claim). An entry stays while its block is cached,
 * stale then (b->tc), so that the hit that hands the block out again finds
 * its own slot first. Looked up before the cache is held: the owner alone
 * adds entries, so a miss here is a miss (a flusher only clears them: relaxed
 * loads against its relaxed stores); a free the cache cannot take (a large
 * block, another thread's) leaves before anything else. A hit is tested
 * again once held. */
HOT held_t *held_unheld(ca_tcache_t *c, uintptr_t p, uintptr_t *addr) {
  for (int w = 0; w < CA_TCACHE_HELD_WAYS; w++) {
    held_t *h = held_slot(c, p, w);
    if (((*addr = __atomic_load_n(&h->addr, __ATOMIC_RELAXED)) & ~HELD_DEV) == p) return h;
  }
  return NULL;
}

/* ca_tcache_give; fast: no call on the way, as tcache_malloc's. */
HOT bool give(void *ptr, ca_stream_t stream, bool fast, bool *slow) {
  ca_tcache_t *c = me();
  int dev;
  held_t *h;
  uintptr_t addr;
  tc_list_t *l = NULL;
  if (!ptr || !(h = held_unheld(c, (uintptr_t)ptr, &addr)) || !(fast || usable())) return false;   /* none: no entry */
  ca_stream_t s = ca_stream_normal(stream);
  uint64_t gen = streamdev_gen();   /* before the device is asked */
  if (fast) {
    if (!(l = list_known(c, s, gen)) || !ca_tclock_try_inline(&c->lock)) {
      *slow = true;
      return false;
    }
    dev = l->dev;
  } else if (stream_device(c, stream, &dev) || !try_hold(c)) return false;
  stream = s;
  /* Still there once held (a flusher's clear may have come between: its
   * block's struct may be gone then). */
  ca_block_t *b = h->addr == addr ? h->b : NULL;
  int bdev = (int)(addr & HELD_DEV);
  uintptr_t want = (uintptr_t)c;
  /* Marked first: from then on no core free takes the struct, and its
   * fields can be read (before, they may be another block's: only b->tc may
   * be touched). The mark is not "cached": the struct may be the thread's
   * block at another address now (a split's rest keeps its struct), whose
   * core free by another thread must wait, not be refused as a double free
   * (ca_tcache_disown). A failed mark is a stale entry (the block freed
   * through the core, or cached already): it goes. */
  if (b && !__atomic_compare_exchange_n(&b->tc, &want, want | EXAMINED, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    *h = (held_t){0, NULL};   /* cleared whole: a hit believes an entry that names its block (rehold_block) */
    b = NULL;
  }
  bool at_ptr = b && b->addr == (uintptr_t)ptr;   /* not a struct the thread holds for another block now */
  bool large = !fast && at_ptr && b->size > CA_TCACHE_MAX_SIZE;   /* fast: a large block is the full try's */
  /* The full try finds its stream's list before it tests the room: a list
   * taken for a new stream adds a thread_cache_kb to it (small_room). */
  if (!fast && at_ptr && bdev == dev) l = list_of(c, stream, dev, true, ca_streamdev_is_default(stream) ? 0 : gen);
  bool room = at_ptr && c->bytes[large] + b->size <= c->room[large];
  if (fast && b && !(at_ptr && b->size <= CA_TCACHE_MAX_SIZE && room && bdev == dev)) {
    /* A small block the cap refuses is the core's, as in the full try;
     * anything else is the full try's, from the start. */
    bool refused = at_ptr && b->size <= CA_TCACHE_MAX_SIZE && !room;
    if (refused) refuse_small(c, b->size);
    __atomic_store_n(&b->tc, want, __ATOMIC_RELEASE);
    unhold(c);
    *slow = !refused;
    return false;
  }
  if (at_ptr && !room) refuse(c, b->size, large);
  if (room && bdev == dev && l) {
    ca_block_t **head = &l->head[class_of_block(b->size)];
    b->tc_next = *head;
    *head = b;
    l->blocks++;
    c->bytes[large] += b->size;
    tc_counts_t *n = &c->counts[b->slot];
    bump(&n->free_bytes, (int64_t)b->size);
    bump(&n->free_requested, (int64_t)b->requested);
    bump(&n->frees, 1);
    __atomic_store_n(&b->tc, want | 1, __ATOMIC_RELEASE);   /* cached */
    ca_tcache_on_free(b->seg->pool->dev, b, true);
  } else if (b) {
    __atomic_store_n(&b->tc, want, __ATOMIC_RELEASE);   /* the program's again: the core frees it (or refuses) */
    b = NULL;
  }
  unhold(c);
  return b != NULL;
}

bool ca_tcache_give(void *ptr, ca_stream_t stream) { return give(ptr, stream, false, NULL); }

ca_tcache_try_t ca_tcache_give_inline(void *ptr, ca_stream_t stream) {
  bool slow = false;
  return give(ptr, stream, true, &slow) ? CA_TCACHE_DONE : slow ? CA_TCACHE_FULL : CA_TCACHE_CORE;
}

bool ca_tcache_disown(ca_block_t *b) {
  uintptr_t t = __atomic_load_n(&b->tc, __ATOMIC_ACQUIRE);
  while (!(t & 1)) {
    if (t & EXAMINED) {   /* its thread lets go in a few instructions */
      sched_yield();
      t = __atomic_load_n(&b->tc, __ATOMIC_ACQUIRE);
      continue;
    }
    if (!t || __atomic_compare_exchange_n(&b->tc, &t, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return true;
  }
  return false;
}

