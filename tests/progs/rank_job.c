/* One rank of a fake multi-process job (the test sets RANK, WORLD_SIZE...):
 * it allocates, leaks rank+1 blocks of (rank+1) MiB, makes one bad free
 * (one cudalloc line on stderr), then waits until the file <go> exists, so
 * that every rank of the job exits, and writes its summary, at the same
 * moment.
 *   rank_job <go file> */
#include "progs.h"

#include <sys/stat.h>
#include <unistd.h>

static void leak_one(size_t size) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, size));
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  const char *r = getenv("RANK");
  int rank = r ? atoi(r) : 0;
  void *keep = NULL;
  CUDA_OK(cudaMalloc(&keep, 8 << 20));
  for (int i = 0; i <= rank; i++) leak_one((size_t)(rank + 1) << 20);
  CUDA_EXPECT(cudaFree((char *)keep + 512), cudaErrorInvalidValue);   /* an interior pointer: one line */
  CUDA_OK(cudaFree(keep));
  struct stat st;
  for (int i = 0; i < 10000 && stat(argv[1], &st) != 0; i++) usleep(1000);
  printf("rank_job: ok\n");
  return 0;
}
