# The multimodal workload: ops (kernels/<op>.cu + kernels/<op>.c) and the model.
# Defines KERNEL_LIB (the C references, linked into tests) and TEST_DEPS.
KERNEL_LIB :=
TEST_DEPS :=
