/* The ops of the multimodal workload, listed once.
 *
 * Every op exists twice with the same arguments: a CUDA launcher
 * (<op>_cuda, in kernels/<file>.cu: kernels first, then the launcher) and a
 * plain C reference (<op>_ref, in kernels/<file>.c). The model is written
 * once against ops_t, a table of function pointers: ops_ref (the references,
 * which run on host-addressable memory such as cudalloc's simulated device)
 * or ops_cuda (the kernels, on a GPU).
 *
 * Conventions, the same for every op:
 * - float32, row-major, contiguous. N is a number of rows (positions), C a
 *   number of channels. Shapes are given as (rows, columns).
 * - Outputs and activation gradients (out, dinp, dqkv, dlogits) are
 *   overwritten. Parameter gradients (dweight, dbias, dtable) are
 *   accumulated (+=), so that a weight used twice (the tied token table)
 *   sums its gradients, and the caller zeroes them once per step.
 * - The stream orders a launch; references run at once and ignore it.
 * - Launchers assert their shape preconditions and check the launch with
 *   file and line; references assert the same preconditions.
 */
#ifndef KERNELS_OPS_H
#define KERNELS_OPS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* AdamW hyper-parameters of one update; t counts updates from 1. */
typedef struct adamw_hparams_s {
  float lr, beta1, beta2, eps, weight_decay;
  int t;
} adamw_hparams_t;

/* X(name, parameters). One line per op; the comment above says what it does. */
#define OPS(X)                                                                            \
  /* out (N,C) = table[ids[n]] ; table (V,C) */                                          \
  X(embedding_forward, (float *out, const int *ids, const float *table, int N, int V,    \
                        int C, cudaStream_t s))                                          \
  /* dtable[ids[n]] += dout[n] */                                                        \
  X(embedding_backward, (float *dtable, const float *dout, const int *ids, int N, int V, \
                         int C, cudaStream_t s))                                         \
  /* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC); bias may be NULL */          \
  X(linear_forward, (float *out, const float *inp, const float *weight, const float *bias, \
                     int N, int C, int OC, cudaStream_t s))                             \
  /* dinp = dout . weight (dinp may be NULL); dweight += dout^T . inp; dbias += sum dout */ \
  X(linear_backward, (float *dinp, float *dweight, float *dbias, const float *dout,      \
                      const float *inp, const float *weight, int N, int C, int OC,       \
                      cudaStream_t s))                                                   \
  /* out = (inp - mean) * rstd * weight + bias, per row; keeps mean and rstd (N) */      \
  X(layernorm_forward, (float *out, float *mean, float *rstd, const float *inp,          \
                        const float *weight, const float *bias, int N, int C,            \
                        cudaStream_t s))                                                 \
  X(layernorm_backward, (float *dinp, float *dweight, float *dbias, const float *dout,   \
                         const float *inp, const float *weight, const float *mean,       \
                         const float *rstd, int N, int C, cudaStream_t s))               \
  /* causal multi-head attention: qkv (B,T,3C) -> out (B,T,C), att (B,NH,T,T) the       \
   * softmax probabilities (zero above the diagonal) */                                 \
  X(attention_forward, (float *out, float *att, const float *qkv, int B, int T, int C,   \
                        int NH, cudaStream_t s))                                         \
  /* dqkv (B,T,3C) from dout (B,T,C); datt (B,NH,T,T) is scratch, left holding the      \
   * gradient of the scaled scores */                                                    \
  X(attention_backward, (float *dqkv, float *datt, const float *dout, const float *qkv,  \
                         const float *att, int B, int T, int C, int NH, cudaStream_t s)) \
  /* GELU, tanh approximation, elementwise over n values */                              \
  X(gelu_forward, (float *out, const float *inp, size_t n, cudaStream_t s))              \
  X(gelu_backward, (float *dinp, const float *inp, const float *dout, size_t n,          \
                    cudaStream_t s))                                                     \
  /* out = a + b; also sums the two gradients of a residual branch point */              \
  X(residual_forward, (float *out, const float *a, const float *b, size_t n,             \
                       cudaStream_t s))                                                  \
  /* softmax of logits (N,V) into probs; losses[n] = -log probs[n, targets[n]], or 0    \
   * where targets[n] < 0 (positions without a target) */                               \
  X(crossentropy_forward, (float *losses, float *probs, const float *logits,             \
                           const int *targets, int N, int V, cudaStream_t s))            \
  /* dlogits = (probs - onehot(target)) * scale; rows without a target get 0 */          \
  X(crossentropy_backward, (float *dlogits, const float *probs, const int *targets,      \
                            float scale, int N, int V, cudaStream_t s))                  \
  /* one AdamW step over n parameters, in place on params, m and v */                    \
  X(adamw_update, (float *params, const float *grads, float *m, float *v, size_t n,      \
                   adamw_hparams_t hp, cudaStream_t s))                                  \
  /* seq (B,T,C) rows [off, off+L) of each sample = part (B,L,C): builds the one        \
   * multimodal sequence from its parts; each is the other's backward */                 \
  X(seq_scatter, (float *seq, const float *part, int B, int T, int off, int L, int C,    \
                  cudaStream_t s))                                                       \
  /* part (B,L,C) = rows [off, off+L) of each sample of seq (B,T,C) */                   \
  X(seq_gather, (float *part, const float *seq, int B, int T, int off, int L, int C,     \
                 cudaStream_t s))

#define OPS_DECLARE(name, params) \
  void name##_ref params;         \
  void name##_cuda params;
OPS(OPS_DECLARE)
#undef OPS_DECLARE

/* The table the model calls through. */
typedef struct ops_s {
  const char *name;
#define OPS_FIELD(name, params) void(*name) params;
  OPS(OPS_FIELD)
#undef OPS_FIELD
} ops_t;

extern const ops_t ops_ref;   /* kernels/ops_ref.c */
extern const ops_t ops_cuda;  /* kernels/ops_cuda.c: only in the nvcc builds */

#ifdef __cplusplus
}
#endif
#endif /* KERNELS_OPS_H */
