/* The runtime error a program sees for a driver (core) error: ca_cuda_error,
 * which the shim and the public API answer with. */
#include <criterion/criterion.h>

#include "core.h"

/* Regression (issue 9): below 100, only the codes in ca_cuda_error's switch
 * were translated; the others became cudaErrorUnknown (999), although the
 * runtime gives them the driver's number and meaning (the profiler codes,
 * CUDA_ERROR_STUB_LIBRARY, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
 * CUDA_ERROR_DEVICE_UNAVAILABLE: all seven failed with 999). */
Test(shim_errors, driver_codes_below_100_keep_their_runtime_twin) {
  static const struct { CUresult drv; cudaError_t rt; } same[] = {
      {CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue},
      {CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation},
      {CUDA_ERROR_NOT_INITIALIZED, cudaErrorInitializationError},
      {CUDA_ERROR_DEINITIALIZED, cudaErrorCudartUnloading},
      {CUDA_ERROR_PROFILER_DISABLED, cudaErrorProfilerDisabled},
      {CUDA_ERROR_PROFILER_NOT_INITIALIZED, cudaErrorProfilerNotInitialized},
      {CUDA_ERROR_PROFILER_ALREADY_STARTED, cudaErrorProfilerAlreadyStarted},
      {CUDA_ERROR_PROFILER_ALREADY_STOPPED, cudaErrorProfilerAlreadyStopped},
      {CUDA_ERROR_STUB_LIBRARY, cudaErrorStubLibrary},
      {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, cudaErrorCallRequiresNewerDriver},
      {CUDA_ERROR_DEVICE_UNAVAILABLE, cudaErrorDevicesUnavailable},
  };
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    cr_expect_eq((int)same[i].drv, (int)same[i].rt, "the numbers coincide (%d)", (int)same[i].drv);
    cr_expect_eq(ca_cuda_error(same[i].drv), same[i].rt, "driver code %d became %d", (int)same[i].drv,
                 (int)ca_cuda_error(same[i].drv));
  }
}

/* The codes whose runtime twin has another number or name stay translated. */
Test(shim_errors, the_renamed_codes) {
  cr_assert_eq(ca_cuda_error(CUDA_SUCCESS), cudaSuccess);
  cr_assert_eq(ca_cuda_error(CUDA_ERROR_NOT_FOUND), cudaErrorInvalidValue);
  cr_assert_eq(ca_cuda_error(CUDA_ERROR_INVALID_HANDLE), cudaErrorInvalidResourceHandle);
  cr_assert_eq(ca_cuda_error(CUDA_ERROR_NO_DEVICE), cudaErrorNoDevice);
  cr_assert_eq(ca_cuda_error(CUDA_ERROR_NOT_READY), cudaErrorNotReady);
  cr_assert_eq(ca_cuda_error(CUDA_ERROR_NO_BINARY_FOR_GPU), cudaErrorNoKernelImageForDevice);
}

/* A number below 100 that no driver error has is nothing the runtime knows. */
Test(shim_errors, a_number_no_driver_error_has_is_unknown) {
  cr_assert_eq(ca_cuda_error((CUresult)9), cudaErrorUnknown);
  cr_assert_eq(ca_cuda_error((CUresult)35), cudaErrorUnknown);
  cr_assert_eq(ca_cuda_error((CUresult)99), cudaErrorUnknown);
}
