/* A plain CUDA program (nothing of cudalloc's) that leaks three
 * allocations from two functions: the leak report must say
 * "LEAK SUMMARY: 8196 bytes leaked in 3 allocations" and name both
 * functions with file and line. It prints the lines of its cudaMalloc
 * calls, so that the test does not hard-code them.
 *   leak_three          leaks 1000 + 3000 (keep_weights) + 4196 (keep_buffer) bytes
 *   leak_three --clean  frees them: nothing leaks */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

static void *kept[3];
static int lines[3];

/* Not inlined: a function of its own in the backtrace. */
__attribute__((noinline)) void keep_weights(void) {
  cudaMalloc(&kept[0], 1000), lines[0] = __LINE__;
  cudaMalloc(&kept[1], 3000), lines[1] = __LINE__;
}

/* Likely inlined into main at -O2: named from the inlined chain. */
static void keep_buffer(void) {
  cudaMalloc(&kept[2], 4196), lines[2] = __LINE__;
}

int main(int argc, char **argv) {
  keep_weights();
  keep_buffer();
  for (int i = 0; i < 3; i++)
    if (!kept[i]) return fprintf(stderr, "leak_three: cudaMalloc %d failed\n", i), 1;
  void *p;
  if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;   /* freed: no leak */
  if (argc > 1 && !strcmp(argv[1], "--clean"))
    for (int i = 0; i < 3; i++) cudaFree(kept[i]);
  printf("leak_three: lines %d %d %d\nleak_three: ok\n", lines[0], lines[1], lines[2]);
  return 0;
}
