/* The device memory layer on the CUDA runtime API: what a framework without
 * its own cache does. A preloaded cudalloc serves these calls (on a GPU, or
 * on its simulated device); without it, the driver does. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cuda_check.h"
#include "devmem.h"

cudaError_t (*const dev_malloc_fn)(void **ptr, size_t bytes) = cudaMalloc;

void dev_alloc_failed(cudaError_t err, size_t bytes, const char *file, int line) {
  char what[64];
  snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
  cuda_check_at(err, what, file, line);
  exit(EXIT_FAILURE); /* cuda_check_at exits on every error; this is for the compiler */
}

void dev_free_at(void *p, const char *file, int line) {
  if (!p) return;
  dev_track_free(p, file, line);
  cuda_check_at(cudaFree(p), "cudaFree", file, line);
}

static cudaStream_t side;
static int use_side;

void dev_use_side_stream(void) { use_side = 1; }

void dev_upload(void *dst, const void *src, size_t bytes) {
  if (!use_side) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return;
  }
  if (!side) cuda_check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, side));
  cuda_check(cudaStreamSynchronize(side));
}

void dev_download(void *dst, const void *src, size_t bytes) {
  cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void dev_zero(void *dst, size_t bytes) { cuda_check(cudaMemset(dst, 0, bytes)); }

void dev_sync(void) { cuda_check(cudaDeviceSynchronize()); }

int dev_mem_info(size_t *free_bytes, size_t *total_bytes) {
  return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? 0 : -1;
}

const char *dev_impl_name(void) { return "cuda runtime"; }

static sigjmp_buf probe_env;

static void probe_fault(int sig) { siglongjmp(probe_env, sig); }

int dev_host_addressable(void) {
  volatile unsigned char *p = dev_alloc(256);
  cuda_check(cudaMemset((void *)p, 0x5a, 256));
  dev_sync();
  struct sigaction sa, old_segv, old_bus;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = probe_fault;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  volatile int ok = 0;
  if (sigsetjmp(probe_env, 1) == 0) ok = p[0] == 0x5a && p[255] == 0x5a;
  sigaction(SIGSEGV, &old_segv, NULL);
  sigaction(SIGBUS, &old_bus, NULL);
  dev_free((void *)p);
  return ok;
}
