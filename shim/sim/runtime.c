/* The runtime calls a program needs around its allocations, served on the
 * simulated device (CUDALLOC_CONF=backend:sim), so that a program that
 * allocates, copies and computes on host-addressable device memory runs on
 * a machine without a GPU. This is how CI tests the preload.
 *
 * With the CUDA backend every call here goes to the real runtime untouched.
 * Events and stream queries are in events.c; async copies, which the
 * pinned cache must see on every backend, in ../host.c (they come back
 * here for the copy).
 */
#include "sim_runtime.h"
#include "backend_sim.h"

#include <stdio.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Devices
// ----------------------------------------------------------------------------

CA_EXPORT cudaError_t cudaSetDevice(int dev) {
  CA_SIM_OR_REAL(cudaSetDevice, dev);
  return ca_rt_result(be->set_device(dev));
}

CA_EXPORT cudaError_t cudaGetDevice(int *dev) {
  CA_SIM_OR_REAL(cudaGetDevice, dev);
  if (!dev) return ca_rt_error(cudaErrorInvalidValue);
  return ca_rt_result(be->get_device(dev));
}

CA_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
  CA_SIM_OR_REAL(cudaGetDeviceCount, count);
  if (!count) return ca_rt_error(cudaErrorInvalidValue);
  return ca_rt_result(be->device_count(count));
}

/* A minimal description: the name and memory of the simulated device, and
 * the few limits that programs commonly read. */
CA_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int dev) {
  CA_SIM_OR_REAL(cudaGetDeviceProperties, prop, dev);
  ca_device_props_t p;
  if (!prop) return ca_rt_error(cudaErrorInvalidValue);
  CUresult rc = be->device_props(dev, &p);
  if (rc != CUDA_SUCCESS) return ca_rt_result(rc);
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "%s", p.name);
  prop->totalGlobalMem = p.total_bytes;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = 1;
  prop->textureAlignment = CA_PITCH_ALIGN;
  prop->texturePitchAlignment = CA_PITCH_ALIGN;
  prop->unifiedAddressing = 1;
  prop->memoryPoolsSupported = 1;
  return cudaSuccess;
}

static cudaError_t device_synchronize(void) {
  CA_SIM_OR_REAL(cudaDeviceSynchronize);
  return ca_rt_result(be->device_sync(ca_device_current()));
}

/* On CUDA too: a C training loop synchronizes the device once per step,
 * which proves every earlier free's work complete (no event needed) and
 * is where step_on:sync ends a step for the creep report. */
CA_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  ca_sync_token_t t = ca_device_sync_begin();
  cudaError_t err = device_synchronize();
  ca_device_sync_end(t, err == cudaSuccess);
  return err;
}

static cudaError_t stream_synchronize(cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaStreamSynchronize, stream);
  return ca_rt_result(be->stream_sync(stream));
}

/* On CUDA too: while the legacy stream is the only one, synchronizing it
 * proves every earlier free's work complete, as cudaDeviceSynchronize. */
CA_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  ca_sync_token_t t = ca_stream_sync_begin(stream);
  cudaError_t err = stream_synchronize(stream);
  ca_stream_sync_end(t, err == cudaSuccess);
  return err;
}

CA_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  ca_stream_used(ca_ptsz(stream));   /* stream 0 is the thread's own here */
  CA_SIM_OR_REAL(cudaStreamSynchronize_ptsz, stream);
  return ca_rt_result(be->stream_sync(ca_ptsz(stream)));
}

// ----------------------------------------------------------------------------
// Copies and fills: device memory is host memory here. The bytes move at
// once; what a GPU would do later is told to the simulated device instead:
// an asynchronous copy or fill is work on its stream that touches the
// memory until the stream gets there, and a synchronous copy is a host
// access, which pending work must not overlap.
// ----------------------------------------------------------------------------

static cudaError_t copy_args(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if ((unsigned)kind > cudaMemcpyDefault) return ca_rt_error(cudaErrorInvalidMemcpyDirection);
  if (n && (!dst || !src)) return ca_rt_error(cudaErrorInvalidValue);
  return cudaSuccess;
}

/* Work on stream that reads [src, +n) and writes [dst, +n); also a fill
 * (src NULL). A touch refused (a bad stream, unmapped memory) moves nothing. */
static cudaError_t device_work(ca_stream_t stream, void *dst, const void *src, size_t n, void *site) {
  CUresult rc = src ? ca_sim_touch_at(stream, src, n, 0, site) : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) rc = ca_sim_touch_at(stream, dst, n, 1, site);
  return ca_rt_result(rc);
}

cudaError_t ca_sim_rt_copy_async(ca_stream_t stream, void *dst, const void *src, size_t n,
                                 enum cudaMemcpyKind kind, void *site) {
  /* the calling thread's context, as on every runtime call (CA_SIM_ONLY) */
  if (!ca_shim_sim_backend()) return cudaErrorInitializationError;
  cudaError_t err = copy_args(dst, src, n, kind);
  if (err == cudaSuccess && n) err = device_work(stream, dst, src, n, site);
  if (err == cudaSuccess && n) memmove(dst, src, n);
  return err;
}

static cudaError_t fill_async(ca_stream_t stream, void *dst, int value, size_t n, void *site) {
  if (n && !dst) return ca_rt_error(cudaErrorInvalidValue);
  cudaError_t err = n ? device_work(stream, dst, NULL, n, site) : cudaSuccess;
  if (err == cudaSuccess && n) memset(dst, value, n);
  return err;
}

/* An operation on stream now, waited for: it waits for what any work
 * issued on stream would (on the legacy stream, the blocking streams'
 * earlier work too), which an event recorded there marks. */
static CUresult operation_waited(const ca_backend_t *be, ca_stream_t stream) {
  ca_event_t ev;
  CUresult rc = be->event_create(ca_device_current(), &ev);
  if (rc != CUDA_SUCCESS) return rc;
  rc = be->event_record(ev, stream);
  if (rc == CUDA_SUCCESS) rc = be->event_sync(ev);
  be->event_destroy(ev);
  return rc;
}

/* cudaMemcpy waits for the work queued before it on its stream, as on a
 * GPU; that is what lets simulated work complete. What is still pending
 * then (non-blocking streams) races with the copy. */
static cudaError_t copy_sync(const ca_backend_t *be, ca_stream_t stream, void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, void *site) {
  cudaError_t err = copy_args(dst, src, n, kind);
  if (err == cudaSuccess) err = ca_rt_result(operation_waited(be, stream));
  if (err != cudaSuccess || !n) return err;
  ca_sim_host_access(src, n, 0, site);
  ca_sim_host_access(dst, n, 1, site);
  memmove(dst, src, n);
  return cudaSuccess;
}

static cudaError_t memcpy_legacy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  CA_SIM_OR_REAL(cudaMemcpy, dst, src, n, kind);
  return copy_sync(be, CA_STREAM_LEGACY, dst, src, n, kind, CA_CALLER);
}

/* On CUDA too: a copy to the host returns once it has completed, after all
 * the legacy stream's earlier work, which (while that stream is the only
 * one) is a synchronization of the device for the frees before it. */
CA_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  bool proves = kind == cudaMemcpyDeviceToHost;
  ca_sync_token_t t = proves ? ca_stream_sync_begin(CA_STREAM_LEGACY) : (ca_sync_token_t){.dev = -1};
  if (!proves) ca_stream_used(CA_STREAM_LEGACY);
  cudaError_t err = memcpy_legacy(dst, src, n, kind);
  ca_stream_sync_end(t, err == cudaSuccess);
  return err;
}

/* On CUDA too: a program built with --default-stream per-thread copies
 * through here, which tells cudalloc that per-thread streams are in use. */
CA_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  ca_stream_used(CA_STREAM_PER_THREAD);
  CA_SIM_OR_REAL(cudaMemcpy_ptds, dst, src, n, kind);
  return copy_sync(be, CA_STREAM_PER_THREAD, dst, src, n, kind, CA_CALLER);
}

/* cudaMemset is asynchronous to the host for device memory: work on the
 * legacy (or per-thread) stream like cudaMemsetAsync. */
CA_EXPORT cudaError_t cudaMemset(void *dst, int value, size_t n) {
  CA_SIM_ONLY(cudaMemset, dst, value, n);
  return fill_async(CA_STREAM_LEGACY, dst, value, n, CA_CALLER);
}

CA_EXPORT cudaError_t cudaMemset_ptds(void *dst, int value, size_t n) {
  CA_SIM_ONLY(cudaMemset_ptds, dst, value, n);
  return fill_async(CA_STREAM_PER_THREAD, dst, value, n, CA_CALLER);
}

CA_EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemsetAsync, dst, value, n, stream);
  return fill_async(stream, dst, value, n, CA_CALLER);
}

CA_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t n, cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemsetAsync_ptsz, dst, value, n, stream);
  return fill_async(ca_ptsz(stream), dst, value, n, CA_CALLER);
}
