/* Warp reductions shared by the row-wise kernels (one warp per row). */
#ifndef KERNELS_WARP_CUH
#define KERNELS_WARP_CUH

#define WARP_SIZE 32

__device__ inline float warp_sum(float v) {
  for (int off = WARP_SIZE / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int off = WARP_SIZE / 2; off > 0; off /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/* The row a warp owns when warps are numbered across the grid. */
__device__ inline int warp_row(void) {
  return (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP_SIZE);
}

/* Blocks of ROW_BLOCK threads (ROW_BLOCK / 32 rows each) for `rows` rows. */
#define ROW_BLOCK 128
#define ROW_GRID(rows) ((unsigned)CEIL_DIV((size_t)(rows) * WARP_SIZE, (size_t)ROW_BLOCK))

#endif /* KERNELS_WARP_CUH */
