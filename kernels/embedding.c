/* Embedding lookup, C reference. The model uses it for the text tokens (the
 * token table, tied with the output head) and for the modality of every
 * position of the sequence (a table of three rows). */
#include <assert.h>
#include <string.h>

#include "ops.h"

void embedding_forward_ref(float *out, const int *ids, const float *table, int N, int V,
                           int C, cudaStream_t s) {
  (void)s;
  assert(N > 0 && V > 0 && C > 0);
  for (int n = 0; n < N; n++) {
    assert(ids[n] >= 0 && ids[n] < V);
    memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, (size_t)C * sizeof(float));
  }
}

void embedding_backward_ref(float *dtable, const float *dout, const int *ids, int N, int V,
                            int C, cudaStream_t s) {
  (void)s;
  assert(N > 0 && V > 0 && C > 0);
  for (int n = 0; n < N; n++) {
    assert(ids[n] >= 0 && ids[n] < V);
    float *row = dtable + (size_t)ids[n] * C;
    const float *g = dout + (size_t)n * C;
    for (int c = 0; c < C; c++) row[c] += g[c];
  }
}
