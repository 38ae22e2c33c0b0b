/* The driver API reached the way statically linked cudart reaches it:
 * dlopen the driver, dlsym "cuGetProcAddress_v2", then ask it for every
 * entry point. Under the preload the memory entry points must be
 * cudalloc's, exactly those (not the older ABI, not cuMemAllocManaged), and
 * everything else the driver's; dlsym on the driver's handle likewise.
 *
 *   drvapi [driver]   the driver library (default libcuda.so.1; the tests
 *                     pass the fake one, tests/fake/libcuda.c, on a machine
 *                     without)
 *   drvapi -          no driver at all (CUDALLOC_CONF=backend:sim): the
 *                     resolver is the process's own cuGetProcAddress_v2,
 *                     cudalloc's, which still names its entry points
 */
#include "progs.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#define MiB ((size_t)1 << 20)

static PFN_cuGetProcAddress_v12000 gpa;

static void *proc(const char *symbol, int version, cuuint64_t flags) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult status;
  CUresult rc = gpa(symbol, &fn, version, flags, &status);
  return rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? fn : NULL;
}

static void *mine(const char *name) { return dlsym(RTLD_DEFAULT, name); }

/* The context a driver-API program makes current before allocating
 * (there is none to make without a driver). */
static void start_driver(void *driver) {
  if (!driver) return;
  CUresult (*init)(unsigned) = proc("cuInit", 2000, 0);
  CUresult (*device_get)(CUdevice *, int) = proc("cuDeviceGet", 2000, 0);
  CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain", 7000, 0);
  CUresult (*set_current)(CUcontext) = proc("cuCtxSetCurrent", 4000, 0);
  CHECK(init && device_get && retain && set_current);
  CHECK(!served_by_cudalloc((void *)init) && !served_by_cudalloc((void *)retain));
  CUdevice dev;
  CUcontext ctx;
  CHECK(init(0) == CUDA_SUCCESS && device_get(&dev, 0) == CUDA_SUCCESS);
  CHECK(retain(&ctx, dev) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS);
}

/* Which entry points cuGetProcAddress hands out. */
static void resolution(void) {
  CHECK(proc("cuMemAlloc", 12000, 0) == mine("cuMemAlloc_v2"));
  CHECK(served_by_cudalloc(proc("cuMemAlloc", 12000, 0)));
  CHECK(proc("cuMemFree", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == mine("cuMemFree_v2"));
  CHECK(proc("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
        mine("cuMemAllocAsync_ptsz"));
  CHECK(proc("cuMemAllocAsync", 12000, 0) == mine("cuMemAllocAsync"));
  CHECK(proc("cuGetProcAddress", 12000, 0) == mine("cuGetProcAddress_v2"));
  /* left alone: the 32-bit ABI of CUDA < 3.2, and a name that only begins alike */
  void *old = proc("cuMemAlloc", 3000, 0);
  CHECK(old == NULL || !served_by_cudalloc(old));
  void *managed = proc("cuMemAllocManaged", 12000, 0), *ctx = proc("cuCtxGetCurrent", 12000, 0);
  CHECK(managed == NULL || !served_by_cudalloc(managed));
  CHECK(ctx == NULL || !served_by_cudalloc(ctx));
}

/* The resolved entry points allocate from cudalloc, with the driver's codes. */
static void use(void) {
  CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 12000, 0);
  CUresult (*release)(CUdeviceptr) = proc("cuMemFree", 12000, 0);
  CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = proc("cuMemGetAddressRange", 12000, 0);
  CUresult (*info)(size_t *, size_t *) = proc("cuMemGetInfo", 12000, 0);
  CHECK(alloc && release && range && info);
  CUdeviceptr d = 0, base = 0;
  size_t size = 0, free_bytes = 0, total = 0;
  CHECK(alloc(&d, 3 * MiB + 5) == CUDA_SUCCESS && d != 0);
  CHECK(owned_by_cudalloc((void *)d));
  CHECK(range(&base, &size, d + 4096) == CUDA_SUCCESS && base == d && size == 3 * MiB + 5);
  CHECK(range(NULL, &size, d) == CUDA_SUCCESS && range(&base, NULL, d) == CUDA_SUCCESS);
  CHECK(info(&free_bytes, &total) == CUDA_SUCCESS && free_bytes <= total && total > 0);
  CHECK(alloc(&base, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(alloc(NULL, 16) == CUDA_ERROR_INVALID_VALUE);
  CHECK(release(d) == CUDA_SUCCESS);
  CHECK(release(d) == CUDA_ERROR_INVALID_VALUE);
}

/* dlsym on the driver's handle: the same exact names, nothing more. */
static void direct(void *driver) {
  CHECK(dlsym(driver, "cuMemAlloc_v2") == mine("cuMemAlloc_v2"));
  CHECK(served_by_cudalloc(dlsym(driver, "cuMemAlloc_v2")));
  CHECK(dlsym(driver, "cuMemFreeAsync") == mine("cuMemFreeAsync"));
  CHECK(!served_by_cudalloc(dlsym(driver, "cuMemAllocManaged")));
  CHECK(!served_by_cudalloc(dlsym(driver, "cuInit")));
  CHECK(dlsym(driver, "cuNoSuchEntryPoint") == NULL && dlerror() != NULL);
  PFN_cuGetProcAddress_v11030 v1 = (PFN_cuGetProcAddress_v11030)dlsym(driver, "cuGetProcAddress");
  void *fn = NULL;
  CHECK(served_by_cudalloc((void *)v1));
  CHECK(v1("cuMemFree", &fn, 11030, 0) == CUDA_SUCCESS && fn == mine("cuMemFree_v2"));
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "libcuda.so.1";
  void *driver = strcmp(path, "-") ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!driver && strcmp(path, "-")) {
    fprintf(stderr, "drvapi: cannot open %s: %s\n", path, dlerror());
    return 1;
  }
  *(void **)&gpa = dlsym(driver ? driver : RTLD_DEFAULT, "cuGetProcAddress_v2");
  CHECK(gpa != NULL);
  CHECK(served_by_cudalloc((void *)gpa));
  start_driver(driver);
  resolution();
  use();
  if (driver) direct(driver);
  printf("drvapi: ok\n");
  return 0;
}
