/* Softmax and cross-entropy over the vocabulary, C reference. Rows whose
 * target is negative (no next text token) have no loss and no gradient. */
#include <assert.h>
#include <math.h>

#include "ops.h"

void crossentropy_forward_ref(float *losses, float *probs, const float *logits,
                              const int *targets, int N, int V, cudaStream_t s) {
  (void)s;
  assert(N > 0 && V > 0);
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float *p = probs + (size_t)n * V;
    float maxv = -INFINITY, sum = 0.0f;
    for (int v = 0; v < V; v++) maxv = fmaxf(maxv, z[v]);
    for (int v = 0; v < V; v++) sum += expf(z[v] - maxv);
    for (int v = 0; v < V; v++) p[v] = expf(z[v] - maxv) / sum;
    int t = targets[n];
    assert(t < V);
    /* log-sum-exp minus the target's logit: exact where probs[t] underflows */
    losses[n] = t >= 0 ? maxv + logf(sum) - z[t] : 0.0f;
  }
}

void crossentropy_backward_ref(float *dlogits, const float *probs, const int *targets,
                               float scale, int N, int V, cudaStream_t s) {
  (void)s;
  assert(N > 0 && V > 0);
  for (int n = 0; n < N; n++) {
    const float *p = probs + (size_t)n * V;
    float *d = dlogits + (size_t)n * V;
    int t = targets[n];
    for (int v = 0; v < V; v++)
      d[v] = t >= 0 ? (p[v] - (v == t ? 1.0f : 0.0f)) * scale : 0.0f;
  }
}
