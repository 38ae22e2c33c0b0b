/* Every CUDA entry point that libcudalloc.so exports, listed once.
 *
 * The lists drive the real-function slots (real.c), the dlsym and
 * cuGetProcAddress interposition (dlsym.c, procaddr.c) and the symbol test
 * (tests/test_shim_symbols.c). Besides these, the library exports dlsym
 * (two glibc versions) and the public cudalloc_* API, nothing else.
 */
#ifndef CUDALLOC_SHIM_SYMBOLS_H
#define CUDALLOC_SHIM_SYMBOLS_H

/* Runtime API calls cudalloc serves in every mode: memory (pinned host
 * memory too), streams, capture, async copies (which the pinned cache
 * watches), IPC export, peer access, the last-error pair. */
#define CA_SYMS_RUNTIME(X)                                                      \
  X(cudaMalloc) X(cudaFree) X(cudaMallocAsync) X(cudaMallocAsync_ptsz)          \
  X(cudaFreeAsync) X(cudaFreeAsync_ptsz) X(cudaMallocPitch) X(cudaMalloc3D)     \
  X(cudaMemGetInfo) X(cudaDeviceReset)                                          \
  X(cudaStreamCreate) X(cudaStreamCreateWithFlags)                              \
  X(cudaStreamCreateWithPriority) X(cudaStreamDestroy)                          \
  X(cudaStreamBeginCapture) X(cudaStreamBeginCapture_ptsz)                      \
  X(cudaStreamBeginCaptureToGraph) X(cudaStreamBeginCaptureToGraph_ptsz)        \
  X(cudaStreamEndCapture) X(cudaStreamEndCapture_ptsz)                          \
  X(cudaMallocHost) X(cudaHostAlloc) X(cudaFreeHost)                            \
  X(cudaIpcGetMemHandle) X(cudaDeviceEnablePeerAccess)                          \
  X(cudaMemcpyAsync) X(cudaMemcpyAsync_ptsz)                                    \
  X(cudaGetLastError) X(cudaPeekAtLastError)

/* Runtime API calls served on the simulated device (backend:sim) and
 * forwarded untouched to the real runtime otherwise. */
#define CA_SYMS_SIM_RUNTIME(X)                                                  \
  X(cudaSetDevice) X(cudaGetDevice) X(cudaGetDeviceCount)                       \
  X(cudaGetDeviceProperties) X(cudaDeviceSynchronize)                           \
  X(cudaStreamSynchronize) X(cudaStreamSynchronize_ptsz)                        \
  X(cudaStreamQuery) X(cudaStreamQuery_ptsz)                                    \
  X(cudaStreamWaitEvent) X(cudaStreamWaitEvent_ptsz)                            \
  X(cudaEventCreate) X(cudaEventCreateWithFlags) X(cudaEventRecord)             \
  X(cudaEventRecord_ptsz) X(cudaEventQuery) X(cudaEventSynchronize)             \
  X(cudaEventDestroy) X(cudaEventElapsedTime)                                   \
  X(cudaMemcpy) X(cudaMemcpy_ptds)                                              \
  X(cudaMemset) X(cudaMemset_ptds) X(cudaMemsetAsync) X(cudaMemsetAsync_ptsz)   \
  X(cudaLaunchKernel) X(cudaLaunchKernel_ptsz)

/* Driver API calls, with what cuGetProcAddress needs to name them without a
 * driver: X(exported name, requested name, first CUDA version, stream kind).
 * Kind: A = any, L = legacy default stream, P = per-thread default stream. */
#define CA_SYMS_DRIVER(X)                                                       \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, A)                                         \
  X(cuMemFree_v2, cuMemFree, 3020, A)                                           \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, A)                               \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, A)                                     \
  X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020, A)                     \
  X(cuMemAllocHost_v2, cuMemAllocHost, 3020, A)                                 \
  X(cuMemHostAlloc, cuMemHostAlloc, 2020, A)                                    \
  X(cuMemFreeHost, cuMemFreeHost, 2000, A)                                      \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, L)                                 \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, P)                            \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, L)                                   \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, P)                              \
  X(cuStreamCreate, cuStreamCreate, 2000, A)                                    \
  X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050, A)            \
  X(cuStreamDestroy_v2, cuStreamDestroy, 4000, A)                               \
  X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, L)                       \
  X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, P)                  \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, L)                    \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, P)               \
  X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, L)         \
  X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, P)    \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000, L)                           \
  X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, P)                      \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, A)              \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, A)                              \
  X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000, A)                      \
  X(cuGetProcAddress, cuGetProcAddress, 11030, A)                               \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, A)

/* Driver API calls served only on the simulated device, in the same form.
 * With a real driver cuGetProcAddress and dlsym hand out the driver's own
 * entry point untouched, so that kernel launches cost nothing extra. */
#define CA_SYMS_SIM_DRIVER(X)                                                   \
  X(cuLaunchKernel, cuLaunchKernel, 4000, L)                                    \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, P)

#endif /* CUDALLOC_SHIM_SYMBOLS_H */
