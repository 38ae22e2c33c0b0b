/* NVML, opened at run time as the driver is (never linked): the processes
 * that hold memory on a device, as `nvidia-smi` lists them. Only the CUDA
 * backend uses it, and only when an allocation fails. */
#ifndef CUDALLOC_NVML_H
#define CUDALLOC_NVML_H

#include "backend.h"

/* The compute processes on the device at PCI bus id (NVML's
 * "domain:bus:device.function" form), at most cap of them into out, *n
 * written; names are left empty. CUDA_ERROR_NOT_SUPPORTED when NVML is not
 * there or does not know the device. */
CUresult ca_nvml_processes(const char *pci_bus_id, ca_process_t *out, unsigned cap, unsigned *n);

#endif /* CUDALLOC_NVML_H */
