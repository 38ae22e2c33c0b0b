/* Copies between one modality's part (B,L,C) and its rows of the multimodal
 * sequence (B,T,C), C reference. Scatter builds the sequence from its parts;
 * gather takes a part back out (the text rows for the output head, and the
 * gradient of each part). Each is the other's backward. */
#include <assert.h>
#include <string.h>

#include "ops.h"

static void check_slice(int B, int T, int off, int L, int C) {
  assert(B > 0 && T > 0 && C > 0 && L > 0);
  assert(off >= 0 && off + L <= T);
  (void)B, (void)T, (void)off, (void)L, (void)C;
}

void seq_scatter_ref(float *seq, const float *part, int B, int T, int off, int L, int C,
                     cudaStream_t s) {
  (void)s;
  check_slice(B, T, off, L, C);
  for (int b = 0; b < B; b++)
    memcpy(seq + ((size_t)b * T + off) * C, part + (size_t)b * L * C,
           (size_t)L * C * sizeof(float));
}

void seq_gather_ref(float *part, const float *seq, int B, int T, int off, int L, int C,
                    cudaStream_t s) {
  (void)s;
  check_slice(B, T, off, L, C);
  for (int b = 0; b < B; b++)
    memcpy(part + (size_t)b * L * C, seq + ((size_t)b * T + off) * C,
           (size_t)L * C * sizeof(float));
}
