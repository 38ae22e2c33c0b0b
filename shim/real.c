/* The functions cudalloc stands in front of: the real runtime's and the
 * real driver's, found on first use and kept in one slot per entry point.
 *
 * Where they are found, in order: the next library after libcudalloc in
 * the global search order (RTLD_NEXT: libcudart linked by the program,
 * libcuda when it links -lcuda); the library handle the program itself
 * passed to dlsym for that name (TensorFlow-style dlopen of libcudart);
 * the libcuda.so.1 that the runtime or the backend has already loaded.
 * Nothing here loads a driver: where none is loaded, there is none to call.
 */
#define _GNU_SOURCE
#include "shim.h"
#include "log.h"

#include <dlfcn.h>
#include <string.h>

// ----------------------------------------------------------------------------
// The table of exported entry points
// ----------------------------------------------------------------------------

static const char *const sym_names[CA_SYM_COUNT] = {
#define NAME(name) #name,
#define NAME_DRV(name, req, ver, kind) #name,
    CA_SYMS_RUNTIME(NAME) CA_SYMS_SIM_RUNTIME(NAME) CA_SYMS_DRIVER(NAME_DRV)
#undef NAME
#undef NAME_DRV
};

static void *const sym_wrappers[CA_SYM_COUNT] = {
#define WRAP(name) (void *)&name,
#define WRAP_DRV(name, req, ver, kind) (void *)&name,
    CA_SYMS_RUNTIME(WRAP) CA_SYMS_SIM_RUNTIME(WRAP) CA_SYMS_DRIVER(WRAP_DRV)
#undef WRAP
#undef WRAP_DRV
};

#define FIRST_DRIVER_SYM CA_SYM_cuMemAlloc_v2

const char *ca_sym_name(ca_sym_t sym) { return sym_names[sym]; }
void *ca_sym_wrapper(ca_sym_t sym) { return sym_wrappers[sym]; }
bool ca_sym_is_driver(ca_sym_t sym) { return sym >= FIRST_DRIVER_SYM; }

// ----------------------------------------------------------------------------
// Slots
// ----------------------------------------------------------------------------

static void *slots[CA_SYM_COUNT];  /* atomic: the real function, once found */
static void *rt_handle;            /* atomic: a runtime library the program opened */
static void *drv_handle;           /* atomic: a driver library the program opened */

#define LOAD(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)

static void *driver_lib(void) {
  void *h = LOAD(&drv_handle);
  if (h) return h;
  h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h) STORE(&drv_handle, h);
  return h;
}

static void *resolve(ca_sym_t sym) {
  const char *name = sym_names[sym];
  void *f = ca_real_dlsym(RTLD_NEXT, name);
  void *h = ca_sym_is_driver(sym) ? driver_lib() : LOAD(&rt_handle);
  if (!f && h) f = ca_real_dlsym(h, name);
  if (f == sym_wrappers[sym]) f = NULL;   /* never ourselves */
  return f;
}

void *ca_real(ca_sym_t sym) {
  void *f = LOAD(&slots[sym]);
  if (f) return f;
  ca_real_dlsym_init();
  f = resolve(sym);
  if (f) STORE(&slots[sym], f);
  return f;
}

void ca_real_learn(ca_sym_t sym, void *handle, void *real) {
  void *none = NULL;
  __atomic_compare_exchange_n(&slots[sym], &none, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  void **h = ca_sym_is_driver(sym) ? &drv_handle : &rt_handle;
  none = NULL;
  __atomic_compare_exchange_n(h, &none, handle, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// ----------------------------------------------------------------------------
// No real library
// ----------------------------------------------------------------------------

cudaError_t ca_rt_missing(const char *name) {
  ca_log_once("%s: no CUDA runtime library is loaded to pass the call to", name);
  return ca_rt_error(cudaErrorNotSupported);
}

CUresult ca_drv_missing(const char *name) {
  ca_log_once("%s: no CUDA driver is loaded to pass the call to", name);
  return CUDA_ERROR_NOT_INITIALIZED;
}
