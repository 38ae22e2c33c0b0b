/* fork(): the child starts with a clean allocator and can allocate; the
 * parent's blocks and figures are untouched. Simulated device only: a CUDA
 * context does not survive fork(), so on a GPU the child could not use the
 * device at all. */
#include "progs.h"

#include <sys/wait.h>
#include <unistd.h>

#define SIZE (1 << 20)

static long long live_blocks(void) {
  cudalloc_stats_t st;
  return cudalloc_stats_of(-1, &st) ? st.num_live_blocks.current : -1;
}

static int child(void) {
  CHECK(live_blocks() == 0 || live_blocks() == -1);   /* nothing inherited */
  unsigned char *host = malloc(SIZE), *back = malloc(SIZE);
  pattern_fill(host, SIZE, 77);
  void *q = NULL;
  CUDA_OK(cudaMalloc(&q, SIZE));
  CUDA_OK(cudaMemcpy(q, host, SIZE, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(back, q, SIZE, cudaMemcpyDeviceToHost));
  CHECK(pattern_ok(back, SIZE, 77));
  CHECK(live_blocks() == 1 || live_blocks() == -1);
  CUDA_OK(cudaFree(q));
  free(host);
  free(back);
  printf("fork: child ok\n");
  return 0;
}

int main(void) {
  if (!on_simulated_device()) {
    printf("fork: skipped (a CUDA context does not survive fork: simulated device only)\n");
    return 0;
  }
  unsigned char *host = malloc(SIZE), *back = malloc(SIZE);
  pattern_fill(host, SIZE, 5);
  void *p[3];
  for (int i = 0; i < 3; i++) CUDA_OK(cudaMalloc(&p[i], SIZE));
  CUDA_OK(cudaMemcpy(p[0], host, SIZE, cudaMemcpyHostToDevice));
  CHECK(live_blocks() == 3 || live_blocks() == -1);
  fflush(stdout);

  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    free(host);
    free(back);
    exit(child());
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  CHECK(live_blocks() == 3 || live_blocks() == -1);
  CUDA_OK(cudaMemcpy(back, p[0], SIZE, cudaMemcpyDeviceToHost));
  CHECK(pattern_ok(back, SIZE, 5));
  for (int i = 0; i < 3; i++) CUDA_OK(cudaFree(p[i]));
  CHECK(live_blocks() == 0 || live_blocks() == -1);
  free(host);
  free(back);
  printf("fork: ok\n");
  return 0;
}
