/* The simulated device: the backend table, start and teardown, devices, and
 * the handle tables the other sim_*.c files use.
 *
 * Every entry of the table takes the same path: ca_sim_enter counts the call,
 * waits its latency and may inject a failure (which then has no effect); the
 * work runs under one mutex; ca_sim_leave counts errors. A broken contract
 * rule is reported by ca_sim_violation, which counts it. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* gen starts at 1: a thread's zeroed state names no generation, so no context */
sim_state_t ca_sim = {.lock = PTHREAD_MUTEX_INITIALIZER, .gen = 1};

/* The calling thread's current context: the primary context of dev, while
 * gen matches ca_sim.gen (so a teardown leaves every thread without one).
 * A thread has none until set_device, or get_device, which binds device 0
 * as the runtime does on a thread's first call (the CUDA backend's
 * get_device does the same). */
static __thread struct {
  unsigned gen;
  int dev;
  void *key;   /* sim_context_key's answer while gen holds, made when bound */
} tls_device;

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

CUresult ca_sim_violation(CUresult err) {
  ca_sim_count_violation();
  return err;
}

CUresult ca_sim_lock_started(void) {
  pthread_mutex_lock(&ca_sim.lock);
  if (ca_sim.started) return CUDA_SUCCESS;
  pthread_mutex_unlock(&ca_sim.lock);
  return ca_sim_violation(CUDA_ERROR_NOT_INITIALIZED);
}

void ca_sim_unlock(void) { pthread_mutex_unlock(&ca_sim.lock); }

bool ca_sim_valid_device(int dev) { return dev >= 0 && dev < LOAD(&ca_sim.ndev); }

bool ca_sim_current_context(int *dev) {
  if (tls_device.gen != LOAD(&ca_sim.gen) || !LOAD(&ca_sim.started)) return false;
  *dev = tls_device.dev;
  return true;
}

int ca_sim_current_device(void) {
  int dev;
  return ca_sim_current_context(&dev) ? dev : 0;
}

/* A context is a device's in one life of the simulation (gen): a key
 * made of both is never reused. */
static void bind_thread(int dev) {
  unsigned gen = LOAD(&ca_sim.gen);
  tls_device.gen = gen;
  tls_device.dev = dev;
  tls_device.key = (void *)(uintptr_t)((uint64_t)gen << 16 | (uint64_t)(dev + 1));
}

void ca_sim_thread_init(void) {
  int dev;
  if (LOAD(&ca_sim.started) && !ca_sim_current_context(&dev)) bind_thread(0);
}

// ----------------------------------------------------------------------------
// Handle tables
// ----------------------------------------------------------------------------

#define SLOT_INDEX(id) ((uint32_t)(id) - 1)
#define SLOT_GEN(id) ((uint32_t)((id) >> 32) & 0xffffffu)

static uint64_t slot_id(const sim_slots_t *t, uint32_t idx) {
  return (uint64_t)t->tag << 56 | (uint64_t)(t->v[idx].gen & 0xffffffu) << 32 | (idx + 1);
}

uint64_t ca_sim_slot_put(sim_slots_t *t, void *obj) {
  uint32_t idx;
  if (t->free_head) {
    idx = t->free_head - 1;
    t->free_head = t->v[idx].next_free;
  } else {
    if (t->n == t->cap) {
      uint32_t cap = t->cap ? t->cap * 2 : 64;
      sim_slot_t *v = realloc(t->v, cap * sizeof *v);
      if (!v) return 0;
      t->v = v;
      t->cap = cap;
    }
    idx = t->n++;
    t->v[idx].gen = 1;
  }
  t->v[idx].obj = obj;
  t->v[idx].next_free = 0;
  return slot_id(t, idx);
}

void *ca_sim_slot_get(const sim_slots_t *t, uint64_t id) {
  uint32_t idx = SLOT_INDEX(id);
  if ((uint8_t)(id >> 56) != t->tag || idx >= t->n) return NULL;
  const sim_slot_t *s = &t->v[idx];
  return s->obj && (s->gen & 0xffffffu) == SLOT_GEN(id) ? s->obj : NULL;
}

void ca_sim_slot_drop(sim_slots_t *t, uint64_t id) {
  if (!ca_sim_slot_get(t, id)) return;
  uint32_t idx = SLOT_INDEX(id);
  t->v[idx].obj = NULL;
  t->v[idx].gen++;
  t->v[idx].next_free = t->free_head;
  t->free_head = idx + 1;
}

void ca_sim_slot_clear(sim_slots_t *t, void (*fn)(void *obj)) {
  for (uint32_t i = 0; i < t->n; i++)
    if (t->v[i].obj) fn(t->v[i].obj);
  free(t->v);
  uint8_t tag = t->tag;
  memset(t, 0, sizeof *t);
  t->tag = tag;
}

// ----------------------------------------------------------------------------
// Start and teardown
// ----------------------------------------------------------------------------

static bool settings_valid(size_t capacity, size_t gran, unsigned ndev) {
  long page = sysconf(_SC_PAGESIZE);
  if (ndev < 1 || ndev > SIM_MAX_DEVICES) return false;
  if (gran == 0 || (gran & (gran - 1)) || gran % (size_t)page) return false;
  return capacity >= gran;
}

/* sim_other_process: memory that other processes pretend to hold on every
 * device, so that the driver refuses it as a GPU shared with another job
 * would (at most the whole device). */
static void pretend_others_locked(const ca_backend_options_t *o, unsigned ndev, size_t capacity) {
  size_t held = 0;
  ca_sim.nothers = 0;
  for (unsigned i = 0; i < o->others_count && i < CA_BACKEND_MAX_OTHERS; i++) {
    ca_sim.others[ca_sim.nothers++] = o->others[i];
    held += o->others[i].bytes < capacity - held ? (size_t)o->others[i].bytes : capacity - held;
  }
  for (unsigned i = 0; i < ndev; i++) ca_sim.dev[i].held_by_others = held;
}

/* Builds the devices from the options. */
static CUresult start_locked(const ca_backend_options_t *o) {
  size_t gran = o->granularity;
  size_t capacity = o->capacity / (gran ? gran : 1) * gran;
  unsigned ndev = o->devices;
  if (!settings_valid(capacity, gran, ndev)) {
    ca_log("simulated device: bad settings (%u devices, capacity %zu, granularity %zu)", ndev,
           (size_t)o->capacity, gran);
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  ca_sim.handles.tag = 'H';
  ca_sim.events.tag = 'E';
  ca_sim.streams.tag = 'S';
  for (unsigned i = 0; i < ndev; i++) {
    CUresult rc = ca_sim_device_open_locked(&ca_sim.dev[i], (int)i, capacity, gran);
    if (rc != CUDA_SUCCESS) {
      STORE(&ca_sim.ndev, (int)i);
      ca_sim_vm_teardown_locked(true);
      STORE(&ca_sim.ndev, 0);
      return rc;
    }
  }
  ca_sim.no_vmm = o->no_vmm;
  ca_sim_host_open_locked(o->pinned_capacity);
  pretend_others_locked(o, ndev, capacity);
  STORE(&ca_sim.ndev, (int)ndev);
  STORE(&ca_sim.started, 1);
  return CUDA_SUCCESS;
}

/* Forgets the whole state and every control; the next init starts afresh.
 * Host objects must have been freed already (or are given up). */
static void forget_locked(void) {
  STORE(&ca_sim.started, 0);
  STORE(&ca_sim.ndev, 0);
  __atomic_add_fetch(&ca_sim.gen, 1, __ATOMIC_ACQ_REL);
  memset(ca_sim.dev, 0, sizeof ca_sim.dev);
  ca_sim.resv = NULL;
  ca_sim.nresv = ca_sim.resv_cap = 0;
  memset(&ca_sim.handles, 0, sizeof ca_sim.handles);
  memset(&ca_sim.events, 0, sizeof ca_sim.events);
  memset(&ca_sim.streams, 0, sizeof ca_sim.streams);
  ca_sim.armed = false;
  ca_sim.event_mode = CA_SIM_EVENTS_AUTO;
  ca_sim.lag_ops = 0;
  ca_sim.lagging = NULL;
  ca_sim.touches = NULL;
  __atomic_store_n(&ca_sim.ntouches, 0, __ATOMIC_RELEASE);
  ca_sim.ops = ca_sim.seq = 0;
  ca_sim.nothers = 0;
  ca_sim_faults_reset();
}

static void teardown_locked(bool unmap) {
  if (ca_sim.started) {
    ca_sim_streams_teardown_locked();
    ca_sim_vm_teardown_locked(unmap);
    ca_sim_host_teardown_locked(unmap);
  }
  forget_locked();
}

void ca_sim_shutdown(void) {
  pthread_mutex_lock(&ca_sim.lock);
  teardown_locked(true);
  pthread_mutex_unlock(&ca_sim.lock);
}

/* Waits up to ~100 ms for the lock: after fork() its owner may not exist. */
static bool lock_patiently(void) {
  for (int i = 0; i < 100; i++) {
    if (pthread_mutex_trylock(&ca_sim.lock) == 0) return true;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return false;
}

/* Forgets everything without touching the host mappings (the child of a
 * fork shares them with its parent). */
static void sim_abandon(void) {
  if (lock_patiently()) {
    teardown_locked(false);
  } else {
    /* the owner is gone: give the state up (its host objects leak) */
    pthread_mutex_init(&ca_sim.lock, NULL);
    pthread_mutex_lock(&ca_sim.lock);
    forget_locked();
  }
  pthread_mutex_unlock(&ca_sim.lock);
}

/* Controls from the configuration are applied once per life of the
 * simulation (before init counts itself, so that sim_fail:init@1 works). */
static void arm_once(const ca_backend_options_t *o) {
  pthread_mutex_lock(&ca_sim.lock);
  if (!ca_sim.armed) {
    ca_sim.armed = true;
    /* a control set before the start wins over the configuration */
    if (ca_sim.event_mode == CA_SIM_EVENTS_AUTO && o->events <= CA_SIM_EVENTS_LAG) ca_sim.event_mode = o->events;
    if (!ca_sim.lag_ops) ca_sim.lag_ops = o->lag_ops ? o->lag_ops : 8;
    ca_sim.lag_rng = o->seed ^ 0x6c61672d6f707321ull; /* "lag-ops!": apart from the fault draws */
    ca_sim_faults_arm(o);
  }
  pthread_mutex_unlock(&ca_sim.lock);
}

static CUresult sim_init(const ca_backend_options_t *options) {
  ca_backend_options_t defaults = {.devices = 1, .capacity = 1024ull << 20, .granularity = 2ull << 20, .seed = 1,
                                   .pinned_capacity = 1024ull << 20};
  const ca_backend_options_t *o = options ? options : &defaults;
  arm_once(o);
  CUresult rc = ca_sim_enter(CA_OP_init);
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_lock(&ca_sim.lock);
    if (!ca_sim.started) rc = start_locked(o);
    pthread_mutex_unlock(&ca_sim.lock);
  }
  return ca_sim_leave(CA_OP_init, rc);
}

// ----------------------------------------------------------------------------
// Devices
// ----------------------------------------------------------------------------

static CUresult started_or_violation(void) {
  return LOAD(&ca_sim.started) ? CUDA_SUCCESS : ca_sim_violation(CUDA_ERROR_NOT_INITIALIZED);
}

static CUresult sim_device_count(int *count) {
  CUresult rc = ca_sim_enter(CA_OP_device_count);
  if (rc == CUDA_SUCCESS) rc = started_or_violation();
  if (rc == CUDA_SUCCESS) *count = LOAD(&ca_sim.ndev);
  return ca_sim_leave(CA_OP_device_count, rc);
}

static CUresult sim_get_device(int *dev) {
  CUresult rc = ca_sim_enter(CA_OP_get_device);
  if (rc == CUDA_SUCCESS) rc = started_or_violation();
  if (rc == CUDA_SUCCESS) {
    ca_sim_thread_init();
    *dev = ca_sim_current_device();
  }
  return ca_sim_leave(CA_OP_get_device, rc);
}

/* What cuCtxGetCurrent costs: the thread's own record read, no lock. The
 * key is made when the thread is bound (bind_thread) and holds while its
 * life (gen) does; ca_sim.started needs no test: a thread is bound only
 * while started, and the teardown that clears started moves gen on. */
static void *sim_context_key(void) {
  return tls_device.gen == LOAD(&ca_sim.gen) ? tls_device.key : NULL;
}

static CUresult sim_set_device(int dev) {
  CUresult rc = ca_sim_enter(CA_OP_set_device);
  if (rc == CUDA_SUCCESS) rc = started_or_violation();
  if (rc == CUDA_SUCCESS && !ca_sim_valid_device(dev))
    rc = ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  if (rc == CUDA_SUCCESS) bind_thread(dev);
  return ca_sim_leave(CA_OP_set_device, rc);
}

static CUresult device_props_locked(int dev, ca_device_props_t *props) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  memset(props, 0, sizeof *props);
  props->total_bytes = ca_sim.dev[dev].capacity;
  props->vmm = !ca_sim.no_vmm;
  props->granularity = props->vmm ? ca_sim.dev[dev].gran : 0;
  snprintf(props->name, sizeof props->name, "cudalloc simulated device %d", dev);
  return CUDA_SUCCESS;
}

static CUresult mem_info_locked(int dev, size_t *free_bytes, size_t *total_bytes) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  const sim_device_t *d = &ca_sim.dev[dev];
  *free_bytes = d->capacity - d->held_by_others - d->used;
  *total_bytes = ca_sim.dev[dev].capacity;
  return CUDA_SUCCESS;
}

/* This process first (its handles' bytes), then the pretended others. Not
 * an op of its own: asked only by an out-of-memory report, it has no fault
 * to inject and ticks no clock. */
static CUresult sim_processes(int dev, ca_process_t *out, unsigned cap, unsigned *n) {
  *n = 0;
  CUresult rc = ca_sim_lock_started();
  if (rc) return rc;
  if (!ca_sim_valid_device(dev)) rc = ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  if (rc == CUDA_SUCCESS && cap) out[(*n)++] = (ca_process_t){.pid = (uint32_t)getpid(), .bytes = ca_sim.dev[dev].used};
  for (unsigned i = 0; rc == CUDA_SUCCESS && i < ca_sim.nothers && *n < cap; i++) out[(*n)++] = ca_sim.others[i];
  ca_sim_unlock();
  return rc;
}

// ----------------------------------------------------------------------------
// The table: every other entry is the same wrapper around a *_locked call,
// and each such call is one tick of lag mode's clock
// ----------------------------------------------------------------------------

#define SIM_LOCKED_CALL(op, call)                                  \
  do {                                                             \
    CUresult rc_ = ca_sim_enter(CA_OP_##op);                       \
    if (rc_ == CUDA_SUCCESS) rc_ = ca_sim_lock_started();          \
    if (rc_ == CUDA_SUCCESS) {                                     \
      rc_ = (call);                                                \
      ca_sim_lag_tick_locked();                                    \
      ca_sim_unlock();                                             \
    }                                                              \
    return ca_sim_leave(CA_OP_##op, rc_);                          \
  } while (0)

static CUresult sim_device_props(int dev, ca_device_props_t *props) {
  SIM_LOCKED_CALL(device_props, device_props_locked(dev, props));
}
static CUresult sim_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
  SIM_LOCKED_CALL(mem_info, mem_info_locked(dev, free_bytes, total_bytes));
}
static CUresult sim_reserve(int dev, size_t size, uintptr_t *va) {
  SIM_LOCKED_CALL(reserve, ca_sim_reserve_locked(dev, size, va));
}
static CUresult sim_va_free(uintptr_t va, size_t size) {
  SIM_LOCKED_CALL(va_free, ca_sim_va_free_locked(va, size));
}
static CUresult sim_create(int dev, size_t size, ca_phys_t *handle) {
  SIM_LOCKED_CALL(create, ca_sim_create_locked(dev, size, handle));
}
static CUresult sim_release(ca_phys_t handle) {
  SIM_LOCKED_CALL(release, ca_sim_release_locked(handle));
}
static CUresult sim_map(uintptr_t va, size_t size, ca_phys_t handle, size_t offset) {
  SIM_LOCKED_CALL(map, ca_sim_map_locked(va, size, handle, offset));
}
static CUresult sim_unmap(uintptr_t va, size_t size) {
  SIM_LOCKED_CALL(unmap, ca_sim_unmap_locked(va, size));
}
static CUresult sim_set_access(int dev, uintptr_t va, size_t size) {
  SIM_LOCKED_CALL(set_access, ca_sim_set_access_locked(dev, va, size));
}
static CUresult sim_event_create(int dev, ca_event_t *event) {
  SIM_LOCKED_CALL(event_create, ca_sim_event_create_locked(dev, event));
}
static CUresult sim_event_record(ca_event_t event, ca_stream_t stream) {
  SIM_LOCKED_CALL(event_record, ca_sim_event_record_locked(event, stream));
}
static CUresult sim_event_query(ca_event_t event) {
  SIM_LOCKED_CALL(event_query, ca_sim_event_query_locked(event));
}
static CUresult sim_event_sync(ca_event_t event) {
  SIM_LOCKED_CALL(event_sync, ca_sim_event_sync_locked(event));
}
static CUresult sim_event_destroy(ca_event_t event) {
  SIM_LOCKED_CALL(event_destroy, ca_sim_event_destroy_locked(event));
}
static CUresult sim_stream_sync(ca_stream_t stream) {
  SIM_LOCKED_CALL(stream_sync, ca_sim_stream_sync_locked(stream));
}
static CUresult sim_stream_query(ca_stream_t stream) {
  SIM_LOCKED_CALL(stream_query, ca_sim_stream_query_locked(stream));
}
static CUresult sim_device_sync(int dev) {
  SIM_LOCKED_CALL(device_sync, ca_sim_device_sync_locked(dev));
}
static CUresult sim_is_capturing(ca_stream_t stream, int *capturing) {
  SIM_LOCKED_CALL(is_capturing, ca_sim_is_capturing_locked(stream, capturing));
}
/* The default streams are the current device's: answered without the lock,
 * as get_device is (cudaMalloc asks every time). */
static CUresult sim_stream_device(ca_stream_t stream, int *dev) {
  if (stream == NULL || stream == CA_STREAM_LEGACY || stream == CA_STREAM_PER_THREAD) {
    CUresult rc = ca_sim_enter(CA_OP_stream_device);
    if (rc == CUDA_SUCCESS) rc = started_or_violation();
    if (rc == CUDA_SUCCESS) {
      ca_sim_thread_init();   /* binds device 0 when none is current, as the CUDA backend does */
      *dev = ca_sim_current_device();
    }
    return ca_sim_leave(CA_OP_stream_device, rc);
  }
  SIM_LOCKED_CALL(stream_device, ca_sim_stream_device_locked(stream, dev));
}
static CUresult sim_host_alloc(int dev, size_t size, void **ptr) {
  SIM_LOCKED_CALL(host_alloc, ca_sim_host_alloc_locked(dev, size, ptr));
}
static CUresult sim_host_free(void *ptr, size_t size) {
  SIM_LOCKED_CALL(host_free, ca_sim_host_free_locked(ptr, size));
}

const ca_backend_t ca_backend_sim = {
    .name = "sim",
    .simulated = true,
    .init = sim_init,
    .abandon = sim_abandon,
    .shutdown = ca_sim_shutdown,
    .device_count = sim_device_count,
    .get_device = sim_get_device,
    .set_device = sim_set_device,
    .device_props = sim_device_props,
    .mem_info = sim_mem_info,
    .reserve = sim_reserve,
    .va_free = sim_va_free,
    .create = sim_create,
    .release = sim_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .set_access = sim_set_access,
    .event_create = sim_event_create,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .event_destroy = sim_event_destroy,
    .stream_sync = sim_stream_sync,
    .stream_query = sim_stream_query,
    .device_sync = sim_device_sync,
    .is_capturing = sim_is_capturing,
    .stream_device = sim_stream_device,
    .check_handout = ca_sim_check_handout,
    .handout_pending = &ca_sim.ntouches,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .processes = sim_processes,
    .context_key = sim_context_key,
};
