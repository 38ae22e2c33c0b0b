/* Streams and events of the simulated device.
 *
 * The device runs no kernels: the work on a stream is what events mark. In
 * auto mode an event is complete as soon as it is recorded. In manual mode
 * recording queues a piece of work on the stream, pending until the test
 * completes the stream or something waits for it (event, stream or device
 * synchronize: waiting is what lets simulated time pass).
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

#include <stdlib.h>
#include <string.h>

/* Per-thread default streams, one per device, valid while gen matches. */
static __thread struct {
  unsigned gen;
  sim_stream_t *s[SIM_MAX_DEVICES];
} tls_ptds;

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

/* Queues a new piece of work on s. */
static sim_work_t *work_push(sim_stream_t *s) {
  sim_work_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  unsigned n = deps_of(s, NULL, 0);
  if (n && !(w->deps = malloc(n * sizeof *w->deps))) {
    free(w);
    return NULL;
  }
  w->ndeps = deps_of(s, w->deps, n);
  for (unsigned k = 0; k < w->ndeps; k++) w->deps[k]->refs++;
  w->refs = 1;
  w->stream = s;
  if (s->tail) s->tail->next = w;
  else s->head = w;
  s->tail = w;
  return w;
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
  unsigned gen = __atomic_load_n(&ca_sim.gen, __ATOMIC_ACQUIRE);
  if (tls_ptds.gen != gen) {
    memset(tls_ptds.s, 0, sizeof tls_ptds.s);
    tls_ptds.gen = gen;
  }
  if (!tls_ptds.s[dev]) {
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->dev = dev;
    s->kind = SIM_STREAM_PER_THREAD;
    device_link(s);
    tls_ptds.s[dev] = s;
  }
  return tls_ptds.s[dev];
}

/* A live stream created by ca_sim_stream_create, or NULL. */
static sim_stream_t *created_stream(ca_stream_t handle) {
  for (int i = 0; i < ca_sim.ndev; i++)
    for (sim_stream_t *s = ca_sim.dev[i].streams; s; s = s->next)
      if (s == handle && !s->destroyed && s->kind != SIM_STREAM_PER_THREAD) return s;
  return NULL;
}

/* The stream a handle names for the calling thread, the default handles
 * naming dev's default streams. */
static CUresult stream_resolve_on(int dev, ca_stream_t handle, sim_stream_t **out) {
  if (handle == NULL || handle == CA_STREAM_LEGACY) *out = &ca_sim.dev[dev].legacy;
  else if (handle == CA_STREAM_PER_THREAD) *out = per_thread_stream(dev);
  else if (!(*out = created_stream(handle))) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The stream a handle names for the calling thread, on its current device. */
static CUresult stream_resolve(ca_stream_t handle, sim_stream_t **out) {
  return stream_resolve_on(ca_sim_current_device(), handle, out);
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

static void stream_complete_locked(sim_stream_t *s) {
  work_complete(s->tail);
  sweep_streams();
}

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
  if (ca_sim.manual && !s->capturing && !(w = work_push(s))) return CUDA_ERROR_OUT_OF_MEMORY;
  if (w) w->refs++;
  work_unref(e->work);
  e->work = w;
  e->captured = s->capturing;
  return CUDA_SUCCESS;
}

/* 0 when e's work is complete (dropping it), else CUDA_ERROR_NOT_READY. */
static CUresult event_state(sim_event_obj_t *e) {
  if (e->captured) return ca_sim_violation(CUDA_ERROR_CAPTURED_EVENT);
  if (e->work && !e->work->done) return CUDA_ERROR_NOT_READY;
  work_unref(e->work);
  e->work = NULL;
  return CUDA_SUCCESS;
}

CUresult ca_sim_event_query_locked(ca_event_t event) {
  sim_event_obj_t *e = event_get(event);
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  CUresult rc = e->captured ? CUDA_SUCCESS : capture_allows_waiting();
  return rc != CUDA_SUCCESS ? rc : event_state(e);
}

CUresult ca_sim_event_sync_locked(ca_event_t event) {
  sim_event_obj_t *e = event_get(event);
  if (!e) return ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
  CUresult rc = e->captured ? CUDA_SUCCESS : capture_allows_waiting();
  if (rc != CUDA_SUCCESS) return rc;
  if (!e->captured && e->work) {
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

void ca_sim_streams_teardown_locked(void) {
  ca_sim_complete_all_locked(); /* releases every queue's and dependant's reference */
  ca_sim_slot_clear(&ca_sim.events, event_free);
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
// Controls (backend_sim.h)
// ----------------------------------------------------------------------------

CUresult ca_sim_stream_create(ca_stream_t *stream, int nonblocking) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  sim_stream_t *s = calloc(1, sizeof *s);
  if (s) {
    s->dev = ca_sim_current_device();
    s->kind = nonblocking ? SIM_STREAM_NONBLOCKING : SIM_STREAM_BLOCKING;
    device_link(s);
    *stream = s;
  }
  ca_sim_unlock();
  return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Its pending work stays pending (and still orders the legacy stream) until
 * completed, as on a GPU; the handle is invalid at once. */
CUresult ca_sim_stream_destroy(ca_stream_t stream) {
  CUresult rc = ca_sim_lock_started();
  if (rc != CUDA_SUCCESS) return rc;
  sim_stream_t *s = created_stream(stream);
  if (s) {
    s->destroyed = true;
    s->capturing = false;
    sweep_streams();
  }
  ca_sim_unlock();
  return s ? CUDA_SUCCESS : ca_sim_violation(CUDA_ERROR_INVALID_HANDLE);
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
 * otherwise. */
void ca_sim_set_manual_events(int manual) {
  pthread_mutex_lock(&ca_sim.lock);
  if (!manual && ca_sim.started) ca_sim_complete_all_locked();
  ca_sim.manual = manual != 0;
  pthread_mutex_unlock(&ca_sim.lock);
}

void ca_sim_begin_capture(ca_stream_t stream, CUstreamCaptureMode mode) {
  if (ca_sim_lock_started() != CUDA_SUCCESS) return;
  sim_stream_t *s;
  if (stream_resolve(stream, &s) == CUDA_SUCCESS) {
    s->capturing = true;
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
