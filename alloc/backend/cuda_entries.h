/* The driver entry points the CUDA backend (cuda.c) resolves through
 * cuGetProcAddress, listed once: the backend builds its table from it, and
 * the GPU check's driver probe (bench/gpu/driver_probe.cu) asks the driver
 * each of them, so that the probe covers exactly what the backend uses. */
#ifndef CUDALLOC_CUDA_ENTRIES_H
#define CUDALLOC_CUDA_ENTRIES_H

#include <cudaTypedefs.h>

/* X(field, symbol, type): the types are those of the CUDA 12 ABI. */
#define CA_CUDA_DRIVER_ENTRIES(X)                                                      \
  X(get_error_name, "cuGetErrorName", PFN_cuGetErrorName_v6000)                \
  X(init, "cuInit", PFN_cuInit_v2000)                                          \
  X(device_get_count, "cuDeviceGetCount", PFN_cuDeviceGetCount_v2000)          \
  X(device_get, "cuDeviceGet", PFN_cuDeviceGet_v2000)                          \
  X(device_total_mem, "cuDeviceTotalMem", PFN_cuDeviceTotalMem_v3020)          \
  X(device_get_name, "cuDeviceGetName", PFN_cuDeviceGetName_v2000)             \
  X(device_get_attribute, "cuDeviceGetAttribute", PFN_cuDeviceGetAttribute_v2000) \
  X(primary_retain, "cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000) \
  X(ctx_get_current, "cuCtxGetCurrent", PFN_cuCtxGetCurrent_v4000)             \
  X(ctx_set_current, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000)             \
  X(ctx_push, "cuCtxPushCurrent", PFN_cuCtxPushCurrent_v4000)                  \
  X(ctx_pop, "cuCtxPopCurrent", PFN_cuCtxPopCurrent_v4000)                     \
  X(ctx_get_device, "cuCtxGetDevice", PFN_cuCtxGetDevice_v2000)                \
  X(ctx_sync, "cuCtxSynchronize", PFN_cuCtxSynchronize_v2000)                  \
  X(mem_get_info, "cuMemGetInfo", PFN_cuMemGetInfo_v3020)                      \
  X(granularity, "cuMemGetAllocationGranularity", PFN_cuMemGetAllocationGranularity_v10020) \
  X(address_reserve, "cuMemAddressReserve", PFN_cuMemAddressReserve_v10020)    \
  X(address_free, "cuMemAddressFree", PFN_cuMemAddressFree_v10020)             \
  X(mem_create, "cuMemCreate", PFN_cuMemCreate_v10020)                         \
  X(mem_release, "cuMemRelease", PFN_cuMemRelease_v10020)                      \
  X(mem_map, "cuMemMap", PFN_cuMemMap_v10020)                                  \
  X(mem_unmap, "cuMemUnmap", PFN_cuMemUnmap_v10020)                            \
  X(mem_set_access, "cuMemSetAccess", PFN_cuMemSetAccess_v10020)               \
  X(event_create, "cuEventCreate", PFN_cuEventCreate_v2000)                    \
  X(event_record, "cuEventRecord", PFN_cuEventRecord_v2000)                    \
  X(event_query, "cuEventQuery", PFN_cuEventQuery_v2000)                       \
  X(event_sync, "cuEventSynchronize", PFN_cuEventSynchronize_v2000)            \
  X(event_destroy, "cuEventDestroy", PFN_cuEventDestroy_v4000)                 \
  X(stream_sync, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000)         \
  X(stream_query, "cuStreamQuery", PFN_cuStreamQuery_v2000)                    \
  X(stream_is_capturing, "cuStreamIsCapturing", PFN_cuStreamIsCapturing_v10000) \
  X(stream_get_ctx, "cuStreamGetCtx", PFN_cuStreamGetCtx_v9020)                \
  X(mem_host_alloc, "cuMemHostAlloc", PFN_cuMemHostAlloc_v2020)                \
  X(mem_free_host, "cuMemFreeHost", PFN_cuMemFreeHost_v2000)                   \
  X(mem_host_register, "cuMemHostRegister", PFN_cuMemHostRegister_v6050)       \
  X(mem_host_unregister, "cuMemHostUnregister", PFN_cuMemHostUnregister_v4000)

#endif /* CUDALLOC_CUDA_ENTRIES_H */
