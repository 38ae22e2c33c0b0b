/* Internal structures of the allocator core, and the functions each file
 * offers the others, grouped by the file that defines them.
 *
 * A device owns one or two pools (small requests, large requests). A pool
 * owns segments: in expandable mode one segment, a region of the device's
 * single virtual reservation whose pages are mapped on demand; in classic
 * mode one fully mapped segment per driver allocation. Blocks tile each
 * segment in address order. A block is LIVE (the program holds it), FREE
 * (reusable by anyone: in the pool's bins), or PENDING (freed, but device
 * work issued before the free may still touch it: it waits in a queue until
 * a fence of events completes). docs/design.md has the picture. */
#ifndef CUDALLOC_INTERNAL_H
#define CUDALLOC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"
#include "cudalloc.h"

#define CA_MIN_BLOCK 512u                 /* every block size is a multiple */
#define CA_SMALL_REQUEST (1u << 20)       /* requests up to this go to the small pool */
#define CA_CLASSIC_SMALL_SEGMENT (2u << 20)
#define CA_CLASSIC_MID_REQUEST (10u << 20)
#define CA_CLASSIC_MID_SEGMENT (20u << 20)
#define CA_OVERSIZE_SLACK (20u << 20)     /* max_split: waste allowed on oversize reuse */
#define CA_MAX_DEVICES 16
#define CA_MAX_FENCE_EVENTS 64

typedef struct ca_block_s ca_block_t;
typedef struct ca_segment_s ca_segment_t;
typedef struct ca_pool_s ca_pool_t;
typedef struct ca_queue_s ca_queue_t;
typedef struct ca_fence_s ca_fence_t;
typedef struct ca_device_s ca_device_t;

typedef enum { CA_FREE, CA_LIVE, CA_PENDING } ca_block_state_t;
/* A free block in an expandable segment is either wholly backed by mapped
 * pages, or a page-aligned hole with no page mapped; never a mixture. */
typedef enum { CA_MAPPED, CA_HOLE } ca_block_kind_t;

struct ca_block_s {
  uintptr_t addr;
  size_t size;                  /* bytes spanned: a multiple of CA_MIN_BLOCK */
  size_t requested;             /* LIVE: what the program asked for */
  ca_block_t *prev, *next;      /* address order within the segment */
  ca_block_t *bin_prev, *bin_next; /* FREE: pool bins; PENDING: queue bins */
  ca_block_t *fence_prev, *fence_next; /* PENDING: list of its fence */
  ca_segment_t *seg;
  ca_queue_t *queue;            /* PENDING: where it waits */
  ca_fence_t *fence;            /* PENDING: what it waits for */
  ca_stream_t stream;           /* LIVE: allocation stream */
  void *site;                   /* LIVE: call site (tracking) */
  uint64_t free_tick;           /* FREE: when it became free (GC age) */
  uint8_t state;                /* ca_block_state_t */
  uint8_t kind;                 /* ca_block_kind_t, FREE blocks only */
  uint8_t in_bins;
  uint8_t bin_fl, bin_sl;       /* the bin it sits in, while in_bins */
};

// ----------------------------------------------------------------------------
// "bins.c": segregated-fit index of free blocks (TLSF-style, O(1) search)
// ----------------------------------------------------------------------------
#define CA_BINS_SL_LOG2 4
#define CA_BINS_SL (1 << CA_BINS_SL_LOG2)
#define CA_BINS_FL 50

typedef struct ca_bins_s {
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[CA_BINS_FL];
  ca_block_t *heads[CA_BINS_FL][CA_BINS_SL];
  size_t count;
  size_t bytes;
} ca_bins_t;

void ca_bins_init(ca_bins_t *bins);
void ca_bins_insert(ca_bins_t *bins, ca_block_t *b);
void ca_bins_remove(ca_bins_t *bins, ca_block_t *b);
/* The best-fitting block with min_size <= size <= max_size, or NULL. */
ca_block_t *ca_bins_find(const ca_bins_t *bins, size_t min_size, size_t max_size);
/* The largest block, or NULL. */
ca_block_t *ca_bins_largest(const ca_bins_t *bins);
/* Calls fn on every block, largest bins first; stops when fn returns false. */
void ca_bins_each(const ca_bins_t *bins, bool (*fn)(ca_block_t *, void *), void *arg);

// ----------------------------------------------------------------------------
// "ptrmap.c": live blocks by address (open addressing)
// ----------------------------------------------------------------------------
typedef struct ca_ptrmap_s {
  uintptr_t *keys;
  ca_block_t **vals;
  size_t cap, count;
} ca_ptrmap_t;

bool ca_ptrmap_insert(ca_ptrmap_t *m, ca_block_t *b);   /* false: out of host memory */
ca_block_t *ca_ptrmap_get(const ca_ptrmap_t *m, uintptr_t addr);
ca_block_t *ca_ptrmap_remove(ca_ptrmap_t *m, uintptr_t addr);
void ca_ptrmap_free(ca_ptrmap_t *m);

// ----------------------------------------------------------------------------
// Pools, segments, devices
// ----------------------------------------------------------------------------
struct ca_segment_s {
  uintptr_t base;
  size_t size;
  ca_pool_t *pool;
  ca_block_t *first;            /* lowest-address block */
  ca_segment_t *prev, *next;    /* pool's segments */
  /* classic: the one physical handle behind the whole segment */
  bool classic;
  ca_phys_t handle;
  /* expandable: one handle per page, mapped on demand */
  size_t npages;
  ca_phys_t *handles;
  uint64_t *mapped;             /* bitmap of mapped pages */
  size_t mapped_pages;
};

struct ca_pool_s {
  ca_device_t *dev;
  bool small;                   /* small-request pool */
  ca_bins_t bins;               /* FREE blocks (expandable: CA_MAPPED only) */
  ca_bins_t holes;              /* expandable: FREE CA_HOLE blocks */
  ca_segment_t *segments;
  size_t nsegments;
};

/* A set of events that, once all complete, releases the blocks listed. */
struct ca_fence_s {
  ca_fence_t *next;             /* the queue's FIFO, oldest first */
  ca_block_t *blocks;
  uint64_t seq;                 /* later fences have larger seq */
  int nevents;
  ca_event_t events[CA_MAX_FENCE_EVENTS];
};

/* Where freed blocks wait. A stream's queue lets that stream reuse its
 * blocks at once (they sit in the queue's bins); the device's epoch queue
 * (cudaFree) and capture queue let nobody reuse them before completion. */
struct ca_queue_s {
  ca_stream_t stream;           /* reuse allowed on this stream; NULL: none */
  uint64_t owner;               /* per-thread default stream: its thread's tag */
  bool nonblocking;             /* a program stream created non-blocking */
  bool dead;                    /* the stream was destroyed */
  ca_bins_t bins[2];            /* reusable pending blocks: [0] small, [1] large */
  ca_fence_t open;              /* freed since the last seal: no events yet */
  ca_fence_t *head, *tail;      /* sealed fences */
  ca_queue_t *next;             /* device's queues */
};

struct ca_device_s {
  pthread_mutex_t lock;
  int ordinal;
  bool ready;                   /* pools set up */
  ca_device_props_t props;
  size_t page;                  /* granularity */
  size_t limit;                 /* cap on reserved bytes */
  ca_pool_t pools[2];           /* [0] small, [1] large */
  /* expandable: the one reservation, carved into the pools' regions */
  uintptr_t va_base;
  size_t va_size;
  /* physical pages held but unmapped, ready to map again */
  ca_phys_t *page_cache;
  size_t page_cache_count, page_cache_cap;
  ca_ptrmap_t live;
  ca_queue_t *queues;           /* stream queues */
  ca_queue_t *last_queue;       /* lookup cache */
  ca_queue_t epoch;             /* cudaFree's queue */
  ca_queue_t held;              /* frees during graph capture */
  uint64_t fence_seq;
  ca_event_t *event_pool;
  size_t event_pool_count, event_pool_cap;
  ca_stream_t nonblocking[CA_MAX_FENCE_EVENTS - 1];
  int nnonblocking;
  bool nonblocking_overflow;    /* more than fit: the epoch synchronizes */
  ca_block_t *spare_blocks;     /* recycled block structs */
  uint64_t tick;
  cudalloc_stats_t stats;
};

typedef struct ca_state_s {
  const ca_backend_t *be;
  int ndevices;
  ca_device_t *devices[CA_MAX_DEVICES];
  int captures;                 /* graph captures underway */
  bool exited;
} ca_state_t;

extern ca_state_t ca_state;

/* Test-only switches that break a guard, to show that its test catches it.
 * They exist only in the test build of the core (CA_TESTING, linked into
 * the test binaries as libcudalloc-test.a); in the shipped libraries
 * CA_DEBUG(x) is the constant false and the broken paths compile away. */
#ifdef CA_TESTING
typedef struct ca_debug_s {
  bool reuse_pending_anywhere;  /* ignore stream ownership of pending blocks */
  bool skip_fences;             /* treat every fence as complete */
  bool shared_per_thread;       /* one queue for every thread's per-thread stream */
} ca_debug_t;
extern ca_debug_t ca_debug;
#define CA_DEBUG(sw) (ca_debug.sw)
#else
#define CA_DEBUG(sw) false
#endif

/* Internal assertions: checked in the test and sanitizer builds, compiled
 * out of the release build. A failure names the condition and aborts. */
#if defined(CA_TESTING) || defined(CA_ASSERTS)
void ca_assert_fail(const char *cond, const char *file, int line, const char *func);
#define ca_assert(cond) ((cond) ? (void)0 : ca_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define ca_assert(cond) ((void)0)
#endif

// ----------------------------------------------------------------------------
// "blocks.c": block structs, splitting and merging
// ----------------------------------------------------------------------------
ca_block_t *ca_block_new(ca_device_t *d);
void ca_block_delete(ca_device_t *d, ca_block_t *b);
/* Makes sure the next n ca_block_new calls cannot fail. */
bool ca_block_reserve(ca_device_t *d, int n);
/* Cuts b at offset: b keeps [addr, addr+offset), the returned block the
 * rest (same state and kind, not in any list but the address order). */
ca_block_t *ca_block_split(ca_device_t *d, ca_block_t *b, size_t offset);
/* Absorbs b->next into b and deletes it. */
void ca_block_absorb_next(ca_device_t *d, ca_block_t *b);
size_t ca_round_size(size_t size);
ca_pool_t *ca_pool_for(ca_device_t *d, size_t rounded);

// ----------------------------------------------------------------------------
// "pages.c": expandable segments' physical pages
// ----------------------------------------------------------------------------
CUresult ca_region_init(ca_segment_t *seg, ca_pool_t *pool, uintptr_t base, size_t size);
void ca_region_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend);
bool ca_page_mapped(const ca_segment_t *seg, size_t page_index);
/* The whole pages inside block b: [*lo, *hi), empty when *hi <= *lo. */
void ca_whole_pages(const ca_block_t *b, size_t page, uintptr_t *lo, uintptr_t *hi);
/* Maps the pages of [addr, addr+size) (page-aligned, all unmapped) and
 * grants access. On a failure a prefix may remain mapped and accessible:
 * *mapped says how many bytes, so that the caller can keep them. */
CUresult ca_map_range(ca_device_t *d, ca_segment_t *seg, uintptr_t addr, size_t size, size_t *mapped);
/* Unmaps whole pages inside free mapped blocks that sit in their bins
 * (largest blocks first) until `want` bytes have been gathered; keeps the
 * handles in the page cache. Returns bytes gathered. */
size_t ca_steal_pages(ca_device_t *d, size_t want);
/* Releases cached handles and unmaps the free pages of free blocks until
 * reserved memory is at most `target`; returns bytes given back. */
size_t ca_trim(ca_device_t *d, size_t target);

// ----------------------------------------------------------------------------
// "segments.c": classic segments
// ----------------------------------------------------------------------------
size_t ca_classic_segment_size(size_t rounded);
CUresult ca_classic_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded);
/* Releases every segment of d that holds no live or pending block. */
size_t ca_classic_release_free(ca_device_t *d);
void ca_segment_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend);
ca_segment_t *ca_segment_of(ca_device_t *d, uintptr_t addr);

// ----------------------------------------------------------------------------
// "pool.c": finding, taking and returning blocks
// ----------------------------------------------------------------------------
/* A block of `rounded` bytes for stream, or NULL (no driver call made). */
ca_block_t *ca_pool_take(ca_device_t *d, ca_pool_t *pool, size_t rounded, ca_stream_t stream);
/* Makes a FREE block of b (coalescing, into the bins). */
void ca_pool_release(ca_device_t *d, ca_block_t *b);
/* Merges b with the FREE neighbours of its kind that sit in their bins
 * (a free block out of its bins is being worked on, and is left alone),
 * then files the result in its bins. */
ca_block_t *ca_pool_coalesce_free(ca_device_t *d, ca_block_t *b);
/* Gets memory for `rounded` bytes from the device: maps pages or creates a
 * segment. Never waits. */
CUresult ca_pool_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded);
/* Largest block allocatable without a driver call. */
size_t ca_pool_largest_free(const ca_pool_t *pool);

// ----------------------------------------------------------------------------
// "fence.c": streams, queues, events and epochs
// ----------------------------------------------------------------------------
ca_queue_t *ca_queue_find(ca_device_t *d, ca_stream_t stream, bool create);
/* Puts a freed block into queue q (merging with its pending neighbours). */
void ca_queue_add(ca_device_t *d, ca_queue_t *q, ca_block_t *b);
/* Removes a pending block from its queue (before reuse on its stream). */
void ca_queue_remove(ca_device_t *d, ca_block_t *b);
/* Moves q's open batch (no events yet) into the epoch queue: those blocks
 * will wait like cudaFree's. */
void ca_queue_open_to_epoch(ca_device_t *d, ca_queue_t *q);
/* Files pending block b under fence f of queue q, without merging. */
void ca_queue_add_to_fence(ca_device_t *d, ca_queue_t *q, ca_fence_t *f, ca_block_t *b);
/* Test-only broken policy: a pending block of any stream's queue. */
ca_block_t *ca_queue_find_any(ca_device_t *d, ca_pool_t *pool, size_t size, size_t max, ca_queue_t **out);
/* Records events for every open batch. Does nothing during a capture. */
void ca_fences_seal(ca_device_t *d);
/* Releases the blocks of every completed fence; returns bytes released. */
size_t ca_fences_poll(ca_device_t *d);
/* Waits for the oldest sealed fence (never during a capture); returns the
 * bytes that became free: 0 when there was nothing to wait for, or the
 * wait did not complete it. */
size_t ca_fences_wait_one(ca_device_t *d);
void ca_fences_teardown(ca_device_t *d, bool call_backend);
void ca_queue_stream_gone(ca_device_t *d, ca_stream_t stream);
ca_stream_t ca_stream_normal(ca_stream_t stream);

// ----------------------------------------------------------------------------
// "device.c": devices and locks
// ----------------------------------------------------------------------------
/* The device structure of ordinal, set up on first use; NULL on error. */
CUresult ca_device_get(int ordinal, ca_device_t **out);
/* The device whose memory contains ptr, locked; NULL when none. */
ca_device_t *ca_device_lock_owner(uintptr_t ptr);
void ca_device_teardown(ca_device_t *d, bool call_backend);
CUresult ca_current_device(ca_device_t **out);
/* Calls fn on every device that has been set up, with its lock held. */
void ca_each_device(void (*fn)(ca_device_t *, void *), void *arg);
/* A backend call counted in the device's stats. */
#define CA_CALL(d, stat, expr) (ca_stat_add(&(d)->stats.stat, 1), (expr))

// ----------------------------------------------------------------------------
// "stats.c"
// ----------------------------------------------------------------------------
static inline void ca_stat_add(cudalloc_stat_t *s, int64_t delta) {
  s->current += delta;
  if (s->current > s->peak) s->peak = s->current;
  if (delta > 0) s->total += delta;
}
void ca_stats_snapshot(ca_device_t *d, cudalloc_stats_t *out);
void ca_stats_print(FILE *f);

// ----------------------------------------------------------------------------
// "check.c"
// ----------------------------------------------------------------------------
int ca_check_device(ca_device_t *d);

// ----------------------------------------------------------------------------
// "track.c": call sites of live blocks
// ----------------------------------------------------------------------------
typedef struct ca_stack_s ca_stack_t;
/* What a block stores as its call site, as deep as the `track` setting
 * asks (NULL with track:off). caller is the allocating call's return
 * address; with track:backtrace the program's frames start there. */
void *ca_track_site(void *caller);
/* The frames of a stored call site, innermost first; returns their count. */
int ca_track_frames(const void *site, void *const **frames);
/* Frees every stored backtrace (at shutdown). */
void ca_track_forget(void);

// ----------------------------------------------------------------------------
// "lifecycle.c"
// ----------------------------------------------------------------------------
/* true once ca_init has succeeded (and until shutdown). */
bool ca_ready(void);

// ----------------------------------------------------------------------------
// "report.c": what the program sees on stderr and in report files
// ----------------------------------------------------------------------------
/* The one-screen summary printed at exit. */
void ca_report_summary(FILE *f);
/* Live blocks grouped by call site, biggest first (compute-sanitizer's shape). */
void ca_report_leaks(FILE *f);
/* One line per cause when an allocation fails; d is locked. */
void ca_report_oom(ca_device_t *d, size_t size);
/* The reports the configuration's `report` prefix names, if any. */
void ca_report_write_files(void);

#endif /* CUDALLOC_INTERNAL_H */
