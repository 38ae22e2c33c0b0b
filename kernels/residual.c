/* Residual add, C reference. Its backward is the identity: the model uses
 * the same op to sum the two gradients that meet at a branch point. */
#include <assert.h>

#include "ops.h"

void residual_forward_ref(float *out, const float *a, const float *b, size_t n,
                          cudaStream_t s) {
  (void)s;
  assert(n > 0);
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
