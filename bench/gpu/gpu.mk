# The GPU check's own programs (bench/gpu-check.sh, docs/gpu.md). They only
# run on a GPU; here they are built, like the other CUDA builds, as part of
# `make cuda` where nvcc exists, and skipped without it.
#
#   $(GPU_DIR)/preflight          versions, VMM, granularity, the core's reservation
#   $(GPU_DIR)/driver_probe       the raw driver's answer to every call of alloc/backend/cuda.c
#   $(GPU_DIR)/fence_check-static the device-side fence check, nvcc's static runtime
#   $(GPU_DIR)/fence_check-shared the same with -cudart shared
#   $(GPU_DIR)/contexts           a driver-API program with its own context (gcc, -lcuda)
#   $(GPU_DIR)/workload-cuda-pool $(WORKLOAD_CUDA) on the driver's cudaMallocAsync pool
#
# A compiler newer than this project's may warn where ours does not: with
# WARN lacking -Werror (the GPU check builds with WARN=-Wall), nvcc's
# warnings are not fatal here either.

GPU_DIR := $(BUILD)/gpu

ifneq ($(NVCC),)
GPU_NVCC_WERROR := $(if $(filter -Werror,$(WARN)),-Werror all-warnings)
GPU_NVCC = $(NVCC) -O2 $(NVCC_ARCH) $(GPU_NVCC_WERROR)
# Link-time only: at run time the driver's own libcuda.so.1 is found (no rpath).
CUDA_STUBS ?= $(CUDA_LIBDIR)/stubs
GPU_PROGS := $(addprefix $(GPU_DIR)/,preflight driver_probe fence_check-static fence_check-shared \
  contexts workload-cuda-pool)

cuda: $(GPU_PROGS)

$(GPU_DIR)/preflight: bench/gpu/preflight.cu bench/gpu/driver.h
	@mkdir -p $(@D)
	$(GPU_NVCC) -Ibench/gpu $< -o $@ -ldl

$(GPU_DIR)/driver_probe: bench/gpu/driver_probe.cu bench/gpu/driver.h alloc/backend/cuda_entries.h
	@mkdir -p $(@D)
	$(GPU_NVCC) -Ibench/gpu -Ialloc/backend $< -o $@ -ldl -lpthread

$(GPU_DIR)/fence_check-static: bench/gpu/fence_check.cu tests/progs/progs.h
	@mkdir -p $(@D)
	$(GPU_NVCC) -Ialloc/include -Itests/progs $< -o $@ -ldl

$(GPU_DIR)/fence_check-shared: bench/gpu/fence_check.cu tests/progs/progs.h
	@mkdir -p $(@D)
	$(GPU_NVCC) -cudart shared -Ialloc/include -Itests/progs $< -o $@ -ldl

$(GPU_DIR)/contexts: bench/gpu/contexts.c tests/progs/progs.h $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Itests/progs $< -o $@ -L$(CUDA_STUBS) -lcuda $(LIBS)

$(GPU_DIR)/pool_wrap.o: bench/gpu/pool_wrap.c $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -c $< -o $@

# The objects of $(WORKLOAD_CUDA) (kernels/kernels.mk), with its cudaMalloc
# and cudaFree wrapped.
$(GPU_DIR)/workload-cuda-pool: $(BUILD)/kobj/app/kernels/workload_cuda.o $(K_APP_OBJS) $(K_CU_OBJS) \
    $(BUILD)/kobj/app/kernels/ops_cuda.o $(BUILD)/kobj/app/kernels/devmem.o $(GPU_DIR)/pool_wrap.o
	$(NVCC) $(NVCC_ARCH) -o $@ $^ -Xlinker --wrap=cudaMalloc -Xlinker --wrap=cudaFree $(LIBS)
endif

-include $(wildcard $(GPU_DIR)/*.d)
