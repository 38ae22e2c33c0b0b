/* AdamW update, CUDA. One thread per parameter. */
#include <assert.h>

#include "cuda_check.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// kernels

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n,
                             adamw_hparams_t hp, float c1, float c2) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float g = grads[i];
  float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * g;
  float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  float step = (mi / c1) / (sqrtf(vi / c2) + hp.eps);
  params[i] -= hp.lr * (step + hp.weight_decay * params[i]);
}

// ----------------------------------------------------------------------------
// launchers

void adamw_update_cuda(float *params, const float *grads, float *m, float *v, size_t n,
                       adamw_hparams_t hp, cudaStream_t s) {
  assert(n > 0 && hp.t >= 1);
  /* the bias corrections are computed once, on the host, as the reference does */
  float c1 = 1.0f - powf(hp.beta1, (float)hp.t), c2 = 1.0f - powf(hp.beta2, (float)hp.t);
  adamw_kernel<<<(unsigned)CEIL_DIV(n, (size_t)KERNEL_BLOCK), KERNEL_BLOCK, 0, s>>>(
      params, grads, m, v, n, hp, c1, c2);
  cuda_check(cudaGetLastError());
}
