/* The calm word (calm.h). A process starts unstarted, with legacyq's mode
 * not over yet. */
#include "calm.h"

ca_alone_u32_t ca_stirred = {.v = CA_STIR_START | CA_STIR_LEGACYQ};
