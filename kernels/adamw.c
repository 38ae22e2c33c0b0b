/* AdamW update, C reference: Adam with bias correction and decoupled
 * weight decay (Loshchilov & Hutter), in place. */
#include <assert.h>
#include <math.h>

#include "ops.h"

void adamw_update_ref(float *params, const float *grads, float *m, float *v, size_t n,
                      adamw_hparams_t hp, cudaStream_t s) {
  (void)s;
  assert(n > 0 && hp.t >= 1);
  float c1 = 1.0f - powf(hp.beta1, (float)hp.t), c2 = 1.0f - powf(hp.beta2, (float)hp.t);
  for (size_t i = 0; i < n; i++) {
    float g = grads[i];
    m[i] = hp.beta1 * m[i] + (1.0f - hp.beta1) * g;
    v[i] = hp.beta2 * v[i] + (1.0f - hp.beta2) * g * g;
    float step = (m[i] / c1) / (sqrtf(v[i] / c2) + hp.eps);
    params[i] -= hp.lr * (step + hp.weight_decay * params[i]);
  }
}
