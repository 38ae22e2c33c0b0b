/* The runtime calls a program needs around its allocations, served on the
 * simulated device (CUDALLOC_CONF=backend:sim), so that a program that
 * allocates, copies and computes on host-addressable device memory runs on
 * a machine without a GPU. This is how CI tests the preload.
 *
 * With the CUDA backend every call here goes to the real runtime untouched.
 * Events and stream queries are in events.c, pinned host memory in
 * host.c.
 */
#include "sim_runtime.h"

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

CA_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  CA_SIM_OR_REAL(cudaDeviceSynchronize);
  return ca_rt_result(be->device_sync(ca_device_current()));
}

CA_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaStreamSynchronize, stream);
  return ca_rt_result(be->stream_sync(stream));
}

CA_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  CA_SIM_OR_REAL(cudaStreamSynchronize_ptsz, stream);
  return ca_rt_result(be->stream_sync(ca_ptsz(stream)));
}

// ----------------------------------------------------------------------------
// Copies and fills: device memory is host memory here
// ----------------------------------------------------------------------------

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if ((unsigned)kind > cudaMemcpyDefault) return ca_rt_error(cudaErrorInvalidMemcpyDirection);
  if (n && (!dst || !src)) return ca_rt_error(cudaErrorInvalidValue);
  if (n) memmove(dst, src, n);
  return cudaSuccess;
}

static cudaError_t fill(void *dst, int value, size_t n) {
  if (n && !dst) return ca_rt_error(cudaErrorInvalidValue);
  if (n) memset(dst, value, n);
  return cudaSuccess;
}

/* cudaMemcpy waits for the work queued before it on its stream, as on a
 * GPU; that is what lets simulated work complete. */
CA_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  CA_SIM_OR_REAL(cudaMemcpy, dst, src, n, kind);
  cudaError_t err = ca_rt_result(be->stream_sync(CA_STREAM_LEGACY));
  return err != cudaSuccess ? err : copy(dst, src, n, kind);
}

CA_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  CA_SIM_OR_REAL(cudaMemcpy_ptds, dst, src, n, kind);
  cudaError_t err = ca_rt_result(be->stream_sync(CA_STREAM_PER_THREAD));
  return err != cudaSuccess ? err : copy(dst, src, n, kind);
}

CA_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemcpyAsync, dst, src, n, kind, stream);
  return copy(dst, src, n, kind);
}

CA_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemcpyAsync_ptsz, dst, src, n, kind, stream);
  return copy(dst, src, n, kind);
}

CA_EXPORT cudaError_t cudaMemset(void *dst, int value, size_t n) {
  CA_SIM_ONLY(cudaMemset, dst, value, n);
  return fill(dst, value, n);
}

CA_EXPORT cudaError_t cudaMemset_ptds(void *dst, int value, size_t n) {
  CA_SIM_ONLY(cudaMemset_ptds, dst, value, n);
  return fill(dst, value, n);
}

CA_EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemsetAsync, dst, value, n, stream);
  return fill(dst, value, n);
}

CA_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t n, cudaStream_t stream) {
  CA_SIM_ONLY(cudaMemsetAsync_ptsz, dst, value, n, stream);
  return fill(dst, value, n);
}
