/* Memory figures from cudalloc's statistics (found with dlsym, so that the
 * program runs unchanged without cudalloc) or from the driver. */
#include <dlfcn.h>
#include <stddef.h>

#include "cudalloc.h"
#include "devmem.h"
#include "memstats.h"

typedef cudaError_t (*get_stats_fn)(int device, cudalloc_stats_t *out);
typedef void (*void_fn)(void);

static get_stats_fn get_stats;
static void_fn step_mark;

const char *memstats_init(void) {
  get_stats = (get_stats_fn)dlsym(RTLD_DEFAULT, "cudalloc_get_stats");
  step_mark = (void_fn)dlsym(RTLD_DEFAULT, "cudalloc_step");
  if (get_stats) return "cudalloc_get_stats (cudalloc is serving cudaMalloc)";
  return "no cudalloc: allocated = the workload's live bytes, reserved = the driver's used "
         "memory (cudaMemGetInfo)";
}

int memstats_from_cudalloc(void) { return get_stats != NULL; }

void memstats_read(memstats_t *out) {
  dev_counters_t c;
  dev_counters(&c);
  out->peak_allocated = (double)c.peak_bytes;
  cudalloc_stats_t st;
  if (get_stats && get_stats(-1, &st) == cudaSuccess) {
    out->allocated = (double)st.allocated_bytes.current;
    out->reserved = (double)st.reserved_bytes.current;
    out->peak_reserved = (double)st.reserved_bytes.peak;
    return;
  }
  size_t free_b = 0, total_b = 0;
  out->allocated = (double)c.live_bytes;
  out->reserved = dev_mem_info(&free_b, &total_b) == 0 ? (double)(total_b - free_b) : 0.0;
  out->peak_reserved = out->reserved;
}

void memstats_reset_peak(void) { dev_reset_peak(); }

void memstats_step(void) {
  if (step_mark) step_mark();
}
