/* NVML, opened at run time: libnvidia-ml.so.1 with dlopen on first use,
 * nvmlInit once, then nvmlDeviceGetComputeRunningProcesses for the device
 * named by its PCI bus id (CUDA and NVML number devices differently, and
 * CUDA_VISIBLE_DEVICES renumbers CUDA's: the bus id names the same one).
 * The types are NVML's ABI, declared here so that no NVML header is
 * needed to build. */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

typedef int nvml_return_t;      /* nvmlReturn_t: 0 success */
typedef void *nvml_device_t;    /* nvmlDevice_t */
#define NVML_VALUE_NOT_AVAILABLE (~0ull)

/* nvmlProcessInfo_t of the _v2 and _v3 entry points, and of the first. */
typedef struct {
  unsigned pid;
  unsigned long long used;
  unsigned gpu_instance, compute_instance;
} nvml_process_v2_t;
typedef struct {
  unsigned pid;
  unsigned long long used;
} nvml_process_v1_t;

typedef nvml_return_t (*init_fn)(void);
typedef nvml_return_t (*by_pci_fn)(const char *, nvml_device_t *);
typedef nvml_return_t (*procs_fn)(nvml_device_t, unsigned *, void *);

static struct {
  pthread_once_t once;
  bool ready;
  by_pci_fn by_pci;
  procs_fn procs;
  bool v1;                      /* procs takes nvml_process_v1_t */
} nvml = {.once = PTHREAD_ONCE_INIT};

static void *sym(void *lib, const char *a, const char *b) {
  void *p = dlsym(lib, a);
  return p || !b ? p : dlsym(lib, b);
}

static void load(void) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  init_fn init = (init_fn)sym(lib, "nvmlInit_v2", "nvmlInit");
  nvml.by_pci = (by_pci_fn)sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId");
  nvml.procs = (procs_fn)sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3",
                             "nvmlDeviceGetComputeRunningProcesses_v2");
  if (!nvml.procs) {
    nvml.procs = (procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses");
    nvml.v1 = true;
  }
  /* lib stays open: its entry points are kept */
  nvml.ready = init && nvml.by_pci && nvml.procs && init() == 0;
}

#define MAX_NVML_PROCESSES 128

CUresult ca_nvml_processes(const char *pci_bus_id, ca_process_t *out, unsigned cap, unsigned *n) {
  *n = 0;
  pthread_once(&nvml.once, load);
  nvml_device_t dev;
  if (!nvml.ready || nvml.by_pci(pci_bus_id, &dev) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  union {
    nvml_process_v2_t v2[MAX_NVML_PROCESSES];
    nvml_process_v1_t v1[MAX_NVML_PROCESSES];
  } buf;
  unsigned count = MAX_NVML_PROCESSES;
  if (nvml.procs(dev, &count, &buf) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  for (unsigned i = 0; i < count && i < MAX_NVML_PROCESSES && *n < cap; i++) {
    unsigned pid = nvml.v1 ? buf.v1[i].pid : buf.v2[i].pid;
    unsigned long long used = nvml.v1 ? buf.v1[i].used : buf.v2[i].used;
    memset(&out[*n], 0, sizeof out[*n]);
    out[*n].pid = pid;
    out[*n].bytes = used == NVML_VALUE_NOT_AVAILABLE ? UINT64_MAX : used;
    (*n)++;
  }
  return CUDA_SUCCESS;
}
