/* Reports on demand: the program raises the report signal to itself in the
 * middle of its run. cudalloc's handler must only take note: nothing may be
 * written until the program's next allocator call (here a cudaMalloc), which
 * writes the statistics table and the report files.
 *   report_signal <report prefix> <signal number>
 * The markers go out with write(2), unbuffered, so that the test sees where
 * the table lands between them. A handler the program installed before is
 * still called (cudalloc chains to it). Runs on the simulated device only. */
#include "progs.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t own_handler_calls;
static void own_handler(int sig) {
  (void)sig;
  own_handler_calls++;
}

static void mark(const char *s) { (void)!write(2, s, strlen(s)); }

static int exists(const char *prefix, const char *suffix) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s%s", prefix, suffix);
  return stat(path, &st) == 0;
}

int main(int argc, char **argv) {
  CHECK(argc == 3);
  const char *prefix = argv[1];
  int sig = atoi(argv[2]);
  CHECK(signal(sig, own_handler) != SIG_ERR);   /* before cudalloc starts: it chains to this one */
  void *a = NULL, *b = NULL;
  CUDA_OK(cudaMalloc(&a, 3 << 20));   /* starts cudalloc, which installs its handler */
  CHECK(!exists(prefix, "-stats.json"));
  CHECK(raise(sig) == 0);
  CHECK(own_handler_calls == 1);
  mark("report_signal: raised\n");
  usleep(20000);   /* time for a (wrong) handler-side writer to show up */
  CHECK(!exists(prefix, "-stats.json"));   /* nothing written inside the handler */
  CUDA_OK(cudaMalloc(&b, 1 << 20));   /* the next allocator call writes the reports */
  mark("report_signal: allocated\n");
  CHECK(exists(prefix, "-stats.json") && exists(prefix, "-leaks.txt"));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaFree(a));
  printf("report_signal: ok\n");
  return 0;
}
