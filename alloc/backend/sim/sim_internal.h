/* The simulated device's internals, shared by its files:
 *   sim.c      the backend table, start and teardown, devices, contexts
 *   vm.c       reservations, physical handles, mappings
 *   streams.c  streams, events and the completion of simulated work
 *   oracle.c   device work that touches memory, and the reuse oracle
 *   faults.c   call counters, fault injection, latency
 *
 * One mutex (sim.lock) guards everything below except the counters and
 * fault settings (atomics) and the thread-local current device. Functions
 * named *_locked expect the caller to hold sim.lock and sim.started.
 */
#ifndef CUDALLOC_SIM_INTERNAL_H
#define CUDALLOC_SIM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend_sim.h"

#define SIM_MAX_DEVICES 16

// ----------------------------------------------------------------------------
// Handle tables: ids that name an object until it is dropped, and never again
// (a generation in the id), so a stale or forged id is refused, not followed.
// ----------------------------------------------------------------------------

typedef struct sim_slot_s {
  void *obj;
  uint32_t gen;
  uint32_t next_free;           /* index + 1 of the next free slot; 0: none */
} sim_slot_t;

typedef struct sim_slots_s {
  sim_slot_t *v;
  uint32_t n, cap;
  uint32_t free_head;           /* index + 1; 0: none */
  uint8_t tag;                  /* top byte of every id of this table */
} sim_slots_t;

/* "sim.c" */
uint64_t ca_sim_slot_put(sim_slots_t *t, void *obj);   /* 0 when out of memory */
void *ca_sim_slot_get(const sim_slots_t *t, uint64_t id);
void ca_sim_slot_drop(sim_slots_t *t, uint64_t id);
/* Calls fn on every live object, then frees the table. */
void ca_sim_slot_clear(sim_slots_t *t, void (*fn)(void *obj));

// ----------------------------------------------------------------------------
// Virtual memory
// ----------------------------------------------------------------------------

typedef struct sim_extent_s {
  size_t off, len;              /* bytes of the device's memfd */
} sim_extent_t;

typedef struct sim_handle_s {
  uint64_t id;                  /* its handle */
  int dev;
  size_t size;
  unsigned nextents;
  sim_extent_t *extents;
  unsigned maps;                /* live mappings of this handle */
} sim_handle_t;

typedef struct sim_mapping_s {
  uintptr_t va;
  size_t size;
  sim_handle_t *handle;
  size_t offset;
  uint32_t access;              /* bit d: set_access granted device d */
} sim_mapping_t;

typedef struct sim_resv_s {
  uintptr_t va;
  size_t size;
  int dev;
  sim_mapping_t *maps;          /* sorted by va, never overlapping */
  size_t nmaps, cap;
} sim_resv_t;

// ----------------------------------------------------------------------------
// Streams and simulated work
// ----------------------------------------------------------------------------

typedef enum {
  SIM_STREAM_LEGACY, SIM_STREAM_PER_THREAD, SIM_STREAM_BLOCKING, SIM_STREAM_NONBLOCKING
} sim_stream_kind_t;

typedef struct sim_work_s sim_work_t;

/* What a piece of work reads or writes (ca_sim_touch): pending while its
 * work is. handles: the physical handles mapped under the range when the
 * work was issued, so that releasing one of them early is caught too. */
typedef struct sim_touch_s {
  struct sim_touch_s *prev, *next;  /* in ca_sim.touches */
  sim_work_t *work;
  uintptr_t va;
  size_t size;
  bool write;
  void *site;                   /* where the work was issued */
  char stream_name[64];         /* for reports */
  unsigned nhandles;
  uint64_t *handles;
} sim_touch_t;

/* One piece of simulated work: what an event recorded in manual or lag mode
 * marks, a touch, or a wait for an event. It completes when its stream is
 * completed up to it, and completing it completes what it waited for
 * (deps), since work cannot end before the work it waits on. */
struct sim_work_s {
  unsigned refs;                /* queue + events + dependants + lag list */
  bool done;
  bool listed;                  /* on the completion worklist */
  struct sim_stream_s *stream;  /* while pending */
  sim_work_t *next;             /* in the stream's queue */
  sim_work_t *wl_next;          /* on the completion worklist */
  sim_work_t *lag_next;         /* on ca_sim.lagging */
  uint64_t seq;                 /* issue order, over every stream */
  uint64_t due;                 /* lag mode: completes once ca_sim.ops reaches it */
  sim_touch_t *touch;           /* NULL: touches no memory */
  unsigned ndeps;
  sim_work_t **deps;
};

typedef struct sim_stream_s {
  struct sim_stream_s *next;    /* in the device's list */
  uint64_t id;                  /* the handle of a created stream; 0 for default ones */
  int dev;
  sim_stream_kind_t kind;
  bool capturing;
  bool capture_invalid;         /* a forbidden wait or query broke the capture */
  CUstreamCaptureMode capture_mode;
  pthread_t capture_thread;     /* the thread that began the capture */
  bool destroyed;               /* freed once its pending work is done */
  sim_work_t *head, *tail;      /* pending work, oldest first */
  unsigned reach_epoch;         /* ordering walks (streams.c) */
  uint64_t reach_seq;
} sim_stream_t;

// ----------------------------------------------------------------------------
// Devices and the whole state
// ----------------------------------------------------------------------------

typedef struct sim_device_s {
  int memfd;
  size_t capacity, gran, npages;
  uint64_t *page_bits;          /* 1: the memfd page belongs to a handle */
  size_t used;                  /* physical bytes in live handles */
  int live_handles;
  size_t mapped;                /* bytes mapped in this device's reservations */
  size_t held_by_others;        /* sim_other_process: bytes no handle can get */
  sim_stream_t legacy;
  sim_stream_t *streams;        /* created and per-thread streams */
} sim_device_t;

typedef struct sim_state_s {
  pthread_mutex_t lock;
  int started;                  /* atomic: read without the lock */
  int ndev;                     /* atomic: read without the lock */
  unsigned gen;                 /* atomic: bumped at teardown, resets thread state */
  bool armed;                   /* controls from the configuration applied */
  unsigned event_mode;          /* a ca_sim_events_t: when work completes */
  bool no_vmm;                  /* device_props says: no virtual memory management */
  unsigned lag_ops;             /* lag mode: work lags 1..lag_ops calls */
  uint64_t lag_rng;             /* lag mode's generator */
  uint64_t ops;                 /* calls so far: lag mode's clock */
  uint64_t seq;                 /* works issued so far */
  unsigned epoch;               /* ordering walks so far */
  sim_work_t *lagging;          /* lag mode: pending work that completes by itself */
  sim_touch_t *touches;         /* pending touches */
  unsigned ntouches;            /* atomic: how many, read without the lock */
  sim_device_t dev[SIM_MAX_DEVICES];
  sim_resv_t *resv;             /* sorted by va */
  size_t nresv, resv_cap;
  sim_slots_t handles, events, streams;
  ca_process_t others[CA_BACKEND_MAX_OTHERS]; /* sim_other_process */
  unsigned nothers;
  /* A capture has begun since the process started (never cleared): until
   * then no stream can forbid a wait, and a query need not walk them all. */
  bool captured;
} sim_state_t;

extern sim_state_t ca_sim;

/* "sim.c" */
/* Counts a broken contract rule and returns its error. */
CUresult ca_sim_violation(CUresult err);
/* Locks and checks that the simulation runs; on error it is unlocked. */
CUresult ca_sim_lock_started(void);
void ca_sim_unlock(void);
/* The calling thread's current device (0 when it has no context). */
int ca_sim_current_device(void);
/* true, with its device, when the calling thread has a current context. */
bool ca_sim_current_context(int *dev);
bool ca_sim_valid_device(int dev);

/* "vm.c" */
CUresult ca_sim_device_open_locked(sim_device_t *d, int ordinal, size_t capacity, size_t gran);
/* Frees a device's host objects; unmaps the reservations too when unmap. */
void ca_sim_vm_teardown_locked(bool unmap);
CUresult ca_sim_reserve_locked(int dev, size_t size, uintptr_t *va);
CUresult ca_sim_va_free_locked(uintptr_t va, size_t size);
CUresult ca_sim_create_locked(int dev, size_t size, ca_phys_t *handle);
CUresult ca_sim_release_locked(ca_phys_t handle);
CUresult ca_sim_map_locked(uintptr_t va, size_t size, ca_phys_t handle, size_t offset);
CUresult ca_sim_unmap_locked(uintptr_t va, size_t size);
CUresult ca_sim_set_access_locked(int dev, uintptr_t va, size_t size);
/* true when [va, va+size) overlaps a reservation; *mapped: and lies in
 * mappings entirely. */
bool ca_sim_device_range_locked(uintptr_t va, size_t size, bool *mapped);
/* The handles mapped under [va, va+size), at most cap of them; the count. */
unsigned ca_sim_handles_under_locked(uintptr_t va, size_t size, uint64_t *out, unsigned cap);

/* "streams.c" */
void ca_sim_streams_teardown_locked(void);
/* The stream a handle names for the calling thread; quiet: no violation
 * is counted for a bad handle. */
CUresult ca_sim_stream_resolve_locked(ca_stream_t handle, sim_stream_t **out, bool quiet);
/* Queues a piece of work on s that touches memory (touch, owned by it). */
CUresult ca_sim_work_push_touch_locked(sim_stream_t *s, sim_touch_t *touch);
/* true when work w is done, or completes before any work issued on s
 * from now on can start (stream order, the legacy stream's implicit
 * waits, and event waits). */
bool ca_sim_work_ordered_before_locked(sim_work_t *w, sim_stream_t *s);
/* Lag mode's clock: one more call; completes the work that is due. */
void ca_sim_lag_tick_locked(void);
CUresult ca_sim_event_create_locked(int dev, ca_event_t *event);
CUresult ca_sim_event_record_locked(ca_event_t event, ca_stream_t stream);
CUresult ca_sim_event_query_locked(ca_event_t event);
CUresult ca_sim_event_sync_locked(ca_event_t event);
CUresult ca_sim_event_destroy_locked(ca_event_t event);
CUresult ca_sim_stream_sync_locked(ca_stream_t stream);
CUresult ca_sim_stream_query_locked(ca_stream_t stream);
CUresult ca_sim_device_sync_locked(int dev);
CUresult ca_sim_is_capturing_locked(ca_stream_t stream, int *capturing);
CUresult ca_sim_stream_device_locked(ca_stream_t stream, int *dev);
void ca_sim_complete_all_locked(void);

/* "oracle.c" */
/* A touch's work completed: forget the touch. */
void ca_sim_touch_done_locked(sim_touch_t *t);
/* Map, unmap or release of memory that pending work touches. */
void ca_sim_oracle_pages_locked(const char *what, uintptr_t va, size_t size);
void ca_sim_oracle_release_locked(uint64_t handle);
/* The table's check_handout (backend.h). */
void ca_sim_check_handout(uintptr_t va, size_t size, ca_stream_t stream, bool stream_ordered, void *site);

/* "host.c": pinned host memory */
void ca_sim_host_open_locked(size_t capacity);
void ca_sim_host_teardown_locked(bool unmap);
CUresult ca_sim_host_alloc_locked(int dev, size_t size, void **ptr);
CUresult ca_sim_host_free_locked(void *ptr, size_t size);
/* true when [va, va+n) lies in one pinned allocation: a copy from or to it
 * is device work on that host memory, which the oracle watches too. */
bool ca_sim_host_range_locked(uintptr_t va, size_t n);

/* "faults.c" */
/* Counts a call of op, waits its latency, and returns the injected error
 * when this call is chosen to fail (else 0). */
CUresult ca_sim_enter(ca_backend_op_t op);
/* Counts rc as an error of op when it is one; returns rc. */
CUresult ca_sim_leave(ca_backend_op_t op, CUresult rc);
void ca_sim_count_violation(void);
/* Applies the configuration's fault, rate and latency settings. */
void ca_sim_faults_arm(const ca_backend_options_t *options);
/* Forgets every counter and control. */
void ca_sim_faults_reset(void);

#endif /* CUDALLOC_SIM_INTERNAL_H */
