#!/usr/bin/env bash
# Runs every test binary of $BUILD/tests, then the install check
# (tests/install/check.sh), and reports which failed.
# BUILD: the build folder; SAN / SAN_RUNTIME: set by `make test-asan|test-tsan`
# so that the preload tests can put the sanitizer runtime first in LD_PRELOAD.
set -u
BUILD=${BUILD:-build}
export CUDALLOC_BUILD=$(cd "$BUILD" && pwd)
export CUDALLOC_SAN=${SAN:-}
# Out-of-memory reports go to $TMPDIR by default: the suite's stay in the build.
export TMPDIR=$CUDALLOC_BUILD/tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
export CUDALLOC_SAN_RUNTIME=${SAN_RUNTIME:-}
# intercept_tls_get_addr=0: GCC 12's runtimes guess a new dynamic TLS
# block's range from the heap bytes before it, and libdw's (dlopen'ed to
# name call sites) made them die now and then: ThreadSanitizer "failed to
# allocate ... (errno: 12)", LeakSanitizer "Tracer caught signal 11" at a
# preloaded program's exit; tests/test_sanitizer_dtls.c shows both sides.
# Options given later win.
export ASAN_OPTIONS=intercept_tls_get_addr=0:${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:verify_asan_link_order=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=intercept_tls_get_addr=0:${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
jobs=${TEST_JOBS:-$(nproc)}
# Under ThreadSanitizer without address-space randomisation: GCC's runtime
# maps its shadow at fixed addresses, and a fixed layout makes a failure
# repeat. It was added for an errno-12 death of test_trace in CI, taken
# then for a randomised mapping in the shadow's way; that death has the
# signature of the TLS guess turned off above (test_stress_threads died
# the same way with -R, 2 of about 155 runs, before the option).
runner=()
[ "${SAN:-}" = tsan ] && command -v setarch >/dev/null && runner=(setarch "$(uname -m)" -R)
# Each binary's output is kept in $BUILD/test-logs; a failure's reasons are
# printed again at the very end, because CI keeps only the tail of the log
# (twice a stress run's failure left nothing but its name there).
logs=$CUDALLOC_BUILD/test-logs
rm -rf "$logs" && mkdir -p "$logs"
failed=()
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "== $name"
  "${runner[@]}" "$t" --jobs="$jobs" --short-filename 2>&1 | tee "$logs/$name.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("$name")
done
echo "== install"
BUILD=$BUILD SAN=${SAN:-} tests/install/check.sh || failed+=(install)
if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    [ -f "$logs/$name.log" ] || continue
    echo "-- why $name failed ($logs/$name.log):"
    # Criterion's failed assertions, crashes and timeouts; a sanitizer's verdict
    grep -E '\[----\]|\[FAIL\]|CRASH|[Cc]rash|[Tt]imed out|ERROR: |WARNING: ThreadSanitizer|SUMMARY: |runtime error' \
      "$logs/$name.log" | grep -v '^\[----\] *$' | head -n 12
  done
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all test binaries passed${SAN:+ (under $SAN)}"
