/* Streams and graph capture on the simulated device: the streams are the
 * simulated device's own, and capture is a flag it keeps per stream, with
 * the driver's rules for beginning and ending one. */
#include "sim_runtime.h"
#include "backend_sim.h"

/* Every runtime call starts the calling thread's context, as the runtime
 * does on a thread's first call. */
const ca_backend_t *ca_shim_sim_backend(void) {
  if (!ca_shim_sim() || !ca_shim_start()) return NULL;
  ca_sim_thread_init();
  return &ca_backend_sim;
}

CUresult ca_sim_rt_stream_create(ca_stream_t *stream, unsigned flags) {
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  ca_sim_thread_init();
  return ca_sim_stream_create(stream, flags & CU_STREAM_NON_BLOCKING);
}

CUresult ca_sim_rt_stream_destroy(ca_stream_t stream) { return ca_sim_stream_destroy(stream); }

/* As the driver: the legacy stream cannot be captured, nor a stream twice. */
CUresult ca_sim_rt_capture_begin(ca_stream_t stream, int mode) {
  int c = 0;
  if (!stream || stream == CA_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  ca_sim_thread_init();
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ca_backend_sim.is_capturing(stream, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (c) return CUDA_ERROR_ILLEGAL_STATE;
  ca_sim_begin_capture(stream, (CUstreamCaptureMode)mode);
  return CUDA_SUCCESS;
}

/* An invalidated capture ends too, with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. */
CUresult ca_sim_rt_capture_end(ca_stream_t stream, CUgraph *graph) {
  int c = 0;
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ca_backend_sim.is_capturing(stream, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = NULL;
  return ca_sim_end_capture(stream);
}
