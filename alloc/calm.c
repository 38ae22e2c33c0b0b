/* The calm word (calm.h). A process starts unstarted, with legacyq's mode
 * not over yet. */
#include "calm.h"

uint32_t ca_stirred = CA_STIR_START | CA_STIR_LEGACYQ;
