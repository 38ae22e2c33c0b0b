/* What the test and sanitizer builds add to the core: the test-only
 * switches that break a guard, and internal assertions. */
#ifndef CUDALLOC_DEBUG_H
#define CUDALLOC_DEBUG_H

#include <stdbool.h>
#include <stdint.h>

/* Test-only switches that break a guard, to show that its test catches it.
 * They exist only in the test build of the core (CA_TESTING, linked into
 * the test binaries as libcudalloc-test.a); in the shipped libraries
 * CA_DEBUG(x) is the constant false and the broken paths compile away. */
#ifdef CA_TESTING
typedef struct ca_debug_s {
  bool reuse_pending_anywhere;  /* ignore stream ownership of pending blocks */
  bool skip_fences;             /* treat every fence as complete */
  bool busy_streams_idle;        /* an epoch fence skips every non-blocking stream, busy or not */
  bool sync_fences_done_early;  /* a fence filed for a device synchronization completes before it returns */
  bool shared_per_thread;       /* one queue for every thread's per-thread stream */
  bool pinned_merge_across;     /* the pinned arena merges extents of two chunks */
  bool pinned_ignore_copies;    /* freed pinned blocks ignore async copies in flight */
  bool report_in_handler;       /* report_signal's handler writes the reports itself */
  bool trace_drop_one;          /* the event log silently loses its next event */
  bool trace_clock_bad_scale;   /* the event log's calibration pairs say 1.5 times the time that passed */
  bool trace_clock_monotonic;   /* the event log's clock is CLOCK_MONOTONIC even where the TSC would do */
  bool stackwalk_trust_caller;  /* a remembered stack matches on its innermost frame alone */
  bool stackwalk_memo_trust;    /* a thread's memo believes its stack on (caller, CFA) alone */
  bool stackwalk_memo_shallow;  /* a thread's memo believes a deep stack on the frames it copies */
  bool stackwalk_bounds_unknown; /* a thread's stack bounds are unknown, as when pthread_getattr_np fails */
  bool sites_miss_frees;        /* the per-site live totals ignore frees */
  bool stale_stream_devices;    /* threads keep their streams' devices through every change */
  bool qtable_no_shift;         /* the queue hash deletes without moving the run back */
  bool merge_keeps_old_fence;   /* a merge in place leaves the survivor under its older fence */
  bool bins_resize_stays;       /* a block resized in its bins stays in its old bin */
  bool bins_may_hold_strict;    /* ca_bins_may_hold says no to a request as large as the top bin's bound */
  bool bins_may_hold_lowest;    /* ca_bins_may_hold reads the lowest non-empty bin's bound, not the top one's */
  bool pool_search_always;      /* the pool is searched whatever its bins' bound says (the reference, not a fault) */
  bool qtable_keep_last;        /* the queue hash's memo of the last lookup outlives its queue */
  bool queue_check_any_gen;     /* a free's stream check trusts its queue's stamp whatever the generation */
  bool sitelive_memo_any_site;  /* the per-site totals' memo answers for whatever site is asked */
  bool visit_all_queues;        /* seal and poll walk every queue, not only the busy ones */
  bool tcache_any_stream;       /* a front-cache hit takes any stream's cached block */
  bool tcache_no_flush;         /* the slow path and the other flushes leave the front caches alone */
  bool legacyq_outlive_streams; /* the legacy queue's mode survives a new stream, thread or peer */
  bool tcache_no_trim;          /* a front cache full of blocks nobody takes stays full */
  bool tcache_trim_own_arena_only; /* a trim leaves the thread's blocks of other arenas cached (arenas:N) */
  bool tcache_ignore_fit;       /* a large front-cache hit takes a block of its class smaller than the request */
  bool tcache_near_any;         /* a small front-cache miss takes a block of any larger class, not only an eighth above */
  bool capture_leaves_calm;     /* a capture's start leaves the calm word calm (the inline tries go on) */
  bool trace_leaves_calm;       /* the event log's start leaves the calm word calm (the inline tries go on) */
  bool tcache_none_is_a_cache;  /* a thread without a front cache takes the shared empty one for its own */
  bool tcache_trust_slot;       /* a front-cache hit believes its block's held entry is still there */
  bool tcache_held_one_way;     /* the blocks a thread holds are remembered in way 0 alone (tcache.c held_slot) */
  bool tcache_miss_pause;       /* a front-cache miss sleeps 50 us once it has let its cache go: a flush's window held open */
  bool churn_moves_all;         /* growths move pages however often they came back (churn.c) */
  bool churn_no_cap;            /* pages that came back stay however much memory is reserved (churn.c) */
  bool churn_reset_cap;         /* cudalloc_reset_peaks lowers the cap on pages that stay (churn.c) */
  bool settle_take_fresh;       /* a stream that misses takes other streams' latest frees at once (settle.c) */
  bool tclock_owner_ignores_stop; /* a front cache's owner takes its lock while another thread holds it */
  bool tclock_no_membarrier;    /* another thread takes a front cache's lock without the owners' barrier */
  bool tclock_exchange;         /* the front caches' locks fence, as without membarrier (set before the first cache) */
  bool tclock_fenced_relaxed;   /* without membarrier, the owner's take of its lock does not fence (a plain store and load) */
  bool devlock_no_exclusion;    /* the device lock's take always gets in (devlock.h) */
  bool devlock_no_wake;         /* the device lock's release never wakes a sleeper (devlock.h) */
  bool arena_cap_per_arena;     /* each arena's growth is held to the whole limit alone, not the ordinal's sum (arena.c) */
  bool arena_no_sibling_trim;   /* a slow path short of memory leaves the sibling arenas' caches alone (alloc.c) */
  bool arena_no_fold;           /* an ordinal's stats and free memory are its arena 0's alone (arena.c) */
  bool arena_lease_never_asks;  /* an arena's rise past its lease asks for none: the ordinal's peaks miss it (arena.h) */
  bool arena_claim_ignored;     /* an arena's charges ignore the claim of another that squeezes its siblings (arena.h) */
  bool arena_claim_no_wait;     /* an arena short of memory fails at once while another's claim holds it (alloc.c) */
  void (*squeeze_window)(void); /* called in a squeeze's window, no arena lock held (a test's hook, not a switch) */
  uint64_t tcache_hits;         /* front-cache hits (a tally, not a switch) */
  uint64_t tcache_claims;       /* blocks the core handed out with a front cache's claim (a tally, not a switch) */
  uint64_t stackwalk_memo_hits; /* stacks a thread's memo answered (a tally, not a switch) */
  uint64_t stackwalk_unwinds;   /* stacks unwound from the call frame information (a tally, not a switch) */
  uint64_t tcache_near_tries;   /* the inline try's misses sent to the near try (a tally, not a switch) */
  uint64_t full_fronts;         /* allocations that took the front's full try, malloc_full (a tally, not a switch) */
  uint64_t queue_visits;        /* queues a seal or a poll looked at (a tally, not a switch) */
  uint64_t fence_allocs;        /* fences the core had to allocate, no spare one at hand (a tally, not a switch) */
  uint64_t steal_looks;         /* free blocks a page steal looked at for whole pages (a tally, not a switch) */
} ca_debug_t;
extern ca_debug_t ca_debug;
#define CA_DEBUG(sw) (ca_debug.sw)
#define CA_DEBUG_TALLY(n) __atomic_add_fetch(&ca_debug.n, 1, __ATOMIC_RELAXED)
/* What tcache_miss_pause does: a short sleep. */
void ca_debug_pause(void);
#define CA_DEBUG_HOOK(h) (ca_debug.h ? ca_debug.h() : (void)0)
#else
#define CA_DEBUG(sw) false
#define CA_DEBUG_TALLY(n) ((void)0)
#define CA_DEBUG_HOOK(h) ((void)0)
static inline void ca_debug_pause(void) {}
#endif

/* Internal assertions: checked in the test and sanitizer builds, compiled
 * out of the release build. A failure names the condition and aborts. */
#if defined(CA_TESTING) || defined(CA_ASSERTS)
void ca_assert_fail(const char *cond, const char *file, int line, const char *func);
#define ca_assert(cond) ((cond) ? (void)0 : ca_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define ca_assert(cond) ((void)0)
#endif

#endif /* CUDALLOC_DEBUG_H */
