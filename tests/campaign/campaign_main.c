/* make campaign: every backend operation failing at its k-th call, k = 1..K
 * (default 40), in expandable and classic modes, with and without a device
 * reset halfway; prints the op x outcome table and exits 1 when any run
 * ended in a defect (wrong error, broken invariant, leak, oracle, crash).
 *
 *   campaign [--kmax K] [--seed S]
 */
#include "campaign.h"

int main(int argc, char **argv) {
  unsigned kmax = 40;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--kmax")) kmax = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
  }
  unsigned table[CA_OP_COUNT][OUT_COUNT] = {{0}};
  unsigned totals[OUT_COUNT] = {0}, runs = 0;
  for (int op = 0; op < CA_OP_COUNT; op++)
    for (unsigned k = 1; k <= kmax; k++)
      for (int mode = 0; mode < 4; mode++) {
        campaign_run_t run = {.op = (ca_backend_op_t)op, .k = k, .classic = mode & 1, .reset = mode >> 1,
                              .seed = seed * 1000003u + k * 31u + (unsigned)mode};
        campaign_outcome_t o = campaign_run(&run);
        table[op][o]++;
        totals[o]++;
        runs++;
      }
  printf("fault campaign: %u runs (k = 1..%u, expandable/classic, with/without reset, seed %llu)\n\n", runs, kmax,
         (unsigned long long)seed);
  printf("| op |");
  for (int o = 0; o < OUT_COUNT; o++) printf(" %s |", campaign_outcome_names[o]);
  printf("\n| --- |");
  for (int o = 0; o < OUT_COUNT; o++) printf(" ---: |");
  printf("\n");
  for (int op = 0; op < CA_OP_COUNT; op++) {
    printf("| %s |", ca_backend_op_name((ca_backend_op_t)op));
    for (int o = 0; o < OUT_COUNT; o++) printf(" %u |", table[op][o]);
    printf("\n");
  }
  printf("| **all** |");
  unsigned bad = 0;
  for (int o = 0; o < OUT_COUNT; o++) {
    printf(" %u |", totals[o]);
    if (campaign_outcome_bad((campaign_outcome_t)o)) bad += totals[o];
  }
  printf("\n\n%u runs ended in a defect\n", bad);
  return bad ? 1 : 0;
}
