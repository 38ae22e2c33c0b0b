# Extra targets of the interception layer (the library itself is built by the
# top-level Makefile from shim/, shim/sim/ and alloc/).

# The dlsym interposer runs inside the sanitizer runtimes' own start-up (they
# look up the functions they intercept with dlsym before instrumented code can
# run), so it is built without sanitizers.
$(BUILD)/obj/shim/dlsym.o: LIB_CFLAGS += -fno-sanitize=all

# The fake driver (tests/fake/libcuda.c), one for every test that needs a
# libcuda.so.1 on a machine without one: test_backend_cuda (suite cuda_fake)
# and the dlsym / cuGetProcAddress programs of test_shim. Never sanitized, as
# those programs are not; -Bsymbolic keeps its resolver's table on its
# own functions under a preloaded libcudalloc.so that exports the same names.
FAKE_CUDA := $(BUILD)/tests/fake/libcuda.so.1
$(FAKE_CUDA): tests/fake/libcuda.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic $< -o $@
$(BUILD)/tests/test_backend_cuda $(BUILD)/tests/test_shim: $(FAKE_CUDA)
# The fake NVML (tests/fake/libnvidia-ml.c), for the CUDA backend's list of
# the processes on a device (suite cuda_fake).
FAKE_NVML := $(BUILD)/tests/fake/libnvidia-ml.so.1
$(FAKE_NVML): tests/fake/libnvidia-ml.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libnvidia-ml.so.1 $< -o $@
$(BUILD)/tests/test_backend_cuda: $(FAKE_NVML)

# The library with a naive C dlsym wrapper instead of the trampoline (the C
# version, with its call to the real dlsym kept a call rather than a jump): the
# test rtld_next_check_catches_a_c_wrapper shows that tests/progs/rtld_next
# fails against it, so that its passing against the real library means
# something.
SHIM_VARIANT := $(BUILD)/test-variants/libcudalloc.so
$(BUILD)/test-variants/dlsym-c.o: shim/dlsym.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_SHIM) -fno-sanitize=all -fno-optimize-sibling-calls -DCA_DLSYM_NO_TRAMPOLINE -c $< -o $@
$(SHIM_VARIANT): $(ALLOC_OBJS) $(filter-out $(BUILD)/obj/shim/dlsym.o,$(SHIM_OBJS)) \
    $(BUILD)/test-variants/dlsym-c.o shim/exports.map $(JE_PRIVATE)
	$(CC) -shared -o $@ $(filter %.o,$^) $(JE_LINK) $(SANFLAGS) -Wl,-Bsymbolic \
	  -Wl,--version-script=shim/exports.map $(NODEFS) $(LIBS)
$(BUILD)/progs/rtld_next: $(SHIM_VARIANT)

# The GPU check's preload programs (bench/gpu-check.sh, section shim_gpu): a CUDA
# program with kernels, built by nvcc with its default static cudart and with
# -cudart shared; part of `make cuda` where nvcc exists.
ifneq ($(NVCC),)
SHIM_GPU_PROGS := $(BUILD)/progs/gpu_saxpy-static $(BUILD)/progs/gpu_saxpy-shared
cuda: $(SHIM_GPU_PROGS)
$(BUILD)/progs/gpu_saxpy-static: tests/progs/gpu_saxpy.cu tests/progs/progs.h
	@mkdir -p $(@D)
	$(NVCC) -O2 $(NVCC_ARCH) -Werror all-warnings -Ialloc/include -Itests/progs $< -o $@ -ldl
$(BUILD)/progs/gpu_saxpy-shared: tests/progs/gpu_saxpy.cu tests/progs/progs.h
	@mkdir -p $(@D)
	$(NVCC) -O2 $(NVCC_ARCH) -Werror all-warnings -cudart shared -Ialloc/include -Itests/progs $< -o $@ -ldl
endif

# tests/progs/rtld_local: libraries loaded RTLD_LOCAL, each with its own
# runtime (two fakes and the real libcudart, one behind a library of its
# own); the program itself links no runtime.
SCOPE := $(BUILD)/progs/scope
SCOPE_RTS := $(SCOPE)/libscope_rt3.so $(SCOPE)/libscope_rt5.so
SCOPE_FAKE_CALLERS := $(SCOPE)/libscope_caller3.so $(SCOPE)/libscope_caller5.so
SCOPE_LIB = $(CC) $(BASE_CFLAGS) -fvisibility=hidden -shared -Wl,-rpath,'$$ORIGIN' $< -o $@
$(SCOPE_RTS): $(SCOPE)/libscope_rt%.so: tests/progs/scope/fake_cudart.c
	@mkdir -p $(@D)
	$(SCOPE_LIB) -DFAKE_COUNT=$* -Wl,-soname,libscope_rt$*.so
$(SCOPE_FAKE_CALLERS): $(SCOPE)/libscope_caller%.so: tests/progs/scope/caller.c $(SCOPE)/libscope_rt%.so
	$(SCOPE_LIB) -L$(SCOPE) -lscope_rt$* -Wl,-soname,libscope_caller$*.so
$(SCOPE)/libscope_caller_cudart.so: tests/progs/scope/caller.c
	@mkdir -p $(@D)
	$(SCOPE_LIB) $(CUDART) -Wl,-soname,libscope_caller_cudart.so
$(SCOPE)/libscope_outer.so: tests/progs/scope/outer.c $(SCOPE)/libscope_caller_cudart.so
	$(SCOPE_LIB) -L$(SCOPE) -l:libscope_caller_cudart.so -Wl,-soname,libscope_outer.so
$(BUILD)/progs/rtld_local: private CUDART :=
$(BUILD)/progs/rtld_local: $(SCOPE_FAKE_CALLERS) $(SCOPE)/libscope_outer.so

# tests/progs/static_cudart: the runtime linked statically, as nvcc links it
# by default; the stripped twin keeps only a section named like nvcc's
# device code for cudalloc to recognize it by.
STATIC_CUDART := -L$(CUDA_LIBDIR) -lcudart_static -lrt
$(BUILD)/progs/static_cudart: private CUDART := $(STATIC_CUDART)
$(BUILD)/progs/static_cudart_stripped: tests/progs/static_cudart.c $(wildcard tests/progs/*.h) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -DFAKE_FATBIN_SECTION -Itests/progs $< -o $@ -s $(STATIC_CUDART) $(LIBS)
$(BUILD)/progs/static_cudart: $(BUILD)/progs/static_cudart_stripped
