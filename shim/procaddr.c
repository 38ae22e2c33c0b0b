/* cuGetProcAddress, interposed: since CUDA 12 the runtime (shared or
 * static) reaches every driver entry point through it, having found it
 * with dlsym(libcuda, "cuGetProcAddress_v2") (dlsym.c hands back these
 * wrappers).
 *
 * The real resolver answers first. cudalloc then learns which exported
 * symbol it returned (dladdr: cuMemAlloc_v2, cuMemAllocAsync_ptsz, ...) and
 * replaces exactly the entry points it serves (symbols.h), never a prefix:
 * cuBLAS, cuDNN and cuFFT names begin with "cu" too. The requested name,
 * version and stream flags name the entry point when dladdr cannot, and on
 * the simulated device, where there is no real driver.
 *
 * The replacement happens whoever asks and whenever, even when the runtime
 * starts inside a cudalloc entry point (cudaFree(0) passed through): the
 * pointers handed out here are called later, from outside. The backend never
 * comes here: its dlsym gets the real resolver (dlsym.c).
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <string.h>

typedef enum { KIND_A, KIND_L, KIND_P } stream_kind_t;

/* X(name, requested, version, kind) of symbols.h, as a table. */
static const struct proc_entry_s {
  const char *requested;
  int version;
  stream_kind_t kind;
  ca_sym_t sym;
} entries[] = {
#define ENTRY(name, req, ver, kind) {#req, ver, KIND_##kind, CA_SYM_##name},
    CA_SYMS_DRIVER(ENTRY) CA_SYMS_SIM_DRIVER(ENTRY)
#undef ENTRY
};
#define NENTRIES (sizeof entries / sizeof entries[0])

static bool kind_matches(stream_kind_t kind, cuuint64_t flags) {
  bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  return kind == KIND_A || (kind == KIND_P) == per_thread;
}

/* The entry point the driver returns for (symbol, version, flags) among
 * those cudalloc serves: the newest one not newer than version; -1 when
 * the request is for an older ABI that cudalloc leaves alone. */
static int by_request(const char *symbol, int version, cuuint64_t flags) {
  int best = -1, best_version = 0;
  for (size_t i = 0; i < NENTRIES; i++) {
    const struct proc_entry_s *e = &entries[i];
    if (strcmp(e->requested, symbol) != 0 || e->version > version || !kind_matches(e->kind, flags))
      continue;
    if (e->version > best_version) best = (int)e->sym, best_version = e->version;
  }
  return best;
}

/* The driver entry point that real is, or -1 when it is none cudalloc
 * serves. */
static int identify(void *real, const char *symbol, int version, cuuint64_t flags) {
  Dl_info info;
  if (dladdr(real, &info) && info.dli_sname && info.dli_saddr == real) {
    int sym = ca_sym_find(info.dli_sname);
    return sym >= 0 && ca_sym_is_driver((ca_sym_t)sym) ? sym : -1;
  }
  return by_request(symbol, version, flags);
}

/* Swaps *pfn for cudalloc's entry point when it is one cudalloc serves. */
static void replace(void **pfn, const char *symbol, int version, cuuint64_t flags) {
  int sym = identify(*pfn, symbol, version, flags);
  if (sym >= 0 && (!ca_sym_sim_only_driver((ca_sym_t)sym) || ca_shim_sim()))
    *pfn = ca_sym_wrapper((ca_sym_t)sym);
}

/* Without a real resolver (the simulated device): cudalloc's own entry
 * points, and CUDA_ERROR_NOT_FOUND for everything else. */
static CUresult sim_resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status) {
  int sym = ca_shim_sim() ? by_request(symbol, version, flags) : -1;
  *pfn = sym >= 0 ? ca_sym_wrapper((ca_sym_t)sym) : NULL;
  if (status) *status = sym >= 0 ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (sym >= 0) return CUDA_SUCCESS;
  return ca_shim_sim() ? CUDA_ERROR_NOT_FOUND : ca_drv_missing(symbol);
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
  __typeof__(&cuGetProcAddress_v2) real = CA_REAL(cuGetProcAddress_v2);
  if (!symbol || !pfn) return real ? real(symbol, pfn, version, flags, status) : CUDA_ERROR_INVALID_VALUE;
  if (!real) return sim_resolve(symbol, pfn, version, flags, status);
  CUresult rc = real(symbol, pfn, version, flags, status);
  if (rc == CUDA_SUCCESS && *pfn) replace(pfn, symbol, version, flags);
  return rc;
}

CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  __typeof__(&cuGetProcAddress) real = CA_REAL(cuGetProcAddress);
  if (!symbol || !pfn) return real ? real(symbol, pfn, version, flags) : CUDA_ERROR_INVALID_VALUE;
  if (!real) return sim_resolve(symbol, pfn, version, flags, NULL);
  CUresult rc = real(symbol, pfn, version, flags);
  if (rc == CUDA_SUCCESS && *pfn) replace(pfn, symbol, version, flags);
  return rc;
}
