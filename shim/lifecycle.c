/* The life of the preloaded library: load, first use, fork, exit.
 *
 * Loading is cheap and makes no device call: it finds the real dlsym and
 * registers the fork handler. The allocator core starts at the first
 * intercepted call that needs it.
 *
 * Exit: the summary is written by the atexit handler that the core
 * registers when it starts (alloc/lifecycle.c says why atexit). A
 * destructor would run after libcuda's, which the runtime loads after
 * libcudalloc.
 */
#define _GNU_SOURCE
#include "shim.h"
#include "sim/sim_runtime.h"

#include <dlfcn.h>
#include <pthread.h>

enum { MODE_UNKNOWN, MODE_CUDA, MODE_SIM };
static int mode;        /* atomic: MODE_* */
int ca_shim_started;    /* atomic: CA_SHIM_* (shim.h) */

#define LOAD(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)

bool ca_shim_sim(void) {
  int m = LOAD(&mode);
  if (m == MODE_UNKNOWN) {
    m = ca_backend_is_simulated() ? MODE_SIM : MODE_CUDA;
    STORE(&mode, m);
  }
  return m == MODE_SIM;
}

bool ca_shim_start_slow(void) {
  int s = LOAD(&ca_shim_started);
  if (s != CA_SHIM_UNTRIED) return s == CA_SHIM_STARTED;
  bool ok = ca_init(NULL) == CUDA_SUCCESS;
  STORE(&ca_shim_started, ok ? CA_SHIM_STARTED : CA_SHIM_FAILED);
  return ok;
}

/* The child of fork() starts with a clean allocator: the parent's device
 * state is not the child's (a CUDA context does not survive fork). */
static void fork_child(void) {
  ca_fork_child();
  STORE(&ca_shim_started, CA_SHIM_UNTRIED);
}

/* Preloaded, or linked before the runtime, the program's stream creations
 * bind to cudalloc's; dlopen'ed with local scope (PyTorch's pluggable
 * allocator) they do not, and cudalloc never hears of the streams. */
static bool program_binds_to_us(void) {
  return ca_real_dlsym && ca_real_dlsym(RTLD_DEFAULT, "cudaStreamCreate") == (void *)&cudaStreamCreate;
}

__attribute__((constructor)) static void on_load(void) {
  ca_real_dlsym_init();
  if (program_binds_to_us()) ca_streams_all_seen();
  pthread_atfork(NULL, NULL, fork_child);
  if (ca_shim_sim()) ca_sim_rt_check_static_runtime();
}
