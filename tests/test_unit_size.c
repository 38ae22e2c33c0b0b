/* Unit tests of the size policy of blocks.c: ca_round_size, with plain
 * 512-byte rounding and with roundup_power2_divisions (PyTorch's steps
 * between powers of two), and ca_pool_for's small/large boundary. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "core_testing.h"

static void divisions(unsigned div) {
  ca_config_defaults(&ca_config);
  ca_config.roundup_power2_divisions = div;
}

Test(unit_size, plain_rounding_goes_up_to_a_multiple_of_512) {
  divisions(0);
  cr_assert_eq(ca_round_size(0), CA_MIN_BLOCK, "even 0 takes a whole block");
  cr_assert_eq(ca_round_size(1), 512);
  cr_assert_eq(ca_round_size(511), 512);
  cr_assert_eq(ca_round_size(512), 512);
  cr_assert_eq(ca_round_size(513), 1024);
  cr_assert_eq(ca_round_size(1200 * 1024 + 1), 1200 * 1024 + 512);
  cr_assert_eq(ca_round_size((size_t)1 << 40), (size_t)1 << 40);
}

Test(unit_size, divisions_round_to_equal_steps_between_powers_of_two) {
  divisions(4);
  cr_assert_eq(ca_round_size(1 << 20), 1 << 20, "powers of two are kept");
  cr_assert_eq(ca_round_size((1 << 20) + 1), 1280 * 1024, "steps of 256 KiB above 1 MiB");
  cr_assert_eq(ca_round_size(1280 * 1024), 1280 * 1024, "a step is kept");
  cr_assert_eq(ca_round_size(1280 * 1024 + 1), 1536 * 1024);
  cr_assert_eq(ca_round_size((2 << 20) - 1), 2 << 20, "the last step reaches the next power");
  cr_assert_eq(ca_round_size(4097), 5120, "steps of 1 KiB above 4 KiB");
  /* At 2 KiB a quarter is 512 bytes: no coarser than plain rounding, so plain. */
  cr_assert_eq(ca_round_size(2049), 2560);
  cr_assert_eq(ca_round_size(1500), 1536, "below 2 KiB: plain rounding");
  divisions(1);
  cr_assert_eq(ca_round_size((1 << 20) + 1), (1 << 20) + 512, "1 division: plain rounding");
}

/* Properties over a sweep, for each setting: a result is a multiple of
 * 512, at least the request, never smaller for a larger request, and
 * between two powers of two there are at most `div` distinct results. */
ParameterizedTestParameters(unit_size, sweep) {
  static unsigned divs[] = {0, 2, 4, 8, 16, 64};
  return cr_make_param_array(unsigned, divs, sizeof divs / sizeof *divs);
}

ParameterizedTest(unsigned *div, unit_size, sweep) {
  divisions(*div);
  size_t last = 0;
  for (int p = 13; p < 30; p++) {   /* 8 KiB to 1 GiB: steps above 512 bytes */
    size_t lo = (size_t)1 << p, step = lo / 97 + 1, distinct = 0, prev = 0;
    for (size_t size = lo + 1; size <= 2 * lo; size += step) {
      size_t r = ca_round_size(size);
      cr_assert(r % CA_MIN_BLOCK == 0 && r >= size && r >= last, "div %u: %zu -> %zu", *div, size, r);
      if (r != prev) distinct++;
      prev = last = r;
    }
    if (*div > 1) cr_assert_leq(distinct, *div, "div %u: %zu results above 2^%d", *div, distinct, p);
  }
}

Test(unit_size, requests_up_to_1_mib_go_to_the_small_pool) {
  ca_device_t d = {0};
  cr_assert_eq(ca_pool_for(&d, CA_SMALL_REQUEST), &d.pools[CA_POOL_SMALL]);
  cr_assert_eq(ca_pool_for(&d, CA_SMALL_REQUEST + 512), &d.pools[CA_POOL_LARGE]);
  cr_assert_eq(ca_pool_for(&d, 512), &d.pools[CA_POOL_SMALL]);
}
