/* A stand-in for libcuda.so.1 on machines without a driver, for the tests
 * of cudalloc's dlsym and cuGetProcAddress interposition (tests/progs/
 * drvapi.c, dlsym_old.c). It exports a resolver and a few entry points,
 * named as the driver names them, including ones that cudalloc must leave
 * alone (older ABIs, names that merely begin like the wrapped ones). Its
 * allocation functions return a recognizable fake address: the tests check
 * that cudalloc, not this library, answered. */
#include <string.h>
#include <cuda.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_PTR ((CUdeviceptr)0xfa4e0000ull)

#undef cuMemAlloc
#undef cuMemFree
#undef cuGetProcAddress
#undef cuMemAllocHost

FAKE_EXPORT CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemAlloc(unsigned *dptr, unsigned size) { (void)size; *dptr = 0xfa4e; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { (void)size; *dptr = FAKE_PTR; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return dptr == FAKE_PTR ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
FAKE_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size) { (void)size; *pp = (void *)FAKE_PTR; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) { (void)size; (void)s; *dptr = FAKE_PTR; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) { (void)size; (void)s; *dptr = FAKE_PTR; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) { (void)s; return cuMemFree_v2(dptr); }
FAKE_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *b, size_t *n, CUdeviceptr p) { (void)b; (void)n; (void)p; return CUDA_ERROR_NOT_FOUND; }
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = 0; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) { *ctx = NULL; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) { *dev = ordinal; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) { (void)dev; *ctx = NULL; return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
FAKE_EXPORT CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);

static const struct { const char *symbol; int version; unsigned per_thread; void *fn; } table[] = {
    {"cuGetProcAddress", 11030, 0, (void *)cuGetProcAddress},
    {"cuGetProcAddress", 12000, 0, (void *)cuGetProcAddress_v2},
    {"cuInit", 2000, 0, (void *)cuInit},
    {"cuMemAlloc", 2000, 0, (void *)cuMemAlloc},
    {"cuMemAlloc", 3020, 0, (void *)cuMemAlloc_v2},
    {"cuMemFree", 3020, 0, (void *)cuMemFree_v2},
    {"cuMemAllocHost", 3020, 0, (void *)cuMemAllocHost_v2},
    {"cuMemAllocAsync", 11020, 0, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, 1, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, 0, (void *)cuMemFreeAsync},
    {"cuMemGetAddressRange", 3020, 0, (void *)cuMemGetAddressRange_v2},
    {"cuMemGetInfo", 3020, 0, (void *)cuMemGetInfo_v2},
    {"cuCtxGetCurrent", 4000, 0, (void *)cuCtxGetCurrent},
    {"cuDeviceGet", 2000, 0, (void *)cuDeviceGet},
    {"cuDevicePrimaryCtxRetain", 7000, 0, (void *)cuDevicePrimaryCtxRetain},
    {"cuCtxSetCurrent", 4000, 0, (void *)cuCtxSetCurrent},
};

/* The newest entry not newer than version, as the driver picks. */
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status) {
  int best = -1;
  unsigned per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (int i = 0; i < (int)(sizeof table / sizeof table[0]); i++) {
    if (strcmp(table[i].symbol, symbol) != 0 || table[i].version > version) continue;
    if (table[i].per_thread && !per_thread) continue;
    if (best < 0 || table[i].version > table[best].version || table[i].per_thread) best = i;
  }
  *pfn = best >= 0 ? table[best].fn : NULL;
  if (status) *status = best >= 0 ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return best >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
