#!/usr/bin/env bash
# The GPU check: everything that needs a real GPU, in one short run.
#
#   bash bench/gpu-check.sh           on a machine with a GPU: build, run every
#                                     section below, and write what it printed to
#                                     docs/results/<date>-gpu.md (and to $OUT/ when
#                                     $OUT is set, as on a lent device machine)
#   bash bench/gpu-check.sh --pack    here, before: copies Criterion (headers and the
#                                     libraries it needs) into build/gpu-pack, for a
#                                     GPU machine that has no Criterion; carry
#                                     build/gpu-pack along with the run
#
# Without a GPU it says so and exits 0. The whole run is held to GPU_CHECK_BUDGET
# seconds (default 360): a section that would start with too little time left is
# skipped with a message, and every command runs under `timeout`.
#
# On a lent device machine (the working tree travels without .git, so name the
# commit; build/gpu-pack is ignored by git, so carry it):
#   bash bench/gpu-check.sh --pack                          (here, once)
#   run(command="GPU_CHECK_COMMIT=<git rev-parse --short HEAD> bash bench/gpu-check.sh",
#       carry=["build/gpu-pack"], timeout_s=480)
# The result comes back in $OUT: <date>-gpu.md and gpu-check-logs.tar.gz; copy
# the .md into docs/results/ and commit it.
#
# Adding a check: write a one-line section function (see "Sections") and add
# its name to SECTIONS. A section that needs a binary names it in run_if, which
# skips the section, with a message, when the binary was not built.
#
# Environment: GPU_CHECK_BUDGET (seconds), GPU_CHECK_OUT (the result file),
# GPU_CHECK_COMMIT (the commit to record where there is no .git),
# GPU_CHECK_FORCE=1 (run without a GPU: a dry run of the script itself), JOBS.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUDGET=${GPU_CHECK_BUDGET:-360}
JOBS=${JOBS:-$(nproc)}
PACK=build/gpu-pack
LOGS=build/gpu-check
MAX_LINES=${GPU_CHECK_MAX_LINES:-40}   # lines of output kept per command in the result

# -----------------------------------------------------------------------------
# Detection and packing
# -----------------------------------------------------------------------------

has_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    return 0
  fi
  # No nvidia-smi: a loadable driver and a device node will do.
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && [ -e /dev/nvidiactl ]
}

# Criterion and every library it pulls in, except glibc's own.
pack() {
  rm -rf "$PACK" && mkdir -p "$PACK/include" "$PACK/lib" || exit 1
  local inc=/usr/include/criterion lib
  lib=$(ldconfig -p | awk '/libcriterion\.so\.3 .*x86-64/ {print $NF; exit}')
  [ -d "$inc" ] && [ -n "$lib" ] || { echo "Criterion is not installed here"; exit 1; }
  cp -r "$inc" "$PACK/include/"
  for dep in "$lib" $(ldd "$lib" | awk '/=> \// {print $3}'); do
    case $(basename "$dep") in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) continue ;;
    esac
    cp -L "$dep" "$PACK/lib/"
  done
  ln -sf "$(basename "$lib")" "$PACK/lib/libcriterion.so"
  echo "packed into $PACK ($(du -sh "$PACK" | cut -f1)): carry it with the run (carry: [\"$PACK\"])"
}

# -----------------------------------------------------------------------------
# Running and recording
# -----------------------------------------------------------------------------

STEP=0
RESULTS=()      # "section|status|seconds" for the summary table

left() { echo $((BUDGET - SECONDS)); }

# Prints a command's output kept short: the first and last lines, with the
# full log's path in between.
show_output() {
  local log=$1 n
  n=$(wc -l < "$log")
  echo '```'
  if [ "$n" -le "$MAX_LINES" ]; then
    cat "$log"
  else
    head -n $((MAX_LINES / 4)) "$log"
    echo "... ($((n - MAX_LINES)) lines cut; the whole output is in $log) ..."
    tail -n $((MAX_LINES - MAX_LINES / 4)) "$log"
  fi
  echo '```'
}

# step <seconds> <command...>: runs the command under timeout (never past the
# budget), shows it, its output and its exit status; returns that status.
step() {
  local limit=$1 rc t0=$SECONDS log
  shift
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  [ "$limit" -lt 5 ] && { echo "skipped (time budget spent): $*"; return 124; }
  STEP=$((STEP + 1))
  log=$LOGS/step-$STEP.log
  echo "\$ $*"
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  show_output "$log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "**timed out** after ${limit}s"
  else
    echo "exit $rc, $((SECONDS - t0))s"
  fi
  echo
  return "$rc"
}

# run_if "<files needed>" <seconds> <command...>: a step that first checks
# that what it runs was built.
run_if() {
  local need=$1 f
  shift
  for f in $need; do
    [ -e "$f" ] || { echo "skipped: $f was not built"; echo; return 200; }
  done
  step "$@"
}

# Runs one section: a heading, the body, and a line for the summary.
section() {
  local name=$1 t0=$SECONDS rc status
  echo "## $name"
  echo
  if [ "$(left)" -lt 10 ]; then
    echo "skipped: the time budget (${BUDGET}s) is spent"
    echo
    RESULTS+=("$name|skipped (time)|0")
    return
  fi
  "section_$name"
  rc=$?
  case $rc in
    0) status=ok ;;
    200) status=skipped ;;
    124|137) status="**timed out**" ;;
    *) status="**FAILED** ($rc)" ;;
  esac
  RESULTS+=("$name|$status|$((SECONDS - t0))")
}

# -----------------------------------------------------------------------------
# Sections, in the order they run. Each returns 0 (ok), 200 (skipped) or the
# failing step's status.
# -----------------------------------------------------------------------------

SECTIONS=(machine build unit_tests backend_cuda kernel_check workload_plain workload_preload
          progs_static progs_shared shim_gpu bench_gpu)

section_machine() {
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  local commit=${GPU_CHECK_COMMIT:-}
  [ -z "$commit" ] && commit=$(git rev-parse --short HEAD 2>/dev/null) &&
    ! git diff --quiet HEAD 2>/dev/null && commit="$commit (with uncommitted changes)"
  echo "- commit: ${commit:-unknown (no .git; set GPU_CHECK_COMMIT)}"
  echo "- host: $(uname -srm), $(nproc) CPUs"
  local nv="no nvcc"
  command -v nvcc >/dev/null && nv=$(nvcc --version | grep -o 'release [0-9.]*')
  echo "- compilers: $(${CC:-gcc} --version | head -1); nvcc $nv"
  echo
  step 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm --format=csv
  step 30 nvidia-smi
  return 0
}

# Criterion: the machine's own, else the one packed by --pack.
use_criterion() {
  if echo '#include <criterion/criterion.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1; then return 0; fi
  if [ -d "$PACK/include/criterion" ]; then
    # Only the libraries this machine lacks, so that no program here runs
    # with the packing machine's copy of a library it has itself.
    local dir=$ROOT/$LOGS/criterion-lib f
    rm -rf "$dir" && mkdir -p "$dir"
    for f in "$ROOT/$PACK"/lib/*; do
      ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") (" || ln -s "$f" "$dir/"
    done
    export CPATH="$ROOT/$PACK/include${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$dir${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "Criterion: from $PACK ($(ls "$dir" | wc -l) libraries this machine lacks)"
    echo
    return 0
  fi
  echo "Criterion is missing: the unit tests cannot be built (run \`bash bench/gpu-check.sh --pack\` first and carry $PACK)"
  return 1
}

# Everything, then the test binaries (attempted even when a program failed to
# build, since they need only the static library).
section_build() {
  local rc=0 bins=() t
  step 240 make -j"$JOBS" || rc=$?
  use_criterion || return 200
  for t in tests/test_*.c; do bins+=("build/tests/$(basename "$t" .c)"); done
  # The fake driver of test_backend_cuda, where the Makefile has its rule.
  make -n build/tests/fake/libcuda.so.1 >/dev/null 2>&1 && bins+=(build/tests/fake/libcuda.so.1)
  step 180 make -k -j"$JOBS" "${bins[@]}" || rc=$?
  return "$rc"
}

# Every test binary, with the tests that can use a real device on it.
section_unit_tests() {
  local t rc=0 any=200
  for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    any=0
    step 120 env CUDALLOC_TEST_BACKEND=cuda "$t" --jobs="$JOBS" --short-filename || rc=$?
  done
  [ "$any" -eq 200 ] && printf 'skipped: no test binary was built\n\n'
  [ "$rc" -ne 0 ] && return "$rc"
  return "$any"
}

section_backend_cuda() {
  run_if build/tests/test_backend_cuda 60 build/tests/test_backend_cuda --verbose \
    --filter='cuda_gpu/*' --short-filename
}
section_kernel_check() { run_if build/kernel-check 90 build/kernel-check; }
section_workload_plain() { run_if build/workload-cuda 90 build/workload-cuda --steps 50; }
section_workload_preload() {
  run_if "build/workload-cuda build/libcudalloc.so" 90 \
    env LD_PRELOAD="$ROOT/build/libcudalloc.so" build/workload-cuda --steps 50
}

# The preload test programs built with nvcc, as most CUDA programs are: with
# nvcc's default static cudart, and with -cudart shared; each runs preloaded.
progs_with_nvcc() {
  local kind=$1 flag=$2 out rc=0 p name
  out=$LOGS/progs-$kind
  [ -e build/libcudalloc.so ] || { printf 'skipped: build/libcudalloc.so was not built\n\n'; return 200; }
  command -v nvcc >/dev/null || { printf 'skipped: no nvcc\n\n'; return 200; }
  compgen -G 'tests/progs/*.c' >/dev/null || { printf 'skipped: no program in tests/progs\n\n'; return 200; }
  mkdir -p "$out"
  for p in tests/progs/*.c; do
    name=$(basename "$p" .c)
    step 60 nvcc -O2 $flag -Ialloc -Itests/progs "$p" -o "$out/$name" -ldl -lpthread || { rc=1; continue; }
    step 60 env LD_PRELOAD="$ROOT/build/libcudalloc.so" "$out/$name" || rc=$?
  done
  return "$rc"
}
section_progs_static() { progs_with_nvcc static ""; }
section_progs_shared() { progs_with_nvcc shared "-cudart shared"; }

# The preload on the GPU with kernels (owned by shim/, issue 4): tests/progs/gpu_saxpy.cu
# built by shim/shim.mk with nvcc's default static cudart and with -cudart shared, each
# run preloaded: its checks must pass and cudalloc's exit summary must show that it
# served the allocations; then the driver-API program against the real driver.
section_shim_gpu() {
  local rc=0 kind prog
  [ -e build/libcudalloc.so ] || { printf 'skipped: build/libcudalloc.so was not built\n\n'; return 200; }
  step 120 make -j"$JOBS" build/progs/gpu_saxpy-static build/progs/gpu_saxpy-shared build/progs/drvapi || return
  for kind in static shared; do
    prog=build/progs/gpu_saxpy-$kind
    step 60 env LD_PRELOAD="$ROOT/build/libcudalloc.so" "$prog" || { rc=1; continue; }
    grep -q '^gpu_saxpy: ok' "$LOGS/step-$STEP.log" && grep -q '^cudalloc: summary (backend cuda' "$LOGS/step-$STEP.log" ||
      { echo "**$prog was not served by cudalloc**"; echo; rc=1; }
  done
  step 60 env LD_PRELOAD="$ROOT/build/libcudalloc.so" build/progs/drvapi || rc=1
  return "$rc"
}

# The benchmarks on the GPU (owned by bench/, docs/benchmarks.md): bench_alloc
# against the CUDA backend (the cached pair makes no memory call, but asks the
# driver for the current device on every allocation), then bench_workload.sh
# --cuda: workload-cuda plain vs preloaded, step time ratio (design target >= 5).
# jemalloc: the machine's, else the copy `make bench-pack` put in the pack.
section_bench_gpu() {
  local rc=0 MAX_LINES=120 jem=() have=1
  if ! echo '#include <jemalloc/jemalloc.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1; then
    if [ -f "$PACK/jemalloc/libjemalloc.a" ]; then
      jem=(JEMALLOC_CFLAGS="-I$ROOT/$PACK/jemalloc/include" JEMALLOC_LIBS="$ROOT/$PACK/jemalloc/libjemalloc.a")
    else
      have=0
      printf 'jemalloc is missing: bench_alloc skipped (run `make bench-pack` after --pack, and carry %s)\n\n' "$PACK"
    fi
  fi
  if [ "$have" -eq 1 ]; then
    { step 120 make -j"$JOBS" ${jem[@]+"${jem[@]}"} build/bench/bench_alloc &&
        step 120 build/bench/bench_alloc --backend cuda --pairs 50000 --rounds 5; } || rc=$?
  fi
  step 60 make -j"$JOBS" build/bench/libstepspy.so || return
  run_if "build/workload-cuda build/libcudalloc.so" 150 bench/bench_workload.sh --cuda || rc=$?
  return "$rc"
}

summary() {
  echo "## Summary"
  echo
  echo "| section | result | seconds |"
  echo "| --- | --- | --- |"
  local r
  for r in "${RESULTS[@]}"; do echo "| ${r//|/ | } |"; done
  echo
  echo "total: ${SECONDS}s of a ${BUDGET}s budget"
}

# -----------------------------------------------------------------------------

main() {
  if [ "${1:-}" = "--pack" ]; then pack; exit 0; fi
  if ! has_gpu && [ -z "${GPU_CHECK_FORCE:-}" ]; then
    echo "no GPU on this machine: nothing to check"
    exit 0
  fi
  local result=${GPU_CHECK_OUT:-docs/results/$(date +%Y-%m-%d)-gpu.md}
  mkdir -p "$(dirname "$result")" "$LOGS" || exit 1
  rm -f "$LOGS"/step-*.log
  {
    echo "# GPU check, $(date +%Y-%m-%d)"
    echo
    echo "Written by \`bench/gpu-check.sh\`; each command's output is cut to $MAX_LINES lines."
    [ -n "${GPU_CHECK_FORCE:-}" ] && ! has_gpu && echo "**Dry run without a GPU (GPU_CHECK_FORCE).**"
    echo
    local s
    for s in "${SECTIONS[@]}"; do section "$s"; done
    summary
  } 2>&1 | tee "$result"
  echo "written to $result"
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp "$result" "$OUT/"
    tar czf "$OUT/gpu-check-logs.tar.gz" "$LOGS" 2>/dev/null
  fi
  # The exit status says whether every section that ran passed.
  ! grep -q '^| .* | \*\*' "$result"
}

main "$@"
