/* A fake NVML (libnvidia-ml.so.1) for tests/test_backend_cuda.c (suite
 * cuda_fake), on machines without a driver: the CUDA backend's
 * processes entry (alloc/backend/nvml.c) loads it by its soname once the
 * test has opened it by path.
 *
 * It knows one device, the fake driver's device 0 at PCI bus id
 * 00000000:3b:00.0, and lists two compute processes there: the calling
 * process (1 GiB) and pid 1 (256 MiB, its name in /proc/1/comm). A bus id
 * it does not know is NVML_ERROR_NOT_FOUND. fake_nvml_last_bus_id() says
 * which bus id was asked for last. */
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef struct {
  unsigned pid;
  unsigned long long used;
  unsigned gpu_instance, compute_instance;
} process_t;

static char last_bus_id[64];
static int initialized;
static int device_token;

API int nvmlInit_v2(void) {
  initialized = 1;
  return 0;
}

API int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device) {
  if (!initialized) return 1;   /* NVML_ERROR_UNINITIALIZED */
  strncpy(last_bus_id, bus_id, sizeof last_bus_id - 1);
  if (strcmp(bus_id, "00000000:3b:00.0") != 0) return 6;   /* NVML_ERROR_NOT_FOUND */
  *device = &device_token;
  return 0;
}

API int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned *count, process_t *infos) {
  if (device != &device_token) return 2;   /* NVML_ERROR_INVALID_ARGUMENT */
  if (*count < 2) {
    *count = 2;
    return 7;   /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  infos[0] = (process_t){(unsigned)getpid(), 1ull << 30, 0, 0};
  infos[1] = (process_t){1, 256ull << 20, 0, 0};
  *count = 2;
  return 0;
}

API const char *fake_nvml_last_bus_id(void) { return last_bus_id; }
