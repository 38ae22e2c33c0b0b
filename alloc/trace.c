/* The event log's recorder: the hooks build a record and hand it to the
 * per-thread buffers (trace_buf.c, every event to the file) or to the ring
 * (trace_ring.c, the last N kept for a dump). docs/trace.md describes the
 * log. */
#define _GNU_SOURCE /* gettid */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "calm.h"
#include "config.h"
#include "log.h"
#include "trace_buf.h"
#include "trace_clock.h"
#include "trace_ring.h"

ca_alone_bool_t ca_trace_recording;

typedef enum { MODE_OFF, MODE_FULL, MODE_RING } mode_t_;

static mode_t_ mode;                    /* set at start and stop, before and after recording */
static char path[CA_CONFIG_PATH_MAX];
static ca_trace_file_t file;            /* the full log (MODE_FULL) */
static uint64_t lost;                   /* events no buffer could take (atomic) */
static uint64_t last_ns[CA_MAX_SLOTS]; /* per device, under its lock */
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t thread_id(void) {
  static __thread uint32_t tid;
  if (!tid) tid = (uint32_t)syscall(SYS_gettid);
  return tid;
}

/* Strictly increasing per device, so that a device's events sort into the
 * order its lock gave them even when the clock reads equal. Raw clock
 * (trace_clock.h): the readers convert it. */
static inline __attribute__((always_inline)) uint64_t device_time(const ca_device_t *d) {
  uint64_t t = ca_trace_clock_raw();
  uint64_t *last = &last_ns[d->slot];
  if (t <= *last) t = *last + 1;
  return *last = t;
}

/* Where the event goes: a slot of the thread's buffer, filled in place
 * (full mode: *buf is the buffer), or a record on the stack for the ring.
 * NULL: lost. */
static ca_trace_event_t *begin(ca_trace_event_t *local, ca_trace_buf_t **buf) {
#ifdef CA_TESTING
  if (ca_debug.trace_drop_one) {   /* a lost event nobody counts: the count checks must catch it */
    ca_debug.trace_drop_one = false;
    return NULL;
  }
#endif
  if (mode == MODE_RING) return local;
  ca_trace_event_t *ev = ca_trace_buf_claim(buf);
  if (!ev) __atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
  return ev;
}

static void end(ca_trace_event_t *ev, const ca_trace_event_t *local, ca_trace_buf_t *buf) {
  if (ev == local) ca_trace_ring_put(ev, thread_id());
  else ca_trace_buf_commit(buf);
}

/* Fills a held event (trace_log.h): the site's pointer, no id yet. */
static void fill(ca_trace_event_t *ev, const ca_device_t *d, ca_trace_kind_t kind, uint64_t addr, uint64_t size,
                 uint64_t stream, const void *site, uint32_t extra) {
  ev->time_ns = device_time(d);
  ev->addr = addr;
  ev->size = size;
  ev->stream = stream;
  ca_trace_hold_site(ev, site);
  ev->kind = (uint16_t)kind;
  ev->device = (int16_t)d->ordinal;
  ev->extra = extra;
}

void ca_trace_block_event(ca_device_t *d, ca_trace_kind_t kind, const ca_block_t *b, ca_stream_t stream) {
  ca_trace_buf_t *buf = NULL;
  ca_trace_event_t local, *ev = begin(&local, &buf);
  if (!ev) return;
  size_t extra = b->size - b->requested;
  fill(ev, d, kind, b->addr, b->requested, (uint64_t)(uintptr_t)stream, b->site,
       extra > UINT32_MAX ? UINT32_MAX : (uint32_t)extra);
  end(ev, &local, buf);
}

void ca_trace_mem_event(ca_device_t *d, ca_trace_kind_t kind, uintptr_t addr, size_t size) {
  ca_trace_buf_t *buf = NULL;
  ca_trace_event_t local, *ev = begin(&local, &buf);
  if (ev) {
    fill(ev, d, kind, addr, size, 0, NULL, 0);
    end(ev, &local, buf);
  }
  if (kind == CA_EV_OOM) {   /* what led to it, on disk before the program reacts */
    if (mode == MODE_FULL) ca_trace_buf_flush();
    else {
      char oom[CA_CONFIG_PATH_MAX + 8];
      snprintf(oom, sizeof oom, "%s.oom", path);
      ca_trace_dump(oom);
    }
  }
}

// ----------------------------------------------------------------------------
// Start, stop, dump
// ----------------------------------------------------------------------------

/* Recording from now on: the front cache's inline tries stop (calm.h). */
static void record(void) {
  __atomic_store_n(&ca_trace_recording.v, true, __ATOMIC_RELEASE);
  if (!CA_DEBUG(trace_leaves_calm)) ca_stir(CA_STIR_TRACE);
}

void ca_trace_start(void) {
  if (!ca_config.trace[0] || mode != MODE_OFF) return;
  if (!ca_config_expand_path(ca_config.trace, "", path, sizeof path)) {
    ca_log("trace: the path %s does not fit once expanded; nothing is recorded", ca_config.trace);
    return;
  }
  ca_trace_clock_start();
  memset(last_ns, 0, sizeof last_ns);
  __atomic_store_n(&lost, 0, __ATOMIC_RELAXED);
  if (ca_config.trace_ring) {
    if (!ca_trace_ring_start(ca_config.trace_ring)) {
      ca_log("trace: no memory for a ring of %llu events; nothing is recorded",
             (unsigned long long)ca_config.trace_ring);
      return;
    }
    mode = MODE_RING;
  } else {
    if (!ca_trace_file_open(&file, path, 0)) return;
    if (!ca_trace_buf_start(&file)) {
      ca_trace_file_close(&file, 0);
      return;
    }
    mode = MODE_FULL;
  }
  record();
}

static bool recording(void) { return __atomic_load_n(&ca_trace_recording.v, __ATOMIC_ACQUIRE); }

void ca_trace_pause(void) {
  __atomic_store_n(&ca_trace_recording.v, false, __ATOMIC_RELEASE);
  ca_unstir_unless(CA_STIR_TRACE, recording);
}

void ca_trace_resume(void) {
  if (mode != MODE_OFF) record();
}

void ca_trace_stop(void) {
  if (mode == MODE_FULL) {
    ca_trace_buf_stop();
    ca_trace_file_close(&file, __atomic_load_n(&lost, __ATOMIC_RELAXED));
  } else if (mode == MODE_RING) {
    ca_trace_dump(NULL);
    ca_trace_ring_stop();
  }
  mode = MODE_OFF;
  ca_trace_log_forget_sites();
}

static CUresult dump_ring(const char *to) {
  ca_trace_file_t *tf = malloc(sizeof *tf);   /* its buffer is too big for a stack */
  if (!tf) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = CUDA_ERROR_UNKNOWN;
  if (ca_trace_file_open(tf, to, CA_TRACE_FLAG_RING)) {
    uint64_t older = ca_trace_ring_write(tf);
    if (ca_trace_file_close(tf, older)) rc = CUDA_SUCCESS;
  }
  free(tf);
  return rc;
}

CUresult ca_trace_dump(const char *to) {
  if (mode == MODE_OFF) return CUDA_ERROR_NOT_INITIALIZED;
  if (mode == MODE_FULL) {
    if (to) return CUDA_ERROR_INVALID_VALUE;   /* the full log has one file, its own */
    ca_trace_buf_flush();
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&dump_lock);
  CUresult rc = dump_ring(to ? to : path);
  pthread_mutex_unlock(&dump_lock);
  return rc;
}

void ca_trace_fork_child(void) {
  __atomic_store_n(&ca_trace_recording.v, false, __ATOMIC_RELAXED);
  ca_unstir(CA_STIR_TRACE);
  if (mode == MODE_FULL && file.fd >= 0) close(file.fd);   /* the parent's bytes stay the parent's */
  ca_trace_buf_abandon();
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  dump_lock = fresh;
  mode = MODE_OFF;
}
