/* Runtime events and stream queries on the simulated device.
 *
 * The simulated device's events (backend_sim) order work but keep no time;
 * a runtime event here wraps one with the host time of its last record, so
 * that cudaEventElapsedTime measures what the program did between two
 * records. With the CUDA backend every call goes to the real runtime.
 */
#define _GNU_SOURCE
#include "sim_runtime.h"
#include "backend_sim.h"

#include <stdlib.h>
#include <time.h>

#define EVENT_MAGIC 0x65766e74u   /* "evnt": a live event of this file */

typedef struct sim_event_s {
  unsigned magic;
  unsigned flags;          /* cudaEventDisableTiming, ... */
  ca_event_t event;        /* the simulated device's event */
  bool recorded;
  struct timespec when;    /* host time of the last record */
} sim_event_t;

/* The event behind a handle, or NULL for one this file did not create. */
static sim_event_t *event_of(cudaEvent_t handle) {
  sim_event_t *e = (sim_event_t *)handle;
  return e && e->magic == EVENT_MAGIC ? e : NULL;
}

// ----------------------------------------------------------------------------
// Events
// ----------------------------------------------------------------------------

static cudaError_t create(const ca_backend_t *be, cudaEvent_t *out, unsigned flags) {
  if (!out) return ca_rt_error(cudaErrorInvalidValue);
  sim_event_t *e = calloc(1, sizeof *e);
  if (!e) return ca_rt_error(cudaErrorMemoryAllocation);
  CUresult rc = be->event_create(ca_device_current(), &e->event);
  if (rc != CUDA_SUCCESS) {
    free(e);
    return ca_rt_result(rc);
  }
  e->magic = EVENT_MAGIC;
  e->flags = flags;
  *out = (cudaEvent_t)e;
  return cudaSuccess;
}

CA_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event) {
  CA_SIM_OR_REAL(cudaEventCreate, event);
  return create(be, event, cudaEventDefault);
}

CA_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  CA_SIM_OR_REAL(cudaEventCreateWithFlags, event, flags);
  return create(be, event, flags);
}

static cudaError_t record(const ca_backend_t *be, cudaEvent_t handle, ca_stream_t stream) {
  sim_event_t *e = event_of(handle);
  if (!e) return ca_rt_error(cudaErrorInvalidResourceHandle);
  CUresult rc = be->event_record(e->event, stream);
  if (rc != CUDA_SUCCESS) return ca_rt_result(rc);
  e->recorded = true;
  clock_gettime(CLOCK_MONOTONIC, &e->when);
  return cudaSuccess;
}

CA_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaEventRecord, event, stream);
  return record(be, event, stream);
}

CA_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaEventRecord_ptsz, event, stream);
  return record(be, event, ca_ptsz(stream));
}

/* An event never recorded has no work to wait for: it is complete. */
CA_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  CA_SIM_OR_REAL(cudaEventQuery, event);
  sim_event_t *e = event_of(event);
  if (!e) return ca_rt_error(cudaErrorInvalidResourceHandle);
  CUresult rc = e->recorded ? be->event_query(e->event) : CUDA_SUCCESS;
  return rc == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CA_SIM_OR_REAL(cudaEventSynchronize, event);
  sim_event_t *e = event_of(event);
  if (!e) return ca_rt_error(cudaErrorInvalidResourceHandle);
  return e->recorded ? ca_rt_result(be->event_sync(e->event)) : cudaSuccess;
}

CA_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CA_SIM_OR_REAL(cudaEventDestroy, event);
  sim_event_t *e = event_of(event);
  if (!e) return ca_rt_error(cudaErrorInvalidResourceHandle);
  CUresult rc = be->event_destroy(e->event);
  e->magic = 0;
  free(e);
  return ca_rt_result(rc);
}

static double ms_between(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* As the runtime: both events recorded, with timing, and complete. */
CA_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  CA_SIM_OR_REAL(cudaEventElapsedTime, ms, start, end);
  sim_event_t *a = event_of(start), *b = event_of(end);
  if (!ms) return ca_rt_error(cudaErrorInvalidValue);
  if (!a || !b || !a->recorded || !b->recorded || ((a->flags | b->flags) & cudaEventDisableTiming))
    return ca_rt_error(cudaErrorInvalidResourceHandle);
  if (be->event_query(a->event) == CUDA_ERROR_NOT_READY || be->event_query(b->event) == CUDA_ERROR_NOT_READY)
    return cudaErrorNotReady;
  *ms = (float)ms_between(&a->when, &b->when);
  return cudaSuccess;
}

// ----------------------------------------------------------------------------
// Streams: queries and waits
// ----------------------------------------------------------------------------

/* Whether the work queued on stream so far has completed (an event
 * recorded to tell would itself be new, pending work). */
static cudaError_t stream_query(ca_stream_t stream) {
  CUresult rc = ca_sim_stream_query(stream);
  return rc == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ca_rt_result(rc);
}

CA_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaStreamQuery, stream);
  return stream_query(stream);
}

CA_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaStreamQuery_ptsz, stream);
  return stream_query(ca_ptsz(stream));
}

/* Later work on stream waits for the event's: the simulated device keeps
 * that order, so that memory used by the waiting stream is judged by it. */
static cudaError_t wait_event(ca_stream_t stream, cudaEvent_t event) {
  sim_event_t *e = event_of(event);
  if (!e) return ca_rt_error(cudaErrorInvalidResourceHandle);
  return e->recorded ? ca_rt_result(ca_sim_stream_wait_event(stream, e->event)) : cudaSuccess;
}

CA_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  CA_SIM_ONLY(cudaStreamWaitEvent, stream, event, flags);
  return wait_event(stream, event);
}

CA_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  CA_SIM_ONLY(cudaStreamWaitEvent_ptsz, stream, event, flags);
  return wait_event(ca_ptsz(stream), event);
}
