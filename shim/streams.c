/* Streams and graph capture, in both APIs.
 *
 * Creation and destruction are the real library's (or the simulated
 * device's); cudalloc only learns about them, so that cudaFree's fence
 * covers every stream (non-blocking ones are not ordered by the legacy
 * stream and need an event of their own).
 *
 * Capture: while any stream captures, the core must never block or record
 * events, and allocations on a capturing stream must reach the driver,
 * which turns them into graph memory nodes. The core learns when a capture
 * begins and ends here, and counts them, so that the allocation path asks
 * the driver about capture only while one is underway. On the simulated
 * device, streams and capture are shim/sim/streams.c's.
 */
#include "shim.h"
#include "sim/sim_runtime.h"

static void capture_begun(int err) {
  if (err == 0) ca_capture_begin();
}

static void capture_ended(bool was_capturing, ca_stream_t stream) {
  if (was_capturing && !ca_stream_capturing(stream)) ca_capture_end();
}

// ----------------------------------------------------------------------------
// Runtime API: creation and destruction
// ----------------------------------------------------------------------------

static cudaError_t rt_created(cudaError_t err, cudaStream_t *stream, unsigned flags) {
  if (err == cudaSuccess) ca_stream_created(*stream, flags & cudaStreamNonBlocking);
  return err;
}

CA_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  CA_ENTER(CA_REAL_RT(cudaStreamCreate, stream));
  return rt_created(ca_shim_sim() ? ca_rt_result(ca_sim_rt_stream_create((ca_stream_t *)stream, 0))
                                  : CA_REAL_RT(cudaStreamCreate, stream),
                    stream, 0);
}

CA_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  CA_ENTER(CA_REAL_RT(cudaStreamCreateWithFlags, stream, flags));
  return rt_created(ca_shim_sim() ? ca_rt_result(ca_sim_rt_stream_create((ca_stream_t *)stream, flags))
                                  : CA_REAL_RT(cudaStreamCreateWithFlags, stream, flags),
                    stream, flags);
}

CA_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned flags, int priority) {
  CA_ENTER(CA_REAL_RT(cudaStreamCreateWithPriority, stream, flags, priority));
  return rt_created(ca_shim_sim() ? ca_rt_result(ca_sim_rt_stream_create((ca_stream_t *)stream, flags))
                                  : CA_REAL_RT(cudaStreamCreateWithPriority, stream, flags, priority),
                    stream, flags);
}

/* The core lets go of the stream before its handle becomes invalid. */
CA_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CA_ENTER(CA_REAL_RT(cudaStreamDestroy, stream));
  ca_stream_destroyed(stream);
  return ca_shim_sim() ? ca_rt_result(ca_sim_rt_stream_destroy(stream)) : CA_REAL_RT(cudaStreamDestroy, stream);
}

// ----------------------------------------------------------------------------
// Runtime API: capture
// ----------------------------------------------------------------------------

static cudaError_t rt_begun(cudaError_t err) {
  capture_begun(err);
  return err;
}

CA_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  CA_ENTER(CA_REAL_RT(cudaStreamBeginCapture, stream, mode));
  return rt_begun(ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_begin(stream, mode))
                                : CA_REAL_RT(cudaStreamBeginCapture, stream, mode));
}

CA_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  CA_ENTER(CA_REAL_RT(cudaStreamBeginCapture_ptsz, stream, mode));
  return rt_begun(ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_begin(ca_ptsz(stream), mode))
                                : CA_REAL_RT(cudaStreamBeginCapture_ptsz, stream, mode));
}

CA_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                    const cudaGraphNode_t *deps,
                                                    const cudaGraphEdgeData *edges, size_t ndeps,
                                                    enum cudaStreamCaptureMode mode) {
  CA_ENTER(CA_REAL_RT(cudaStreamBeginCaptureToGraph, stream, graph, deps, edges, ndeps, mode));
  return rt_begun(ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_begin(stream, mode))
                                : CA_REAL_RT(cudaStreamBeginCaptureToGraph, stream, graph, deps, edges, ndeps, mode));
}

CA_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                         const cudaGraphNode_t *deps,
                                                         const cudaGraphEdgeData *edges, size_t ndeps,
                                                         enum cudaStreamCaptureMode mode) {
  CA_ENTER(CA_REAL_RT(cudaStreamBeginCaptureToGraph_ptsz, stream, graph, deps, edges, ndeps, mode));
  return rt_begun(ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_begin(ca_ptsz(stream), mode))
                                : CA_REAL_RT(cudaStreamBeginCaptureToGraph_ptsz, stream, graph, deps, edges,
                                             ndeps, mode));
}

CA_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  CA_ENTER(CA_REAL_RT(cudaStreamEndCapture, stream, graph));
  bool was = ca_stream_capturing(stream);
  cudaError_t err = ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_end(stream, (CUgraph *)graph))
                                  : CA_REAL_RT(cudaStreamEndCapture, stream, graph);
  capture_ended(was, stream);
  return err;
}

CA_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph) {
  CA_ENTER(CA_REAL_RT(cudaStreamEndCapture_ptsz, stream, graph));
  bool was = ca_stream_capturing(ca_ptsz(stream));
  cudaError_t err = ca_shim_sim() ? ca_rt_result(ca_sim_rt_capture_end(ca_ptsz(stream), (CUgraph *)graph))
                                  : CA_REAL_RT(cudaStreamEndCapture_ptsz, stream, graph);
  capture_ended(was, ca_ptsz(stream));
  return err;
}

// ----------------------------------------------------------------------------
// Driver API: creation and destruction
// ----------------------------------------------------------------------------

static CUresult drv_created(CUresult rc, CUstream *stream, unsigned flags) {
  if (rc == CUDA_SUCCESS) ca_stream_created(*stream, flags & CU_STREAM_NON_BLOCKING);
  return rc;
}

CA_EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
  CA_ENTER(CA_REAL_DRV(cuStreamCreate, stream, flags));
  return drv_created(ca_shim_sim() ? ca_sim_rt_stream_create((ca_stream_t *)stream, flags)
                                   : CA_REAL_DRV(cuStreamCreate, stream, flags),
                     stream, flags);
}

CA_EXPORT CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned flags, int priority) {
  CA_ENTER(CA_REAL_DRV(cuStreamCreateWithPriority, stream, flags, priority));
  return drv_created(ca_shim_sim() ? ca_sim_rt_stream_create((ca_stream_t *)stream, flags)
                                   : CA_REAL_DRV(cuStreamCreateWithPriority, stream, flags, priority),
                     stream, flags);
}

CA_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuStreamDestroy_v2, stream));
  ca_stream_destroyed(stream);
  return ca_shim_sim() ? ca_sim_rt_stream_destroy(stream) : CA_REAL_DRV(cuStreamDestroy_v2, stream);
}

// ----------------------------------------------------------------------------
// Driver API: capture
// ----------------------------------------------------------------------------

static CUresult drv_begun(CUresult rc) {
  capture_begun(rc);
  return rc;
}

CA_EXPORT CUresult cuStreamBeginCapture(CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCapture, stream));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) : CA_REAL_DRV(cuStreamBeginCapture, stream));
}

CA_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCapture_ptsz, stream));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(ca_ptsz(stream), CU_STREAM_CAPTURE_MODE_GLOBAL) : CA_REAL_DRV(cuStreamBeginCapture_ptsz, stream));
}

CA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCapture_v2, stream, mode));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(stream, mode) : CA_REAL_DRV(cuStreamBeginCapture_v2, stream, mode));
}

CA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCapture_v2_ptsz, stream, mode));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(ca_ptsz(stream), mode)
                                 : CA_REAL_DRV(cuStreamBeginCapture_v2_ptsz, stream, mode));
}

CA_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode *deps,
                                               const CUgraphEdgeData *edges, size_t ndeps,
                                               CUstreamCaptureMode mode) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCaptureToGraph, stream, graph, deps, edges, ndeps, mode));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(stream, mode)
                                 : CA_REAL_DRV(cuStreamBeginCaptureToGraph, stream, graph, deps, edges, ndeps,
                                               mode));
}

CA_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode *deps,
                                                    const CUgraphEdgeData *edges, size_t ndeps,
                                                    CUstreamCaptureMode mode) {
  CA_ENTER(CA_REAL_DRV(cuStreamBeginCaptureToGraph_ptsz, stream, graph, deps, edges, ndeps, mode));
  return drv_begun(ca_shim_sim() ? ca_sim_rt_capture_begin(ca_ptsz(stream), mode)
                                 : CA_REAL_DRV(cuStreamBeginCaptureToGraph_ptsz, stream, graph, deps, edges,
                                               ndeps, mode));
}

CA_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
  CA_ENTER(CA_REAL_DRV(cuStreamEndCapture, stream, graph));
  bool was = ca_stream_capturing(stream);
  CUresult rc = ca_shim_sim() ? ca_sim_rt_capture_end(stream, graph) : CA_REAL_DRV(cuStreamEndCapture, stream, graph);
  capture_ended(was, stream);
  return rc;
}

CA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph) {
  CA_ENTER(CA_REAL_DRV(cuStreamEndCapture_ptsz, stream, graph));
  bool was = ca_stream_capturing(ca_ptsz(stream));
  CUresult rc = ca_shim_sim() ? ca_sim_rt_capture_end(ca_ptsz(stream), graph) : CA_REAL_DRV(cuStreamEndCapture_ptsz, stream, graph);
  capture_ended(was, ca_ptsz(stream));
  return rc;
}
