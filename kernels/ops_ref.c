/* The table of the C references: what build/workload runs on the simulated
 * device, and what the tests check against finite differences. */
#include "ops.h"

const ops_t ops_ref = {
    .name = "C reference",
#define OPS_REF(name, params) .name = name##_ref,
    OPS(OPS_REF)
#undef OPS_REF
};
