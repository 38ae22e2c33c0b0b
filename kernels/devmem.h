/* The workload's device memory, behind one small layer.
 *
 * The model allocates every tensor here. Two implementations share this
 * header: devmem.c goes through the CUDA runtime API (cudaMalloc, cudaFree,
 * cudaMemcpy, cudaMemset, cudaDeviceSynchronize, cudaMemGetInfo), so that a
 * preloaded cudalloc, or the driver, serves it; devmem_host.c uses malloc,
 * so that unit tests and build/workload-host run the model with no CUDA at
 * all. Both count what they hand out (devmem_track.c), which is how the
 * workload knows its own live bytes and finds a leak at exit.
 *
 * Allocation failures print the cause (with a HINT) and exit: a training
 * program without memory cannot go on.
 */
#ifndef KERNELS_DEVMEM_H
#define KERNELS_DEVMEM_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The implementation's allocation call: cudaMalloc, or malloc behind the
 * same signature. */
extern cudaError_t (*const dev_malloc_fn)(void **ptr, size_t bytes);
/* Reports a failed allocation (with a HINT) and exits. */
void dev_alloc_failed(cudaError_t err, size_t bytes, const char *file, int line)
    __attribute__((noreturn));
void dev_track_alloc(void *p, size_t bytes);

/* Inlined into every allocation site, so that each site calls cudaMalloc
 * from its own address: cudalloc's call-site tracking (the return address,
 * by default) then tells the model's tensors apart in its leak and creep
 * reports, instead of naming this layer for all of them. */
static inline __attribute__((always_inline)) void *dev_alloc_at(size_t bytes, const char *file,
                                                                int line) {
  void *p = NULL;
  cudaError_t err = dev_malloc_fn(&p, bytes);
  if (err != cudaSuccess) dev_alloc_failed(err, bytes, file, line);
  dev_track_alloc(p, bytes);
  return p;
}

void dev_free_at(void *p, const char *file, int line);
#define dev_alloc(bytes) dev_alloc_at((bytes), __FILE__, __LINE__)
#define dev_free(p) dev_free_at((p), __FILE__, __LINE__)

void dev_upload(void *dst, const void *src, size_t bytes);   /* host to device */
/* From now on dev_upload copies on a non-blocking side stream of its own
 * and waits for it, as a prefetching data loader does: a program with a
 * second stream (the workload's --side-stream). */
void dev_use_side_stream(void);
void dev_download(void *dst, const void *src, size_t bytes); /* device to host */
void dev_zero(void *dst, size_t bytes);
void dev_sync(void);
/* Free and total device memory as the driver reports them; 0 on success. */
int dev_mem_info(size_t *free_bytes, size_t *total_bytes);
/* "cuda runtime" or "host malloc". */
const char *dev_impl_name(void);
/* 1 when the host can read and write device memory (the simulated device,
 * host malloc), 0 on a GPU: the C references need it. Probes a small block
 * once, catching the fault a GPU pointer would raise. */
int dev_host_addressable(void);

/* What this layer has handed out and not taken back. */
typedef struct dev_counters_s {
  size_t live_bytes, live_blocks;
  size_t peak_bytes;        /* highest live_bytes since the last dev_reset_peak */
  size_t total_allocs, total_frees;
} dev_counters_t;

void dev_counters(dev_counters_t *out);
void dev_reset_peak(void);

// ----------------------------------------------------------------------------
// "devmem_track.c": bookkeeping shared by both implementations

/* dev_track_alloc (above) records a new block; it aborts on a pointer
 * already live (a broken allocator). */
/* Forgets a block and returns its size; aborts on a pointer not live. */
size_t dev_track_free(void *p, const char *file, int line);
/* Drops the table (at exit, after the leak count has been read). */
void dev_track_reset(void);

#ifdef __cplusplus
}
#endif
#endif /* KERNELS_DEVMEM_H */
