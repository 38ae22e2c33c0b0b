/* What crosses a device's arenas above the core (siblings.h). */
#include "siblings.h"

#include "device.h"
#include "devlock.h"
#include "fence.h"
#include "oom.h"
#include "pages.h"
#include "stats.h"
#include "tcache.h"
#include "thread_heap.h"
#include "trace.h"

// ----------------------------------------------------------------------------
// Routing
// ----------------------------------------------------------------------------

/* The thread's (stream, ordinal) -> arena assignments: set-associative, a
 * full set giving up its oldest way. A stream forgotten here is assigned
 * anew at its next allocation (its blocks stay where they are, and each
 * free finds its arena by address: only locality is lost). */
#define ROUTE_SETS_LOG2 6
#define ROUTE_WAYS 4
typedef struct route_s {
  ca_stream_t stream;
  int ordinal;
  int arena;
} route_t;

/* arena_spread:contended: each thread has a home arena per ordinal (below). */
typedef struct {
  unsigned left;                /* routed allocations before the window ends (0: none begun) */
  unsigned contended_at;        /* the thread's waited takes when it began */
  unsigned moves;
  unsigned home[CA_MAX_DEVICES];
} spread_t;

/* A thread's routes, on the heap (thread_heap.h says why), made at its
 * first routed allocation. */
typedef struct {
  route_t last;                 /* the last answer, tried first: a thread's allocations come in runs on one stream */
  spread_t spread;
  unsigned char next[1 << ROUTE_SETS_LOG2];
  route_t sets[1 << ROUTE_SETS_LOG2][ROUTE_WAYS];
} routes_t;

/* routes(): the calling thread's routes; NULL without memory (the first arena serves). */
static __thread routes_t *mine;
CA_THREAD_HEAP(routes_t, mine, routes)

static route_t *route_set(routes_t *r, ca_stream_t stream) {
  uint64_t h = (uint64_t)(uintptr_t)stream * 0x9e3779b97f4a7c15ull;
  return r->sets[h >> (64 - ROUTE_SETS_LOG2)];
}

static int assign(routes_t *r, ca_stream_t stream, int ordinal) {
  route_t *set = route_set(r, stream);
  for (int w = 0; w < ROUTE_WAYS; w++)
    if (set[w].stream == stream && set[w].ordinal == ordinal && set[w].arena < (int)ca_config.arenas)
      return set[w].arena;
  /* First sight: the next arena of the ordinal, so that two threads (or two
   * streams) seen one after the other never share one while there are two. */
  int k = (int)(__atomic_fetch_add(&ca_state.next_arena[ordinal], 1, __ATOMIC_RELAXED) % ca_config.arenas);
  unsigned i = (unsigned)(set - r->sets[0]) / ROUTE_WAYS, w = r->next[i]++ % ROUTE_WAYS;
  set[w] = (route_t){stream, ordinal, k};
  return k;
}

/* arena_spread:contended: each thread has a home arena per ordinal, where
 * all its streams allocate: the first, until the thread's takes of device
 * locks keep finding them held. A program whose one thread drives many
 * streams keeps one arena, whose memory its streams share (the replay of
 * the ten-stream snapshot reserves what it does at arenas:1), and so do
 * threads that take turns (PyTorch's main and autograd threads). Once
 * SPREAD_CONTENDED of the takes since the thread's last SPREAD_WINDOW routed
 * allocations waited, its home moves to the ordinal's next arena in turn:
 * of two threads that contend, the first to move goes to arena 1 and, at
 * arenas:2, the second to arena 0. A thread whose new home is contended
 * too moves on again, after a window twice as long each time: more threads
 * than arenas contend wherever they go, and moving costs each a new
 * arena's growth and leaves its pending frees behind. */
#define SPREAD_WINDOW 256u
#define SPREAD_CONTENDED 32u
#define SPREAD_BACKOFF_MAX 12u   /* windows up to 2^12 times as long */

/* A window ends (or the thread's first begins): a move when its takes
 * waited often enough, and the next window. Out of line: once in 256. */
static __attribute__((noinline)) unsigned window_end(spread_t *s, int ordinal) {
  unsigned shift = s->moves < SPREAD_BACKOFF_MAX ? s->moves : SPREAD_BACKOFF_MAX;
  unsigned now = ca_devlock_contended;
  if (s->left && now - s->contended_at >= SPREAD_CONTENDED << shift) {
    s->home[ordinal] = __atomic_add_fetch(&ca_state.next_arena[ordinal], 1, __ATOMIC_RELAXED) % ca_config.arenas;
    shift += s->moves++ < SPREAD_BACKOFF_MAX;
  }
  s->left = (SPREAD_WINDOW << shift) - !s->left;   /* the next check ends the window: the first counts this one */
  s->contended_at = now;
  return s->home[ordinal];
}

static int home_of(routes_t *r, int ordinal) {
  spread_t *s = &r->spread;
  unsigned k = __builtin_expect(s->left > 1, 1) ? (s->left--, s->home[ordinal]) : window_end(s, ordinal);
  return k < ca_config.arenas ? (int)k : 0;   /* a home of an earlier start with more arenas */
}

static int route(routes_t *r, ca_stream_t stream, int ordinal) {
  if (ca_config.arena_spread == CA_SPREAD_CONTENDED) return home_of(r, ordinal);
  route_t *last = &r->last;
  if (last->stream != stream || last->ordinal != ordinal || last->arena >= (int)ca_config.arenas)
    *last = (route_t){stream, ordinal, assign(r, stream, ordinal)};
  return last->arena;
}

ca_device_t *ca_siblings_route(ca_device_t *first, ca_stream_t stream) {
  routes_t *r = routes();
  int k = r ? route(r, stream, first->ordinal) : 0;
  /* The event log orders an ordinal's events by one lock while it records:
   * its replay's peaks are then the statistics' own (trace.h). */
  if (!k || ca_trace_on()) return first;
  ca_device_t *d = ca_arena_at(first->ordinal, k);
  if (d && __atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return d;
  /* made on first use; one that cannot be set up (no address space left):
   * the first serves, and the thread's run on this stream (its home) stays there */
  if (ca_device_get_arena(first, k, &d) == CUDA_SUCCESS) return d;
  if (ca_config.arena_spread == CA_SPREAD_CONTENDED) r->spread.home[first->ordinal] = 0;
  else r->last.arena = 0;
  return first;
}

// ----------------------------------------------------------------------------
// Squeezing the siblings
// ----------------------------------------------------------------------------

/* What a sibling holds that another arena could use: its front-cache
 * blocks, its pending frees once done, its free pages. */
static size_t squeeze(ca_device_t *s) {
  size_t before = (size_t)s->stats.reserved_bytes.current;
  ca_tcache_flush(s, NULL, false);
  ca_fences_wait_all(s);
  ca_fences_poll(s);
  ca_trim(s, 0);
  return before - (size_t)s->stats.reserved_bytes.current;
}

/* Never two arena locks at once (their order is not defined): d's is let
 * go while a sibling's is held. give_back: squeeze each, else count only. */
static size_t visit(ca_device_t *d, bool *gone, bool give_back) {
  size_t bytes = 0;
  int64_t allocated = 0, pending = 0, usual = 0;
  *gone = false;
  d->sibling_allocated = d->sibling_pending = d->sibling_usual = 0;
  if (ca_config.arenas == 1 || (give_back && CA_DEBUG(arena_no_sibling_trim))) return 0;
  for (int k = 0; k < (int)ca_config.arenas; k++) {
    ca_device_t *s = ca_arena_at(d->ordinal, k);
    if (!s || s == d) continue;
    ca_devlock_release(&d->lock);
    ca_devlock_take(&s->lock);
    if (s->ready) {
      if (give_back) bytes += squeeze(s);
      allocated += s->stats.allocated_bytes.current;   /* what the program holds there: the report's */
      pending += s->stats.active_bytes.current - s->stats.allocated_bytes.current;
      unsigned n;
      uint64_t u = ca_oom_usual_peak(s, &n);   /* the verdict's comparison is the ordinal's too */
      usual = usual < 0 || !u ? -1 : usual + (int64_t)u;
    }
    ca_devlock_release(&s->lock);
    if (give_back) CA_DEBUG_HOOK(squeeze_window);
    ca_devlock_take(&d->lock);
    if (!d->ready) {   /* torn down meanwhile (a device reset): nothing of the caller's stands */
      *gone = true;
      return bytes;
    }
  }
  d->sibling_allocated = allocated;
  d->sibling_pending = pending;
  d->sibling_usual = usual;
  return bytes;
}

size_t ca_siblings_squeeze(ca_device_t *d, bool *gone) { return visit(d, gone, true); }

void ca_siblings_count(ca_device_t *d) {
  bool gone;
  visit(d, &gone, false);
}

// ----------------------------------------------------------------------------
// Folds
// ----------------------------------------------------------------------------

static void add_stat(cudalloc_stat_t *to, const cudalloc_stat_t *s) {
  to->current += s->current;
  to->peak += s->peak;
  to->total += s->total;
}

/* Sums: a current and a total are the ordinal's exactly; a peak is the sum
 * of the arenas' peaks, an upper bound of the ordinal's (the arenas need
 * not have peaked at once), but for reserved bytes, whose ordinal-wide
 * peak the charge keeps, and allocated and requested bytes, whose peaks
 * the arenas' leases keep (arena.h). */
static void add_stats(cudalloc_stats_t *to, const cudalloc_stats_t *s) {
#define CA_ADD(name, doc) add_stat(&to->name, &s->name);
  CUDALLOC_STAT_BYTES(CA_ADD)
  CUDALLOC_STAT_COUNTS(CA_ADD)
#undef CA_ADD
  if (s->largest_free_bytes > to->largest_free_bytes) to->largest_free_bytes = s->largest_free_bytes;
}

static void add_snapshot(ca_device_t *s, void *out) {
  cudalloc_stats_t one;
  ca_stats_snapshot(s, &one);
  add_stats(out, &one);
}

void ca_siblings_stats(ca_device_t *first, cudalloc_stats_t *out) {
  ca_stats_snapshot(first, out);
  if (ca_config.arenas == 1 || !first->ready || CA_DEBUG(arena_no_fold)) return;
  ca_arena_each_sibling(first, true, add_snapshot, out);
  out->reserved_bytes.peak = (int64_t)ca_arena_reserved_peak(first);
  ca_arena_live_peaks(first->ordinal, &out->allocated_bytes.peak, &out->requested_bytes.peak);
  int64_t peak_reserved = out->reserved_bytes.peak;
  /* What is part of reserved memory at every moment never peaked above
   * it: the lower of the two bounds (arenas that peaked one after the
   * other sum to more than the ordinal ever held; the fragmentation of
   * such a sum came out negative). */
  cudalloc_stat_t *within[] = {&out->allocated_bytes, &out->requested_bytes, &out->mapped_bytes,
                               &out->active_bytes, &out->cached_bytes};
  for (size_t i = 0; i < sizeof within / sizeof within[0]; i++)
    if (within[i]->peak > peak_reserved) within[i]->peak = peak_reserved;
  out->fragmentation = peak_reserved > 0 ? 1.0 - (double)out->allocated_bytes.peak / (double)peak_reserved : 0.0;
}

typedef struct {
  size_t (*fn)(ca_device_t *);
  size_t bytes;
} sum_t;

static void add_bytes(ca_device_t *s, void *arg) {
  sum_t *sum = arg;
  sum->bytes += sum->fn(s);
}

size_t ca_siblings_sum(ca_device_t *first, size_t (*fn)(ca_device_t *)) {
  sum_t sum = {fn, first->ready ? fn(first) : 0};
  if (ca_config.arenas == 1 || CA_DEBUG(arena_no_fold)) return sum.bytes;
  ca_arena_each_sibling(first, true, add_bytes, &sum);
  return sum.bytes;
}
