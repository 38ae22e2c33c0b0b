/* Streams and events of the simulated device.
 *
 * The device runs no kernels: the work on a stream is what events mark, what
 * a test says touches memory (ca_sim_touch) and waits for events. In auto
 * mode work is complete as soon as it is issued. In manual mode issuing
 * queues a piece of work on the stream, pending until the test completes
 * the stream or something waits for it (event, stream or device
 * synchronize: waiting is what lets simulated time pass). Lag mode is
 * manual mode in which each piece of work also completes by itself after
 * k further calls of the device, k drawn in [1, lag_ops] from a seeded
 * generator: the host runs ahead of the device, as on a GPU.
 *
 * The legacy default stream orders itself with every blocking stream of its
 * device (created blocking, and per-thread default streams): its work waits
 * for the work recorded before it on them, and theirs waits for its earlier
 * work. Completing a piece of work therefore completes what it waited for.
 * Non-blocking streams wait for nothing but themselves.
 *
 * Like the driver: an event and its stream must belong to one device
 * (CUDA_ERROR_INVALID_HANDLE; the default stream handles name the event's
 * device's streams when an event is recorded, as the CUDA backend records
 * in the event's context); an event recorded while its stream captures
 * cannot be queried or waited for (CUDA_ERROR_CAPTURED_EVENT); a capturing
 * stream (or a device with one) cannot be synchronized
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), nor can anything be waited for or
 * queried by a thread that a capture's mode forbids it, which invalidates
 * the capture. */
#define _GNU_SOURCE
#include "sim_internal.h"
#include "thread_heap.h"

#include <stdlib.h>
#include <string.h>

/* Per-thread default streams, one per device, valid while gen matches. */
typedef struct {
  unsigned gen;
  sim_stream_t *s[SIM_MAX_DEVICES];
} ptds_t;
/* On the heap (thread_heap.h says why); the streams outlive it, linked in
 * their devices, as a thread's per-thread streams outlive it on a GPU. */
static __thread ptds_t *tls_ptds;
CA_THREAD_HEAP(ptds_t, tls_ptds, my_ptds)

// ----------------------------------------------------------------------------
// Work: queued on a stream, completed in stream order, reference counted
// (the queue, events and dependants each hold one)
// ----------------------------------------------------------------------------

static void work_unref(sim_work_t *w) {
  if (w && --w->refs == 0) {
    free(w->deps);
    free(w);
  }
}

/* Puts w (whose reference the caller gives) on the worklist, once. */
static void worklist_push(sim_work_t **wl, sim_work_t *w) {
  if (w->done || w->listed) {
    work_unref(w);
    return;
  }
  w->listed = true;
  w->wl_next = *wl;
  *wl = w;
}

/* Completes w's stream up to w, listing what that work waited for. */
static void complete_through(sim_work_t *w, sim_work_t **wl) {
  sim_stream_t *s = w->stream;
  for (;;) {
    sim_work_t *x = s->head;
    s->head = x->next;
    if (!s->head) s->tail = NULL;
    x->done = true;
    x->stream = NULL;
    x->next = NULL;
    if (x->touch) ca_sim_touch_done_locked(x->touch);
    x->touch = NULL;
    for (unsigned k = 0; k < x->ndeps; k++) worklist_push(wl, x->deps[k]);
    free(x->deps);
    x->deps = NULL;
    x->ndeps = 0;
    bool last = x == w;
    work_unref(x); /* the queue's reference; w's worklist reference remains */
    if (last) return;
  }
}

/* Completes target and, transitively, everything it waited for. A worklist
 * rather than recursion: chains of waits can be as long as the program. */
static void work_complete(sim_work_t *target) {
  if (!target || target->done) return;
  sim_work_t *wl = NULL;
  target->refs++;
  worklist_push(&wl, target);
  while (wl) {
    sim_work_t *w = wl;
    wl = w->wl_next;
    w->listed = false;
    if (!w->done) complete_through(w, &wl);
    work_unref(w);
  }
}

static bool blocking(const sim_stream_t *s) {
  return s->kind == SIM_STREAM_BLOCKING || s->kind == SIM_STREAM_PER_THREAD;
}

/* The pending work a new piece of work on s must wait for. */
static unsigned deps_of(const sim_stream_t *s, sim_work_t **out, unsigned cap) {
  const sim_device_t *d = &ca_sim.dev[s->dev];
  unsigned n = 0;
  if (s->kind == SIM_STREAM_LEGACY) {
    for (const sim_stream_t *b = d->streams; b; b = b->next)
      if (blocking(b) && b->tail) {
        if (out && n < cap) out[n] = b->tail;
        n++;
      }
  } else if (blocking(s) && d->legacy.tail) {
    if (out && n < cap) out[n] = d->legacy.tail;
    n++;
  }
  return n;
}

/* splitmix64: lag mode's draws, under the lock, so one seed gives one run. */
static uint64_t lag_draw(void) {
  uint64_t z = (ca_sim.lag_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Lag mode: w completes by itself at the end of the k-th call after the
 * one that issued it (the clock ticks at the end of every call). */
static void lag_schedule(sim_work_t *w) {
  unsigned n = ca_sim.lag_ops ? ca_sim.lag_ops : 1;
  w->due = ca_sim.ops + 1 + 1 + lag_draw() % n;
  w->refs++;
  w->lag_next = ca_sim.lagging;
  ca_sim.lagging = w;
}

/* Queues a new piece of work on s; it also waits for extra when pending. */
static sim_work_t *work_push(sim_stream_t *s, sim_work_t *extra) {
  sim_work_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (extra && extra->done) extra = NULL;
  unsigned n = deps_of(s, NULL, 0) + (extra != NULL);
  if (n && !(w->deps = malloc(n * sizeof *w->deps))) {
    free(w);
    return NULL;
  }
  w->ndeps = deps_of(s, w->deps, n);
  if (extra) w->deps[w->ndeps++] = extra;
  for (unsigned k = 0; k < w->ndeps; k++) w->deps[k]->refs++;
  w->refs = 1;
  w->stream = s;
  w->seq = ++ca_sim.seq;
  if (s->tail) s->tail->next = w;
  else s->head = w;
  s->tail = w;
  if (ca_sim.event_mode == CA_SIM_EVENTS_LAG) lag_schedule(w);
  return w;
}

// ----------------------------------------------------------------------------
// Ordering: what work is sure to be complete before new work on a stream
// ----------------------------------------------------------------------------

/* The pending work that new work on s would wait for: s's last work and,
 * by the legacy stream's rules, deps_of(s). */
static unsigned frontier(const sim_stream_t *s, sim_work_t **out, unsigned cap) {
  unsigned n = 0;
  if (s->tail) out[n++] = s->tail;
  return n + deps_of(s, out + n, cap - n);
}

typedef struct {
  sim_work_t **v;
  size_t n, cap;
} work_stack_t;

static bool stack_push(work_stack_t *st, sim_work_t *w) {
  if (st->n == st->cap) {
    size_t cap = st->cap ? st->cap * 2 : 64;
    sim_work_t **v = realloc(st->v, cap * sizeof *v);
    if (!v) return false;
    st->v = v;
    st->cap = cap;
  }
  st->v[st->n++] = w;
  return true;
}

/* Marks, per stream, the latest work reached from w: reaching a work
 * reaches every earlier one of its stream and what each waited for. */
static bool reach(work_stack_t *st, sim_work_t *w, unsigned epoch) {
  sim_stream_t *x = w->stream;
  bool seen = x->reach_epoch == epoch;
  if (seen && x->reach_seq >= w->seq) return true;
  uint64_t from = seen ? x->reach_seq : 0;
  x->reach_epoch = epoch;
  x->reach_seq = w->seq;
  for (sim_work_t *y = x->head; y && y->seq <= w->seq; y = y->next)
    for (unsigned k = 0; y->seq > from && k < y->ndeps; k++)
      if (!y->deps[k]->done && !stack_push(st, y->deps[k])) return false;
  return true;
}

static bool reached(const sim_work_t *w, unsigned epoch) {
  return w->stream->reach_epoch == epoch && w->stream->reach_seq >= w->seq;
}

/* A walk back from what new work on s would wait for. Out of host memory
 * it answers "not ordered": a false alarm rather than a missed one. */
bool ca_sim_work_ordered_before_locked(sim_work_t *w, sim_stream_t *s) {
  if (w->done) return true;
  unsigned cap = deps_of(s, NULL, 0) + 1;
  work_stack_t st = {.v = malloc(cap * sizeof(sim_work_t *)), .cap = cap};
  if (!st.v) return false;
  st.n = frontier(s, st.v, cap);
  unsigned epoch = ++ca_sim.epoch;
  bool ok = true;
  while (ok && st.n && !reached(w, epoch)) ok = reach(&st, st.v[--st.n], epoch);
  free(st.v);
  return ok && reached(w, epoch);
}

// ----------------------------------------------------------------------------
// Streams
// ----------------------------------------------------------------------------

static void device_link(sim_stream_t *s) {
  sim_device_t *d = &ca_sim.dev[s->dev];
  s->next = d->streams;
  d->streams = s;
}

static sim_stream_t *per_thread_stream(int dev) {
  ptds_t *t = my_ptds();
  if (!t) return NULL;
  unsigned gen = __atomic_load_n(&ca_sim.gen, __ATOMIC_ACQUIRE);
  if (t->gen != gen) {
    memset(t->s, 0, sizeof t->s);
    t->gen = gen;
  }
  if (!t->s[dev]) {
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->dev = dev;
    s->kind = SIM_STREAM_PER_THREAD;
    device_link(s);
    t->s[dev] = s;
  }
  return t->s[dev];
}

/* A live stream created by ca_sim_stream_create, or NULL. Handles are
 * table ids, never reused: a destroyed stream's handle stays invalid even
 * once another stream lives where it did. */
static sim_stream_t *created_stream(ca_stream_t handle) {
  return ca_sim_slot_get(&ca_sim.streams, (uint64_t)(uintptr_t)handle);
}

static bool default_stream(ca_stream_t handle) {
  return handle == NULL || handle == CA_STREAM_LEGACY || handle == CA_STREAM_PER_THREAD;
}

/* The stream a handle names, for the calling thread: a default stream is
 * the current context's, and a thread without one has none. */
CUresult ca_sim_stream_resolve_locked(ca_stream_t handle, sim_stream_t **out, bool quiet) {
  int dev;
  CUresult rc = CUDA_SUCCESS;
  if (!default_stream(handle)) {
    if (!(*out = created_stream(handle))) rc = CUDA_ERROR_INVALID_HANDLE;
  } else if (!ca_sim_current_context(&dev)) {
    rc = CUDA_ERROR_INVALID_CONTEXT;
  } else if (handle == CA_STREAM_PER_THREAD) {
    if (!(*out = per_thread_stream(dev))) return CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    *out = &ca_sim.dev[dev].legacy;
  }
  return rc == CUDA_SUCCESS || quiet ? rc : ca_sim_violation(rc);
}

/* The stream a handle names for the calling thread, the default handles
 * naming dev's default streams. */
static CUresult stream_resolve_on(int dev, ca_stream_t handle, sim_stream_t **out) {
  if (handle == NULL || handle == CA_STREAM_LEGACY) *out = &ca_sim.dev[dev].legacy;
  else if (handle == CA_STREAM_PER_THREAD) *out = per_thread_stream(dev);
  else if (!(*out = created_stream(handle))) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult stream_resolve(ca_stream_t handle, sim_stream_t **out) {
  return ca_sim_stream_resolve_locked(handle, out, false);
}

/* A created stream's device (the default handles are answered without the
 * lock, in sim.c). A question, not a use: the core asks it to check the
 * program's handles, so an unknown one is no broken rule. */
CUresult ca_sim_stream_device_locked(ca_stream_t stream, int *dev) {
  sim_stream_t *s = created_stream(stream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *dev = s->dev;
  return CUDA_SUCCESS;
}

/* Frees destroyed streams whose work is all done. Done apart from
 * completion, so that completing never frees a stream being walked. */
static void sweep_streams(void) {
  for (int i = 0; i < ca_sim.ndev; i++)
    for (sim_stream_t **p = &ca_sim.dev[i].streams; *p;) {
      sim_stream_t *s = *p;
      if (s->destroyed && !s->head) {
        *p = s->next;
        free(s);
      } else {
        p = &s->next;
      }
    }
}

/* Completes the work issued on s so far (and what it waited for), not the
 * work a later operation on the legacy stream would wait for: the
 * stricter reading of synchronizing the legacy stream. */
static void stream_complete_locked(sim_stream_t *s) {
  work_complete(s->tail);
  sweep_streams();
}

/* A stream of d captures: synchronizing d would break its capture. */
static bool device_capturing(const sim_device_t *d) {
  if (d->legacy.capturing) return true;
  for (const sim_stream_t *s = d->streams; s; s = s->next)
    if (s->capturing && !s->destroyed) return true;
  return false;
}

static void device_complete(sim_device_t *d) {
  work_complete(d->legacy.tail);
  for (sim_stream_t *s = d->streams; s; s = s->next) work_complete(s->tail);
}

void ca_sim_complete_all_locked(void) {
  for (int i = 0; i < ca_sim.ndev; i++) device_complete(&ca_sim.dev[i]);
  sweep_streams();
}

/* A capture that forbids the calling thread to wait or query: a global
 * one anywhere, a thread-local one of this thread. */
static bool capture_forbids(const sim_stream_t *s, pthread_t self) {
  if (!s->capturing || s->destroyed) return false;
  return s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
         (s->capture_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && pthread_equal(s->capture_thread, self));
}

/* As the driver: a wait or query that a capture forbids fails, and the
 * capture is invalidated (its end reports it). */
static CUresult capture_allows_waiting(void) {
  if (!ca_sim.captured) return CUDA_SUCCESS;
  pthread_t self = pthread_self();
  bool forbidden = false;
  for (int i = 0; i < ca_sim.ndev; i++) {
    sim_device_t *d = &ca_sim.dev[i];
    if (capture_forbids(&d->legacy, self)) forbidden = d->legacy.capture_invalid = true;
    for (sim_stream_t *s = d->streams; s; s = s->next)
      if (capture_forbids(s, self)) forbidden = s->capture_invalid = true;
  }
  return forbidden ? ca_sim_violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) : CUDA_SUCCESS;
}

CUresult ca_sim_stream_sync_locked(ca_stream_t stream) {
  sim_stream_t *s;
  CUresult rc = stream_resolve(stream, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (s->capturing) return ca_sim_violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if ((rc = capture_allows_waiting()) != CUDA_SUCCESS) return rc;
  stream_complete_locked(s);
  return CUDA_SUCCESS;
}

CUresult ca_sim_device_sync_locked(int dev) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  if (device_capturing(&ca_sim.dev[dev]))
    return ca_sim_violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUresult rc = capture_allows_waiting();
  if (rc != CUDA_SUCCESS) return rc;
  device_complete(&ca_sim.dev[dev]);
  sweep_streams();
  return CUDA_SUCCESS;
}

CUresult ca_sim_is_capturing_locked(ca_stream_t stream, int *capturing) {
  sim_stream_t *s;
  CUresult rc = stream_resolve(stream, &s);
  if (rc == CUDA_SUCCESS) *capturing = s->capturing;
  return rc;
}

// ----------------------------------------------------------------------------
// Events
// ----------------------------------------------------------------------------

typedef struct sim_event_obj_s {
  int dev;
  bool captured;                /* last recorded while its stream captured */
  sim_work_t *work;             /* last recorded work; NULL: complete */
} sim_event_obj_t;

static sim_event_obj_t *event_get(ca_event_t event) {
  return ca_sim_slot_get(&ca_sim.events, (uint64_t)(uintptr_t)event);
}

static void event_free(void *obj) {
  sim_event_obj_t *e = obj;
  work_unref(e->work);
  free(e);
}

CUresult ca_sim_event_create_locked(int dev, ca_event_t *event) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  sim_event_obj_t *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->dev = dev;
  uint64_t id = ca_sim_slot_put(&ca_sim.events, e);
  if (!id) {
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *event = (ca_event_t)(uintptr_t)id;
  return CUDA_SUCCESS;
}

CUresult ca_sim_event_record_locked(ca_event_t event, ca_stream_t stream) {
  sim_event_obj_t *e = event_get(event);
  sim_stream_t *s;
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  /* The default handles name the event's device's streams (backend.h). */
  CUresult rc = stream_resolve_on(e->dev, stream, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (s->dev != e->dev) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  sim_work_t *w = NULL;
  bool pending = ca_sim.event_mode != CA_SIM_EVENTS_AUTO && !s->capturing;
  if (pending && !(w = work_push(s, NULL))) return CUDA_ERROR_OUT_OF_MEMORY;
  if (w) w->refs++;
  work_unref(e->work);
  e->work = w;
  e->captured = s->capturing;
  return CUDA_SUCCESS;
}

/* 0 when e's work is complete (dropping it), else CUDA_ERROR_NOT_READY. */
static CUresult event_state(sim_event_obj_t *e) {
  if (e->work && !e->work->done) return CUDA_ERROR_NOT_READY;
  work_unref(e->work);
  e->work = NULL;
  return CUDA_SUCCESS;
}

/* The event to query or wait for, or the driver's refusal. */
static CUresult event_to_wait(ca_event_t event, sim_event_obj_t **out) {
  sim_event_obj_t *e = *out = event_get(event);
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  if (e->captured) return ca_sim_violation(CUDA_ERROR_CAPTURED_EVENT);
  return capture_allows_waiting();
}

CUresult ca_sim_event_query_locked(ca_event_t event) {
  sim_event_obj_t *e;
  CUresult rc = event_to_wait(event, &e);
  return rc != CUDA_SUCCESS ? rc : event_state(e);
}

CUresult ca_sim_event_sync_locked(ca_event_t event) {
  sim_event_obj_t *e;
  CUresult rc = event_to_wait(event, &e);
  if (rc != CUDA_SUCCESS) return rc;
  if (e->work) {
    work_complete(e->work);
    sweep_streams();
  }
  return event_state(e);
}

CUresult ca_sim_event_destroy_locked(ca_event_t event) {
  sim_event_obj_t *e = event_get(event);
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  ca_sim_slot_drop(&ca_sim.events, (uint64_t)(uintptr_t)event);
  event_free(e);
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Teardown
// ----------------------------------------------------------------------------

static void lagging_drop(void) {
  while (ca_sim.lagging) {
    sim_work_t *w = ca_sim.lagging;
    ca_sim.lagging = w->lag_next;
    work_unref(w);
  }
}

static void stream_forget(void *obj) { (void)obj; /* freed from its device's list */ }

void ca_sim_streams_teardown_locked(void) {
  ca_sim_complete_all_locked(); /* releases every queue's and dependant's reference */
  lagging_drop();
  ca_sim_slot_clear(&ca_sim.events, event_free);
  ca_sim_slot_clear(&ca_sim.streams, stream_forget);
  for (int i = 0; i < ca_sim.ndev; i++) {
    sim_device_t *d = &ca_sim.dev[i];
    while (d->streams) {
      sim_stream_t *s = d->streams;
      d->streams = s->next;
      free(s);
    }
  }
}

// ----------------------------------------------------------------------------
// Lag mode's clock, and work that touches memory
// ----------------------------------------------------------------------------

void ca_sim_lag_tick_locked(void) {
  ca_sim.ops++;
  bool completed = false;
  for (sim_work_t **p = &ca_sim.lagging; *p;) {
    sim_work_t *w = *p;
    if (!w->done && w->due > ca_sim.ops) {
      p = &w->lag_next;
      continue;
    }
    if (!w->done) work_complete(w);
    completed = true;
    *p = w->lag_next;
    work_unref(w);
  }
  if (completed) sweep_streams();
}

CUresult ca_sim_work_push_touch_locked(sim_stream_t *s, sim_touch_t *touch) {
  sim_work_t *w = work_push(s, NULL);
  if (!w) return CUDA_ERROR_OUT_OF_MEMORY;
  w->touch = touch;
  touch->work = w;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Controls (backend_sim.h)
// ----------------------------------------------------------------------------

static CUresult stream_create_locked(ca_stream_t *stream, int nonblocking) {
  int dev;
  if (!ca_sim_current_context(&dev)) return ca_sim_violation(CUDA_ERROR_INVALID_CONTEXT);
  sim_stream_t *s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!(s->id = ca_sim_slot_put(&ca_sim.streams, s))) {
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->dev = dev;
  s->kind = nonblocking ? SIM_STREAM_NONBLOCKING : SIM_STREAM_BLOCKING;
  device_link(s);
  *stream = (ca_stream_t)(uintptr_t)s->id;
  return CUDA_SUCCESS;
}

CUresult ca_sim_stream_create(ca_stream_t *stream, int nonblocking) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  rc = stream_create_locked(stream, nonblocking);
  ca_sim_unlock();
  return rc;
}

/* Its pending work stays pending (and still orders the legacy stream) until
 * completed, as on a GPU; the handle is invalid at once. */
CUresult ca_sim_stream_destroy(ca_stream_t stream) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  sim_stream_t *s = created_stream(stream);
  if (s) {
    ca_sim_slot_drop(&ca_sim.streams, s->id);
    s->destroyed = true;
    s->capturing = false;
    sweep_streams();
  }
  ca_sim_unlock();
  return s ? CUDA_SUCCESS : ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
}

/* As cuStreamWaitEvent: later work on stream waits for the event's work.
 * Nothing to wait for in auto mode, or for an event not pending. */
static CUresult wait_event_locked(ca_stream_t stream, ca_event_t event) {
  sim_event_obj_t *e = event_get(event);
  sim_stream_t *s;
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  CUresult rc = stream_resolve(stream, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (e->captured) return ca_sim_violation(CUDA_ERROR_CAPTURED_EVENT);
  if (ca_sim.event_mode == CA_SIM_EVENTS_AUTO || s->capturing || !e->work || e->work->done)
    return CUDA_SUCCESS;
  return work_push(s, e->work) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* As cuStreamQuery: every piece of work issued on stream so far is done.
 * A call of the device, so that a polling loop lets lagging work finish. */
CUresult ca_sim_stream_query_locked(ca_stream_t stream) {
  sim_stream_t *s;
  CUresult rc = stream_resolve(stream, &s);
  if (rc == CUDA_SUCCESS) rc = capture_allows_waiting();
  if (rc == CUDA_SUCCESS && s->tail) rc = CUDA_ERROR_NOT_READY;
  return rc;
}

CUresult ca_sim_stream_query(ca_stream_t stream) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  rc = ca_sim_stream_query_locked(stream);
  ca_sim_lag_tick_locked();
  ca_sim_unlock();
  return rc;
}

CUresult ca_sim_stream_wait_event(ca_stream_t stream, ca_event_t event) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  rc = wait_event_locked(stream, event);
  ca_sim_unlock();
  return rc;
}

int ca_sim_stream_is_nonblocking(ca_stream_t stream) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return 0;
  sim_stream_t *s = created_stream(stream);
  int nb = s && s->kind == SIM_STREAM_NONBLOCKING;
  ca_sim_unlock();
  return nb;
}

void ca_sim_stream_complete(ca_stream_t stream) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return;
  sim_stream_t *s;
  if (stream_resolve(stream, &s) == CUDA_SUCCESS) stream_complete_locked(s);
  ca_sim_unlock();
}

void ca_sim_complete_all(void) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return;
  ca_sim_complete_all_locked();
  ca_sim_unlock();
}

/* Back to auto mode, what is pending completes: nothing would complete it
 * otherwise. Work pending when lag mode begins waits to be completed as in
 * manual mode; work issued from then on lags. */
void ca_sim_set_events(ca_sim_events_t mode, unsigned lag_ops) {
  if ((unsigned)mode > CA_SIM_EVENTS_LAG) return;
  pthread_mutex_lock(&ca_sim.lock);
  if (mode == CA_SIM_EVENTS_AUTO && ca_sim.started) ca_sim_complete_all_locked();
  ca_sim.event_mode = mode;
  if (lag_ops) ca_sim.lag_ops = lag_ops;
  pthread_mutex_unlock(&ca_sim.lock);
}

void ca_sim_set_manual_events(int manual) {
  ca_sim_set_events(manual ? CA_SIM_EVENTS_MANUAL : CA_SIM_EVENTS_AUTO, 0);
}

void ca_sim_begin_capture(ca_stream_t stream, CUstreamCaptureMode mode) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return;
  sim_stream_t *s;
  if (stream_resolve(stream, &s) == CUDA_SUCCESS) {
    s->capturing = ca_sim.captured = true;
    s->capture_invalid = false;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
  }
  ca_sim_unlock();
}

CUresult ca_sim_end_capture(ca_stream_t stream) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  sim_stream_t *s;
  if ((rc = stream_resolve(stream, &s)) == CUDA_SUCCESS) {
    rc = s->capture_invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    s->capturing = s->capture_invalid = false;
  }
  ca_sim_unlock();
  return rc;
}

void ca_sim_set_capturing(ca_stream_t stream, int capturing) {
  if (capturing) ca_sim_begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  else ca_sim_end_capture(stream);
}

int ca_sim_capture_invalidated(ca_stream_t stream) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return 0;
  sim_stream_t *s;
  int invalid = stream_resolve(stream, &s) == CUDA_SUCCESS && s->capturing && s->capture_invalid;
  ca_sim_unlock();
  return invalid;
}
