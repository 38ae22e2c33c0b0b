/* The structures the core's modules share, its size constants, and the
 * counter update every module uses. Each module's functions are declared
 * in its own header; internal.h lists them in their dependency order.
 *
 * A device owns two pools (small requests, large requests). A pool owns
 * segments: in expandable mode one segment, a region of the device's
 * single virtual reservation whose pages are mapped on demand; in classic
 * mode one fully mapped segment per driver allocation. Blocks tile each
 * segment in address order. A block is LIVE (the program holds it), FREE
 * (reusable by anyone: in the pool's bins), or PENDING (freed, but device
 * work issued before the free may still touch it: it waits in a queue until
 * a fence of events completes). docs/design.md has the picture. */
#ifndef CUDALLOC_TYPES_H
#define CUDALLOC_TYPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"
#include "cudalloc.h"
#include "debug.h"
#include "devlock.h"
#include "line.h"

#define CA_MIN_BLOCK 512u                 /* every block size is a multiple */
#define CA_SMALL_REQUEST (1u << 20)       /* requests up to this go to the small pool */
#define CA_CLASSIC_SMALL_SEGMENT (2u << 20)
#define CA_CLASSIC_MID_REQUEST (10u << 20)
#define CA_CLASSIC_MID_SEGMENT (20u << 20)
#define CA_OVERSIZE_SLACK (20u << 20)     /* max_split: waste allowed on oversize reuse */
#define CA_PAGE_SLACK 0.02               /* reserved above allocated memory before pages move (pages.c) */
#define CA_CHUNK_PAGES 10                 /* pages a small growth creates at once, slack allowing (pages.c) */
#define CA_CHURN_RETURNS 4                /* a page mapped back this often where growths took it stays (churn.c) */
#define CA_MAX_DEVICES 16
/* A device's arenas (arena.c): arena k of ordinal o is slot k * CA_MAX_DEVICES + o,
 * so that arena 0 of each ordinal is the ordinal itself (arenas:1, today's). */
#define CA_MAX_SLOTS (CA_MAX_DEVICES * CA_MAX_ARENAS)
#define CA_MAX_FENCE_EVENTS 64

typedef struct ca_block_s ca_block_t;
typedef struct ca_segment_s ca_segment_t;
typedef struct ca_chunk_s ca_chunk_t;
typedef struct ca_pool_s ca_pool_t;
typedef struct ca_queue_s ca_queue_t;
typedef struct ca_fence_s ca_fence_t;
typedef struct ca_device_s ca_device_t;

typedef enum { CA_FREE, CA_LIVE, CA_PENDING } ca_block_state_t;
/* A free block in an expandable segment is either wholly backed by mapped
 * pages, or a page-aligned hole with no page mapped; never a mixture. */
typedef enum { CA_MAPPED, CA_HOLE } ca_block_kind_t;
/* A device's pools, indexing every per-pool array. */
typedef enum { CA_POOL_SMALL, CA_POOL_LARGE, CA_POOL_COUNT } ca_pool_id_t;

struct ca_block_s {
  uintptr_t addr;
  size_t size;                  /* bytes spanned: a multiple of CA_MIN_BLOCK */
  size_t requested;             /* LIVE: what the program asked for */
  size_t site_requested;        /* LIVE: the requested bytes its site counted it with (a front-cache hit
                                 * changes requested without the device lock the site's totals need) */
  ca_block_t *prev, *next;      /* address order within the segment */
  ca_block_t *bin_prev, *bin_next; /* FREE: pool bins; PENDING: queue bins */
  ca_block_t *fence_prev, *fence_next; /* PENDING: list of its fence */
  ca_segment_t *seg;
  ca_queue_t *queue;            /* PENDING: where it waits */
  ca_fence_t *fence;            /* PENDING: what it waits for */
  ca_stream_t stream;           /* LIVE: allocation stream */
  uint64_t owner;               /* LIVE, per-thread stream: its thread's tag */
  void *site;                   /* LIVE: call site (tracking) */
  uintptr_t tc;                 /* LIVE: a thread's front cache's claim (tcache.c) */
  ca_block_t *tc_next;          /* cached: the front cache's list */
  void *tc_slot;                /* the front cache's: where its thread last remembered it (tcache.c) */
  uint8_t state;                /* ca_block_state_t */
  uint8_t kind;                 /* ca_block_kind_t, FREE blocks only */
  uint8_t in_bins;
  uint8_t bin_fl, bin_sl;       /* the bin it sits in, while in_bins */
  uint8_t slot;                 /* its arena's slot (the struct stays in its arena: blocks.c) */
  uint32_t tid;                 /* LIVE: the allocating thread (leaks.c) */
  uint32_t step;                /* LIVE: the step it was allocated in (step.c) */
};

/* Segregated-fit index of free blocks (bins.c): CA_BINS_FL first-level
 * bins, each split into CA_BINS_SL, with a bitmap per level. */
#define CA_BINS_SL_LOG2 4
#define CA_BINS_SL (1 << CA_BINS_SL_LOG2)
#define CA_BINS_FL 50

typedef struct ca_bins_s {
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[CA_BINS_FL];
  ca_block_t *heads[CA_BINS_FL][CA_BINS_SL];
  size_t bound[CA_BINS_FL][CA_BINS_SL];   /* no block of the bin is larger */
  size_t count;
  size_t bytes;
} ca_bins_t;

_Static_assert(CA_MAX_SLOTS <= 256, "a block's slot is a byte");
_Static_assert(CA_BINS_FL <= 8 * sizeof(uint64_t), "a first-level bin per bit of fl_bitmap");
_Static_assert(CA_BINS_SL <= 8 * sizeof(uint32_t), "a second-level bin per bit of sl_bitmap");
_Static_assert(CA_BINS_FL <= 256 && CA_BINS_SL <= 256, "a block's bin_fl and bin_sl are bytes");
_Static_assert((CA_MIN_BLOCK & (CA_MIN_BLOCK - 1)) == 0, "block sizes round by masking");

/* Live blocks by address (ptrmap.c): open addressing, 0 marks empty. */
typedef struct ca_ptrmap_s {
  uintptr_t *keys;
  ca_block_t **vals;            /* NULL where keys is 0 (empty) */
  size_t cap, count;
  size_t grow_at;               /* count that makes it grow first: half of cap (0: none yet) */
  unsigned shift;               /* 64 - log2(cap): a hash's top bits are its slot (ptrmap.c) */
} ca_ptrmap_t;

/* One physical handle of the expandable pools: `pages` pages, created at
 * once (one driver call for a whole run), each mapped and unmapped on its
 * own (at offset index * page), so that a page can still move out of a
 * free hole alone. Released only once all its pages are back in the page
 * cache: the driver frees a handle's memory whole. */
struct ca_chunk_s {
  ca_phys_t handle;
  size_t pages;
  size_t cached;                /* of its pages, those in the page cache */
  ca_chunk_t *next;             /* device's chunks */
};

/* A page: which piece of which chunk. */
typedef struct ca_page_s {
  ca_chunk_t *chunk;
  size_t index;
} ca_page_t;

struct ca_segment_s {
  uintptr_t base;
  size_t size;
  ca_pool_t *pool;
  ca_block_t *first;            /* lowest-address block */
  ca_segment_t *prev, *next;    /* pool's segments */
  /* classic: the one physical handle behind the whole segment */
  bool classic;
  uint8_t held;                 /* what the driver still holds (segments.c) */
  ca_phys_t handle;
  /* expandable: each page a piece of a chunk, mapped on demand */
  size_t npages;
  ca_page_t *pages;
  uint64_t *mapped;             /* bitmap of mapped pages */
  uint8_t *churn;               /* per page: moved out by growths and mapped back (churn.c) */
  size_t mapped_pages;
};

struct ca_pool_s {
  ca_device_t *dev;
  ca_pool_id_t id;
  ca_bins_t bins;               /* FREE blocks (expandable: CA_MAPPED only) */
  ca_bins_t holes;              /* expandable: FREE CA_HOLE blocks */
  ca_segment_t *segments;
};

/* A set of events that, once all complete, releases the blocks listed.
 * A sealed fence's events follow it in the same allocation; a queue's open
 * batch has none (so a queue header stays small). */
struct ca_fence_s {
  ca_fence_t *next;             /* the queue's FIFO, oldest first */
  ca_block_t *blocks;
  uint64_t seq;                 /* later fences have larger seq */
  bool awaits_sync;             /* no events: complete once the device synchronization that
                                 * filed it returns (fence.c, ca_fences_sync_begin) */
  int nevents, cap;              /* cap: room in events */
  ca_event_t *events;
};

/* The lists a device keeps its stream queues on (qtable.c). */
typedef enum { CA_QL_ALL, CA_QL_OPEN, CA_QL_SEALED, CA_QL_COUNT } ca_qlist_id_t;
typedef struct ca_qlink_s {
  ca_queue_t *prev, *next;
} ca_qlink_t;

/* Where freed blocks wait. A stream's queue lets that stream reuse its
 * blocks at once (they sit in the queue's bins); the device's epoch queue
 * (cudaFree) and capture queue let nobody reuse them before completion. */
struct ca_queue_s {
  ca_stream_t stream;           /* reuse allowed on this stream; NULL: none */
  uint64_t owner;               /* per-thread default stream: its thread's tag */
  uint64_t checked_gen;         /* a created stream: of this device under this streamdev generation (fence.h) */
  bool dead;                    /* the stream was destroyed */
  uint8_t on_list;              /* bit l: on the device's list l (ca_qlist_id_t) */
  ca_bins_t *bins[CA_POOL_COUNT]; /* reusable pending blocks, per pool; made on first use */
  ca_fence_t open;              /* freed since the last seal: no events yet */
  ca_fence_t *head, *tail;      /* sealed fences */
  ca_qlink_t link[CA_QL_COUNT]; /* the device's lists (qtable.c) */
};

struct ca_device_s {
  ca_devlock_t lock;            /* devlock.h */
  /* Nothing else on the lock's cache line: every free reads the fields
   * below of each arena it tests (ca_device_lock_owner), and a line its
   * owner's thread writes at every take would bounce between the CPUs
   * (two GPU-like threads on two arenas: 1.10x one, the loads and the
   * lock's atomics a third of the free's time). */
  char lock_line[64 - sizeof(ca_devlock_t)];
  int ordinal;
  int arena;                    /* which of the ordinal's arenas (arena.c); 0: the ordinal's first */
  int slot;                     /* arena * CA_MAX_DEVICES + ordinal: the per-arena arrays' index */
  bool ready;                   /* pools set up */
  bool passthrough;             /* cudalloc cannot serve it (no VMM, no reservation) */
  bool live_leased;             /* its live bytes count in the ordinal's leases (arena.h), set under its lock */
  ca_device_props_t props;
  size_t page;                  /* granularity */
  size_t limit;                 /* cap on reserved bytes */
  ca_pool_t pools[CA_POOL_COUNT];
  /* expandable: the one reservation, carved into the pools' regions */
  uintptr_t va_base;
  size_t va_size;
  /* physical pages held but unmapped, ready to map again */
  ca_page_t *page_cache;
  size_t page_cache_count, page_cache_cap;
  ca_chunk_t *chunks;           /* every physical handle of the expandable pools */
  int64_t churn_high;           /* peak allocated bytes seen at growths, kept through peak resets (churn.c) */
  ca_ptrmap_t live;
  /* stream queues: by (stream, owner), and on lists (qtable.c) */
  ca_queue_t **qtable;
  size_t qtable_cap, qtable_count;
  ca_queue_t *qtable_last;      /* the queue found last: most lookups are for it (qtable.c) */
  ca_queue_t *qlists[CA_QL_COUNT];
  size_t nqueues, collect_at;   /* empty per-thread queues are collected past collect_at */
  ca_queue_t epoch;             /* cudaFree's queue */
  ca_queue_t held;              /* frees during graph capture */
  uint64_t fence_seq;
  ca_event_t *event_pool;
  size_t event_pool_count, event_pool_cap;
  ca_stream_t nonblocking[CA_MAX_FENCE_EVENTS - 1];
  int nnonblocking;
  bool nonblocking_overflow;    /* more than fit: the epoch synchronizes */
  uint64_t peers;               /* bit p: device p enabled peer access to this memory */
  ca_block_t *spare_blocks;     /* recycled block structs */
  ca_segment_t *leftovers;      /* classic segments the driver did not take back yet */
  ca_fence_t *spare_fences;     /* recycled fences (fence.c) */
  int nspare_fences;
  cudalloc_stats_t stats;
  /* The hooks' per-call state, here beside the stats (one base register
   * for every count an allocation or free makes) rather than in their
   * files' per-ordinal arrays: */
  int64_t oom_step_peak;        /* oom.c: allocated bytes' peak since the step began */
  int64_t peak_taken[2];        /* peak.c: where its copies (allocated, reserved) were taken; 0: none */
  uint64_t peak_since[2];       /* peak.c: frees (allocated) and allocations (reserved) since its copy */
  int64_t sibling_allocated;    /* arena.c: the other arenas' allocated and pending bytes at this arena's */
  int64_t sibling_pending;      /* last squeeze, for its out-of-memory report (0 at arenas:1) */
  int64_t sibling_usual;        /* their usual step peaks summed then (oom.c); -1: one had too few steps */
};

/* Where ca_init stands (lifecycle.c moves it; ca_ready() reads it). */
typedef enum { CA_INIT_NONE, CA_INIT_OK, CA_INIT_FAILED } ca_init_state_t;

/* The ordinal's exact peaks of allocated and requested bytes (arena.c),
 * kept once it has a second arena: [0] allocated, [1] requested. */
typedef struct {
  pthread_mutex_t lock;         /* leases move under it (zeroed: a default mutex) */
  bool kept;                    /* set under it and arena 0's lock, before a sibling is ready */
  int64_t peak[2];              /* the highest the sum over the arenas was (read atomically) */
  int64_t leased[2];            /* the arenas' leases summed: never above peak */
} __attribute__((aligned(64))) ca_live_t;
/* An arena's live bytes, as its siblings may read them, and how far each
 * may rise before the arena asks for more (arena.c's leases). A line of
 * its own: only its arena writes the bytes; a lease changes rarely. */
typedef struct {
  int64_t bytes[2];
  int64_t lease[2];
} __attribute__((aligned(64))) ca_lease_t;

typedef struct ca_state_s {
  const ca_backend_t *be;
  const unsigned *handout_watch;       /* ca_backend_handout_watch(be), set with be */
  int ndevices;
  ca_device_t *devices[CA_MAX_SLOTS];   /* by slot: devices[o] is ordinal o's arena 0 */
  size_t reserved[CA_MAX_DEVICES];      /* by ordinal: every arena's reserved bytes, against limit (arena.c) */
  size_t reserved_peak[CA_MAX_DEVICES]; /* by ordinal: the highest reserved was, since the last peak reset */
  uint64_t claim[CA_MAX_DEVICES];       /* by ordinal: a squeezing arena's hold on the limit, 0: none (arena.c) */
  unsigned next_arena[CA_MAX_DEVICES];  /* by ordinal: the round-robin of first sights (arena.c) */
  ca_live_t live[CA_MAX_DEVICES];       /* by ordinal: exact peaks of allocated and requested bytes (arena.c) */
  ca_lease_t leases[CA_MAX_SLOTS];      /* by slot: each arena's part in them */
  uint64_t peers[CA_MAX_DEVICES];       /* by ordinal: the devices given peer access (an arena made later takes them) */
  int captures;                 /* graph captures underway */
  bool exited;
  int init;                     /* ca_init_state_t, read and written atomically */
} ca_state_t;
/* be, handout_watch, the devices, captures and exited are read on the
 * allocation and free paths: the live and lease lines make the whole state
 * line-aligned and a whole number of lines, so that nothing else shares
 * them (line.h). */
_Static_assert(_Alignof(ca_state_t) >= CA_LINE && sizeof(ca_state_t) % CA_LINE == 0, "ca_state: lines of its own");

/* The process's allocator (defined in device.c). */
extern ca_state_t ca_state;

/* Whether the backend's check_handout must see a hand-out now (once
 * started: the watch is set with the backend). */
static inline bool ca_handout_checked(void) { return __atomic_load_n(ca_state.handout_watch, __ATOMIC_ACQUIRE); }

static inline void ca_stat_add(cudalloc_stat_t *s, int64_t delta) {
  s->current += delta;
  if (s->current > s->peak) s->peak = s->current;
  if (delta > 0) s->total += delta;
}

/* A backend call counted in the device's stats. */
#define CA_CALL(d, stat, expr) (ca_stat_add(&(d)->stats.stat, 1), (expr))
/* Teardown gives memory back through transient driver errors: each call
 * is tried this many times before the memory is written off (and said so). */
#define CA_TEARDOWN_TRIES 4
/* CA_CALL, tried up to CA_TEARDOWN_TRIES times while it fails. */
#define CA_CALL_TRYING(d, stat, expr)                                                       \
  ({                                                                                        \
    CUresult rc_ = CUDA_SUCCESS;                                                            \
    for (int try_ = 0; try_ < CA_TEARDOWN_TRIES && (rc_ = CA_CALL(d, stat, expr)); try_++) \
      ;                                                                                     \
    rc_;                                                                                    \
  })

#endif /* CUDALLOC_TYPES_H */
