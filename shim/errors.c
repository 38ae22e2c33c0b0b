/* The runtime's "last error", for the calls cudalloc answers itself.
 *
 * A failed runtime call leaves its error for cudaGetLastError (which
 * resets it) and cudaPeekAtLastError (which does not). Calls passed to the
 * real runtime set the real runtime's record; calls cudalloc answers set
 * this thread-local one. The two getters report cudalloc's error first,
 * then the real one. On the simulated device there is no real runtime to
 * ask: starting it without a driver would itself fail.
 */
#include "shim.h"

static __thread cudaError_t last_error;

cudaError_t ca_rt_error(cudaError_t err) {
  if (err != cudaSuccess) last_error = err;
  return err;
}

/* The real runtime's error (of the runtime caller reaches): reset with it,
 * or peeked at. */
static cudaError_t real_error(bool reset, const void *caller) {
  if (ca_shim_sim()) return cudaSuccess;
  __typeof__(&cudaGetLastError) f =
      reset ? CA_REAL_FROM(cudaGetLastError, caller) : CA_REAL_FROM(cudaPeekAtLastError, caller);
  return f ? f() : cudaSuccess;
}

CA_EXPORT cudaError_t cudaGetLastError(void) {
  cudaError_t mine = last_error;
  last_error = cudaSuccess;
  cudaError_t real = real_error(true, CA_CALLER);
  return mine != cudaSuccess ? mine : real;
}

CA_EXPORT cudaError_t cudaPeekAtLastError(void) {
  cudaError_t real = real_error(false, CA_CALLER);
  return last_error != cudaSuccess ? last_error : real;
}
