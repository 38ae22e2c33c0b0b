/* Contexts (bench/gpu-check.sh, section contexts): a driver-API program
 * with its own context, as programs that predate the primary context are,
 * and a thread that has none. Linked against libcuda (the toolkit's stub at
 * build time, the driver at run time), run plain and preloaded.
 *
 *   contexts [--expect-cudalloc]   with the flag (preloaded): blocks of the
 *                                  primary context must be cudalloc's, and
 *                                  blocks of the program's own context the
 *                                  driver's (cudalloc passes a context that
 *                                  is not the primary one through)
 *
 * 1. cuCtxCreate's context current: cuMemAlloc, cuMemsetD32, cuMemcpyDtoH
 *    round after round, and the stream-ordered calls on a stream of that
 *    context; every value read back must be the one written. Then the
 *    context is destroyed and the primary context allocates again.
 * 2. A thread with no context calls cuMemAlloc (and cuMemFree if it got a
 *    block): the driver refuses with CUDA_ERROR_INVALID_CONTEXT. The line
 *    "contexts: no context: ..." prints the codes; the GPU check compares
 *    the plain and preloaded runs, which must agree.
 * Last line "contexts: ok" (exit 0), else a failed check (exit 1). */
#include "progs.h"

#include <cuda.h>
#include <pthread.h>

#define MiB ((size_t)1 << 20)
enum { ROUNDS = 20 };

static int expect_cudalloc;
static int own_context;   /* a cuCtxCreate context is current */

static const char *code(CUresult rc) {
  const char *name = NULL;
  static __thread char buf[96];
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name) name = "unnamed";
  snprintf(buf, sizeof buf, "%s (%d)", name, (int)rc);
  return buf;
}

#define CU_OK(call)                                                                  \
  do {                                                                               \
    CUresult rc_ = (call);                                                           \
    if (rc_ != CUDA_SUCCESS) {                                                       \
      fprintf(stderr, "%s:%d: %s returned %s\n", __FILE__, __LINE__, #call, code(rc_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static void check_block(CUdeviceptr p, size_t bytes, unsigned value, unsigned *host) {
  CHECK(!expect_cudalloc || owned_by_cudalloc((void *)p) == !own_context);
  for (size_t i = 0; i < bytes / 4; i++) CHECK(host[i] == value);
}

static void sync_rounds(unsigned *host) {
  for (int r = 0; r < ROUNDS; r++) {
    size_t bytes = (size_t)(1 + r % 7) * MiB + (size_t)r * 4096;
    CUdeviceptr p = 0;
    CU_OK(cuMemAlloc(&p, bytes));
    CU_OK(cuMemsetD32(p, 0x01234567u + (unsigned)r, bytes / 4));
    CU_OK(cuMemcpyDtoH(host, p, bytes));
    check_block(p, bytes, 0x01234567u + (unsigned)r, host);
    CU_OK(cuMemFree(p));
  }
}

static void stream_rounds(unsigned *host) {
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int r = 0; r < ROUNDS; r++) {
    size_t bytes = (size_t)(1 + r % 5) * MiB;
    CUdeviceptr p = 0;
    CU_OK(cuMemAllocAsync(&p, bytes, s));
    CU_OK(cuMemsetD32Async(p, 0x89abcdefu ^ (unsigned)r, bytes / 4, s));
    CU_OK(cuMemcpyDtoHAsync(host, p, bytes, s));
    CU_OK(cuMemFreeAsync(p, s));
    CU_OK(cuStreamSynchronize(s));
    check_block(p, bytes, 0x89abcdefu ^ (unsigned)r, host);
  }
  CU_OK(cuStreamDestroy(s));
}

static void *no_context(void *arg) {
  CUdeviceptr p = 0;
  CUresult rc = cuMemAlloc(&p, MiB);
  char *line = arg;
  int n = snprintf(line, 256, "cuMemAlloc -> %s", code(rc));
  if (rc == CUDA_SUCCESS) snprintf(line + n, 256 - (size_t)n, ", cuMemFree -> %s", code(cuMemFree(p)));
  return NULL;
}

int main(int argc, char **argv) {
  expect_cudalloc = argc > 1 && strcmp(argv[1], "--expect-cudalloc") == 0;
  unsigned *host = malloc(8 * MiB);
  CHECK(host != NULL);
  CUdevice dev;
  CUcontext ctx, primary;
  CU_OK(cuInit(0));
  CU_OK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
  CU_OK(cuCtxCreate(&ctx, NULL, 0, dev));
#else
  CU_OK(cuCtxCreate(&ctx, 0, dev));
#endif
  own_context = 1;
  sync_rounds(host);
  stream_rounds(host);
  own_context = 0;
  printf("contexts: own context (cuCtxCreate): %d synchronous and %d stream-ordered rounds exact\n", ROUNDS, ROUNDS);
  CU_OK(cuCtxDestroy(ctx));
  CU_OK(cuDevicePrimaryCtxRetain(&primary, dev));
  CU_OK(cuCtxSetCurrent(primary));
  sync_rounds(host);
  printf("contexts: after cuCtxDestroy, the primary context: %d rounds exact\n", ROUNDS);

  char line[256] = "";
  pthread_t th;
  CHECK(pthread_create(&th, NULL, no_context, line) == 0);
  pthread_join(th, NULL);
  printf("contexts: no context: %s\n", line);
  CU_OK(cuDevicePrimaryCtxRelease(dev));
  free(host);
  printf("contexts: ok\n");
  return 0;
}
