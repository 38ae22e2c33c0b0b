/* The table of the CUDA launchers: what build/workload-cuda runs on a GPU. */
#include "ops.h"

const ops_t ops_cuda = {
    .name = "CUDA kernels",
#define OPS_CUDA(name, params) .name = name##_cuda,
    OPS(OPS_CUDA)
#undef OPS_CUDA
};
