/* GELU, tanh approximation, CUDA. One thread per element. */
#include <assert.h>

#include "cuda_check.h"
#include "ops.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE 0.044715f

// ----------------------------------------------------------------------------
// kernels

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + GELU_CUBE * x * x * x)));
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout,
                                     size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  float th = tanhf(GELU_SCALE * (x + GELU_CUBE * x * x * x));
  float local = 0.5f * (1.0f + th) +
                0.5f * x * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
  dinp[i] = local * dout[i];
}

// ----------------------------------------------------------------------------
// launchers

void gelu_forward_cuda(float *out, const float *inp, size_t n, cudaStream_t s) {
  assert(n > 0);
  gelu_forward_kernel<<<(unsigned)CEIL_DIV(n, (size_t)KERNEL_BLOCK), KERNEL_BLOCK, 0, s>>>(out, inp, n);
  cuda_check(cudaGetLastError());
}

void gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                        cudaStream_t s) {
  assert(n > 0);
  gelu_backward_kernel<<<(unsigned)CEIL_DIV(n, (size_t)KERNEL_BLOCK), KERNEL_BLOCK, 0, s>>>(
      dinp, inp, dout, n);
  cuda_check(cudaGetLastError());
}
