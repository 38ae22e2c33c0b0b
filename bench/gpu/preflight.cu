/* The GPU check's first step (bench/gpu-check.sh, section preflight): can
 * this machine run cudalloc's CUDA backend at all? Built by nvcc with its
 * default static runtime, as most CUDA programs are, so that a driver older
 * than the toolkit shows up exactly as it does for them: cudaGetDeviceCount
 * returns cudaErrorInsufficientDriver.
 *
 * Prints the driver and runtime versions, then per device its name, memory,
 * the virtual memory management attribute and the granularities, and times
 * the one large address reservation the core makes (5 x the device's memory,
 * halved while the driver refuses, as alloc/device.c does).
 *
 * Exit 0 and "preflight: ok", or exit 2 with one line "preflight: FAIL: ..."
 * on stderr that says what stops the check. */
#include "driver.h"

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdlib.h>

#define GiB (1024.0 * 1024.0 * 1024.0)

/* The one line that stops the check; returns the exit status. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "preflight: FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 2;
}

static const char *version(int v) {
  static char buf[2][16];
  static int k;
  k ^= 1;
  snprintf(buf[k], sizeof buf[k], "%d.%d", v / 1000, v % 1000 / 10);
  return buf[k];
}

/* The core's reservation: 5, 3 then 2 times the device's memory. */
static void time_reservation(int dev, size_t total, size_t gran) {
  PFN_cuMemAddressReserve_v10020 reserve = (PFN_cuMemAddressReserve_v10020)drv_proc("cuMemAddressReserve");
  PFN_cuMemAddressFree_v10020 release = (PFN_cuMemAddressFree_v10020)drv_proc("cuMemAddressFree");
  if (!reserve || !release) {
    printf("preflight: device %d: cuMemAddressReserve/cuMemAddressFree not provided\n", dev);
    return;
  }
  size_t small = (total + gran - 1) / gran * gran;
  for (size_t mult = 4; mult >= 1; mult /= 2) {
    size_t size = small + small * mult;
    CUdeviceptr va = 0;
    double t0 = drv_now_us();
    CUresult rc = reserve(&va, size, gran, 0, 0);
    double t1 = drv_now_us();
    if (rc != CUDA_SUCCESS) {
      printf("preflight: device %d: reserving %.0f GiB of addresses: %s after %.0f us\n", dev,
             (double)size / GiB, drv_code(rc), t1 - t0);
      continue;
    }
    rc = release(va, size);
    printf("preflight: device %d: the core's address reservation, %.0f GiB (%zu x the device's memory): "
           "%.0f us to reserve, %.0f us to free (%s)\n",
           dev, (double)size / GiB, 1 + mult, t1 - t0, drv_now_us() - t1, drv_code(rc));
    return;
  }
}

static int check_device(int dev) {
  PFN_cuDeviceGet_v2000 get = (PFN_cuDeviceGet_v2000)drv_proc("cuDeviceGet");
  PFN_cuDeviceGetAttribute_v2000 attr = (PFN_cuDeviceGetAttribute_v2000)drv_proc("cuDeviceGetAttribute");
  PFN_cuMemGetAllocationGranularity_v10020 granularity =
      (PFN_cuMemGetAllocationGranularity_v10020)drv_proc("cuMemGetAllocationGranularity");
  if (!get || !attr || !granularity) return fail("the driver lacks cuDeviceGetAttribute or cuMemGetAllocationGranularity");
  CUdevice d;
  int vmm = 0;
  CUresult rc = get(&d, dev);
  if (rc == CUDA_SUCCESS) rc = attr(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
  if (rc != CUDA_SUCCESS) return fail("cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED): %s", drv_code(rc));
  cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  cudaGetDeviceProperties(&p, dev);
  printf("preflight: device %d: %s, compute %d.%d, %.1f GiB, virtual memory management: %s\n", dev, p.name,
         p.major, p.minor, (double)p.totalGlobalMem / GiB, vmm ? "yes" : "NO");
  if (!vmm)
    return fail("device %d (%s) lacks virtual memory management (cuMemCreate/cuMemMap), which the CUDA backend needs",
                dev, p.name);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = (int)d;
  size_t gmin = 0, grec = 0;
  rc = granularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (rc == CUDA_SUCCESS) rc = granularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (rc != CUDA_SUCCESS) return fail("cuMemGetAllocationGranularity: %s", drv_code(rc));
  printf("preflight: device %d: granularity %zu KiB (minimum), %zu KiB (recommended)\n", dev, gmin >> 10, grec >> 10);
  time_reservation(dev, p.totalGlobalMem, gmin);
  return 0;
}

int main(void) {
  int rt = 0, dv = 0, count = 0;
  cudaRuntimeGetVersion(&rt);
  printf("preflight: CUDA runtime %s (built with the toolkit's CUDART_VERSION %s, linked statically)\n",
         version(rt), version(CUDART_VERSION));
  const char *no_driver = drv_open();
  if (no_driver) return fail("%s", no_driver);
  PFN_cuDriverGetVersion_v2020 driver_version = (PFN_cuDriverGetVersion_v2020)dlsym(drv_lib.handle, "cuDriverGetVersion");
  if (driver_version && driver_version(&dv) == CUDA_SUCCESS) printf("preflight: CUDA driver %s\n", version(dv));
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorInsufficientDriver)
    return fail("the driver (CUDA %s) is older than the toolkit (CUDA %s): cudaGetDeviceCount returns "
                "cudaErrorInsufficientDriver; use a newer driver or build with an older toolkit",
                dv ? version(dv) : "unknown", version(CUDART_VERSION));
  if (err != cudaSuccess) return fail("cudaGetDeviceCount returns %s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  if (count == 0) return fail("no CUDA device");
  PFN_cuInit_v2000 init = (PFN_cuInit_v2000)drv_proc("cuInit");
  if (!init || init(0) != CUDA_SUCCESS) return fail("cuInit failed after the runtime started");
  printf("preflight: %d device%s\n", count, count > 1 ? "s" : "");
  for (int dev = 0; dev < count; dev++) {
    int rc = check_device(dev);
    if (rc) return rc;
  }
  printf("preflight: ok\n");
  return 0;
}
