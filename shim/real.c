/* The functions cudalloc stands in front of: the real runtime's and the
 * real driver's, found on first use and kept in one slot per entry point
 * and calling library.
 *
 * Where they are found, in order:
 * - the scope of the library the call came from (its own dependencies, as
 *   the dynamic linker would have bound the call without cudalloc): a
 *   libcudart loaded RTLD_LOCAL, as Python loads extension modules, is in
 *   no other scope, and with two runtimes loaded each library gets its own;
 * - the next library after libcudalloc in the global search order
 *   (RTLD_NEXT: libcudart linked by the program, libcuda when it links
 *   -lcuda);
 * - the library handle the program itself passed to dlsym for that name
 *   (TensorFlow-style dlopen of libcudart);
 * - the libcuda.so.1 that the runtime or the backend has already loaded.
 * Nothing here loads a driver: where none is loaded, there is none to call.
 */
#define _GNU_SOURCE
#include "shim.h"
#include "log.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

// ----------------------------------------------------------------------------
// The table of exported entry points
// ----------------------------------------------------------------------------

static const char *const sym_names[CA_SYM_COUNT] = {
#define NAME(name) #name,
#define NAME_DRV(name, req, ver, kind) #name,
    CA_SYMS_RUNTIME(NAME) CA_SYMS_SIM_RUNTIME(NAME) CA_SYMS_DRIVER(NAME_DRV) CA_SYMS_SIM_DRIVER(NAME_DRV)
#undef NAME
#undef NAME_DRV
};

static void *const sym_wrappers[CA_SYM_COUNT] = {
#define WRAP(name) (void *)&name,
#define WRAP_DRV(name, req, ver, kind) (void *)&name,
    CA_SYMS_RUNTIME(WRAP) CA_SYMS_SIM_RUNTIME(WRAP) CA_SYMS_DRIVER(WRAP_DRV) CA_SYMS_SIM_DRIVER(WRAP_DRV)
#undef WRAP
#undef WRAP_DRV
};

#define FIRST_DRIVER_SYM CA_SYM_cuMemAlloc_v2
#define FIRST_SIM_DRIVER_SYM CA_SYM_cuLaunchKernel

const char *ca_sym_name(ca_sym_t sym) { return sym_names[sym]; }
void *ca_sym_wrapper(ca_sym_t sym) { return sym_wrappers[sym]; }
bool ca_sym_is_driver(ca_sym_t sym) { return sym >= FIRST_DRIVER_SYM; }
bool ca_sym_sim_only_driver(ca_sym_t sym) { return sym >= FIRST_SIM_DRIVER_SYM; }

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

static void *global_real(ca_sym_t sym) {
  void *f = LOAD(&slots[sym]);
  if (f) return f;
  ca_real_dlsym_init();
  f = resolve(sym);
  if (f) STORE(&slots[sym], f);
  return f;
}

// ----------------------------------------------------------------------------
// Callers' scopes
// ----------------------------------------------------------------------------

/* The start of libcudalloc itself, from the linker. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));

#define MAX_SCOPES 64   /* calling libraries remembered; the rest use the global scope */

/* A library that called an entry point: where its code lies, a handle
 * whose lookups search it and its dependencies, and what they found. The
 * handle holds a reference, so the library (and the functions in slots)
 * stays loaded. Published whole; the slots fill in later. */
typedef struct scope_s {
  uintptr_t lo, hi;
  void *handle;
  void *slots[CA_SYM_COUNT];   /* atomic */
} scope_t;

static scope_t scopes[MAX_SCOPES];
static int nscopes;   /* atomic: published entries */
static pthread_mutex_t scopes_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct extent_s {
  uintptr_t base, lo, hi;
} extent_t;

/* The address range of the loaded segments of the object at base. */
static int find_extent(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  extent_t *e = arg;
  if (info->dlpi_addr != e->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = e->base + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (!e->hi || lo < e->lo) e->lo = lo;
    if (hi > e->hi) e->hi = hi;
  }
  return e->hi != 0;
}

static scope_t *scope_find(uintptr_t pc) {
  int n = LOAD(&nscopes);
  for (int i = 0; i < n; i++)
    if (pc >= scopes[i].lo && pc < scopes[i].hi) return &scopes[i];
  return NULL;
}

/* Adds the library holding pc; NULL for the program itself and
 * libcudalloc (whose scope is the global one), or when it cannot be
 * opened. Under scopes_lock. */
static scope_t *scope_add(uintptr_t pc) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1((void *)pc, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name[0]) return NULL;
  if (info.dli_fbase == (void *)__ehdr_start) return NULL;
  int n = LOAD(&nscopes);
  if (n == MAX_SCOPES) return NULL;
  extent_t e = {.base = lm->l_addr};
  void *h = dl_iterate_phdr(find_extent, &e) ? dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  if (!h) return NULL;
  scopes[n] = (scope_t){.lo = e.lo, .hi = e.hi, .handle = h};
  STORE(&nscopes, n + 1);
  return &scopes[n];
}

static scope_t *scope_of(const void *caller) {
  uintptr_t pc = (uintptr_t)caller;
  scope_t *s = scope_find(pc);
  if (s || !caller) return s;
  pthread_mutex_lock(&scopes_lock);
  if (!(s = scope_find(pc))) s = scope_add(pc);
  pthread_mutex_unlock(&scopes_lock);
  return s;
}

void *ca_real_from(ca_sym_t sym, const void *caller) {
  scope_t *s = scope_of(caller);
  if (!s) return global_real(sym);
  void *f = LOAD(&s->slots[sym]);
  if (f) return f;
  ca_real_dlsym_init();
  f = ca_real_dlsym(s->handle, sym_names[sym]);
  if (f == sym_wrappers[sym] || !f) f = global_real(sym);
  if (f) STORE(&s->slots[sym], f);
  return f;
}

void ca_real_learn(ca_sym_t sym, void *handle, void *real) {
  void *none = NULL;
  __atomic_compare_exchange_n(&slots[sym], &none, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  void **h = ca_sym_is_driver(sym) ? &drv_handle : &rt_handle;
  none = NULL;
  __atomic_compare_exchange_n(h, &none, handle, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* cuCtxGetDevice_v2 names any context's device (CUDA 12.8); older drivers
 * need the context made current for cuCtxGetDevice. CUdevice values are
 * the ordinals cuDeviceGet hands out. */
CUresult ca_real_ctx_device(CUcontext ctx, int *dev) {
  void *lib = driver_lib();
  if (!lib) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult (*get_v2)(CUdevice *, CUcontext);
  CUresult (*push)(CUcontext), (*pop)(CUcontext *), (*get)(CUdevice *);
  ca_real_dlsym_init();
  *(void **)&get_v2 = ca_real_dlsym(lib, "cuCtxGetDevice_v2");
  CUdevice d = 0;
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  if (get_v2) rc = get_v2(&d, ctx);
  else {
    *(void **)&push = ca_real_dlsym(lib, "cuCtxPushCurrent_v2");
    *(void **)&pop = ca_real_dlsym(lib, "cuCtxPopCurrent_v2");
    *(void **)&get = ca_real_dlsym(lib, "cuCtxGetDevice");
    CUcontext popped;
    if (push && pop && get && (rc = push(ctx)) == CUDA_SUCCESS) {
      rc = get(&d);
      pop(&popped);
    }
  }
  if (rc == CUDA_SUCCESS) *dev = (int)d;
  return rc;
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
