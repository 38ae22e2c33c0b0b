# The multimodal workload: ops (kernels/<op>.cu + kernels/<op>.c) and the model.
#
#   $(KERNEL_LIB)          the C references, the model, the verdict and the host-malloc
#                          memory layer, built like the library (sanitized under SAN):
#                          linked into every test binary
#   $(BUILD)/workload      the C references on CUDA-runtime memory (gcc, shared cudart):
#                          run it under LD_PRELOAD=libcudalloc.so CUDALLOC_CONF=backend:sim
#   $(BUILD)/workload-host the C references on host malloc (no CUDA at all)
#   $(BUILD)/workload-cuda the CUDA kernels (nvcc, its default static cudart)
#   $(BUILD)/kernel-check  every CUDA kernel against its C reference (run on a GPU)
#
# The workload binaries play "the application": never sanitized.

K_OPS := embedding linear layernorm attention gelu residual crossentropy adamw seqslice
K_REF_SRCS := $(K_OPS:%=kernels/%.c) kernels/ops_ref.c
K_CU_SRCS := $(K_OPS:%=kernels/%.cu)
K_MODEL_SRCS := kernels/model.c kernels/data.c kernels/verdict.c curves/svg.c curves/trend.c \
  kernels/memstats.c kernels/devmem_track.c

# Test side (LIB_CFLAGS: sanitized with the rest of the test binaries).
K_LIB_OBJS := $(patsubst %.c,$(BUILD)/kobj/lib/%.o,$(K_REF_SRCS) $(K_MODEL_SRCS) kernels/devmem_host.c)
KERNEL_LIB := $(BUILD)/libkernels.a

# Program side (APP_CFLAGS).
K_APP_OBJS := $(patsubst %.c,$(BUILD)/kobj/app/%.o,$(K_MODEL_SRCS))
K_APP_REF_OBJS := $(patsubst %.c,$(BUILD)/kobj/app/%.o,$(K_REF_SRCS))
K_CU_OBJS := $(patsubst %.cu,$(BUILD)/kobj/cu/%.o,$(K_CU_SRCS))

# gcc's -O2 cost model leaves the references' inner loops scalar; the dynamic
# model vectorizes them and halves the time of a run on the simulated device.
K_REF_FLAGS := -fvect-cost-model=dynamic
$(patsubst %.c,$(BUILD)/kobj/lib/%.o,$(K_REF_SRCS)) $(K_APP_REF_OBJS): K_FLAGS := $(K_REF_FLAGS)

WORKLOAD := $(BUILD)/workload
WORKLOAD_HOST := $(BUILD)/workload-host
WORKLOAD_CUDA := $(BUILD)/workload-cuda
KERNEL_CHECK := $(BUILD)/kernel-check

TEST_DEPS := $(WORKLOAD) $(WORKLOAD_HOST)

all: $(WORKLOAD) $(WORKLOAD_HOST) cuda

$(BUILD)/kobj/lib/%.o: %.c kernels/kernels.mk | $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(K_FLAGS) -I$(BUILD)/include -Ikernels -Icurves -c $< -o $@

$(BUILD)/kobj/app/%.o: %.c kernels/kernels.mk | $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(K_FLAGS) -Ikernels -Icurves -c $< -o $@

$(BUILD)/kobj/app/kernels/workload_cuda.o: kernels/workload.c kernels/kernels.mk | $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Ikernels -Icurves -DWORKLOAD_CUDA -c $< -o $@

$(KERNEL_LIB): $(K_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(WORKLOAD): $(BUILD)/kobj/app/kernels/workload.o $(K_APP_OBJS) $(K_APP_REF_OBJS) \
    $(BUILD)/kobj/app/kernels/devmem.o
	$(CC) -o $@ $^ $(CUDART) $(LIBS)

$(WORKLOAD_HOST): $(BUILD)/kobj/app/kernels/workload.o $(K_APP_OBJS) $(K_APP_REF_OBJS) \
    $(BUILD)/kobj/app/kernels/devmem_host.o
	$(CC) -o $@ $^ $(LIBS)

# --- CUDA builds: skipped, not failed, without nvcc ---------------------------
ifeq ($(NVCC),)
cuda:
	@echo "nvcc not found, skipping GPU builds"
else
# compute_75 PTX runs on every GPU CUDA 13 supports; sm_90 code for Hopper.
NVCC_ARCH ?= -gencode arch=compute_75,code=[sm_75,compute_75] -gencode arch=compute_90,code=sm_90
NVCC_FLAGS := -O2 -std=c++17 -lineinfo $(NVCC_ARCH) -Werror all-warnings \
  -Xcompiler -Wall,-Wextra,-fPIC -Ikernels -Icurves -MMD -MP

cuda: $(WORKLOAD_CUDA) $(KERNEL_CHECK)

$(BUILD)/kobj/cu/%.o: %.cu kernels/kernels.mk
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(WORKLOAD_CUDA): $(BUILD)/kobj/app/kernels/workload_cuda.o $(K_APP_OBJS) $(K_CU_OBJS) \
    $(BUILD)/kobj/app/kernels/ops_cuda.o $(BUILD)/kobj/app/kernels/devmem.o
	$(NVCC) $(NVCC_ARCH) -o $@ $^ $(LIBS)

$(KERNEL_CHECK): $(BUILD)/kobj/app/kernels/kernel_check.o $(K_APP_REF_OBJS) $(K_CU_OBJS) \
    $(BUILD)/kobj/app/kernels/data.o
	$(NVCC) $(NVCC_ARCH) -o $@ $^ $(LIBS)
endif

-include $(K_LIB_OBJS:.o=.d) $(wildcard $(BUILD)/kobj/app/kernels/*.d $(BUILD)/kobj/app/curves/*.d $(BUILD)/kobj/cu/kernels/*.d)
