#!/usr/bin/env bash
# The GPU check: what only a GPU can answer, most informative first, in one run
# of under 8 minutes on one GPU (docs/gpu.md says what each section checks).
#
#   bash bench/gpu-check.sh [DIR]            on a GPU machine: every section, results in DIR
#                                            (default: $OUT when set, else build/gpu-check/results)
#   bash bench/gpu-check.sh --dry-run [DIR]  anywhere: every step's CPU part (builds, the
#                                            probes against the fake driver, argument handling,
#                                            the result files); GPU commands are listed, not run
#   bash bench/gpu-check.sh --pack           here, before: Criterion and jemalloc into
#                                            build/gpu-pack, for a GPU machine without them
#   bash bench/gpu-check.sh --sections       the section names, in order
#
# Without a GPU (and without --dry-run) it says so and exits 0. GPU_CHECK_FORCE=1 runs
# the GPU commands even where no GPU was detected.
#
# Results (DIR): summary.md (the summary table, then every step's command, exit
# status, time and output cut to GPU_CHECK_MAX_LINES lines), machine.txt, and
# logs.tar.gz (every step's whole log, the benchmark logs, the PyTorch results).
# Copy summary.md to docs/results/<date>-gpu.md to keep it.
#
# Time: the whole run is held to GPU_CHECK_BUDGET seconds (default 450); every
# step runs under `timeout` with its own limit, never past the budget, and a
# section that cannot start with the time it needs is skipped, saying so. Steps
# run one at a time, so that one GPU job runs at a time (Criterion with --jobs=1).
#
# On a lent device machine (the tree travels without .git: name the commit; the pack
# is ignored by git: carry it):
#   bash bench/gpu-check.sh --pack                                     (here, once)
#   run(command="GPU_CHECK_COMMIT=<git rev-parse --short HEAD> bash bench/gpu-check.sh",
#       carry=["build/gpu-pack"], timeout_s=540)
#
# Environment: GPU_CHECK_BUDGET, GPU_CHECK_COMMIT, GPU_CHECK_FORCE, GPU_CHECK_MAX_LINES, JOBS.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUDGET=${GPU_CHECK_BUDGET:-450}
JOBS=${JOBS:-$(nproc)}
MAX_LINES=${GPU_CHECK_MAX_LINES:-40}
PACK=build/gpu-pack
LOGS=build/gpu-check/logs
LIB=$ROOT/build/libcudalloc.so
# Warnings are not fatal there: a newer compiler may warn where this one does not.
MAKE_ARGS=(-k -j"$JOBS" WARN=-Wall)
SECTIONS=(preflight build driver preload fences contexts torch backend_cuda workload progs suites)
# The seconds a section needs to start; it is skipped, saying so, with less left.
declare -A NEED=([preflight]=30 [build]=60 [driver]=30 [preload]=20 [fences]=20 [contexts]=20 [torch]=150
                 [backend_cuda]=30 [workload]=60 [progs]=30 [suites]=40)
DRY=0

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

# Criterion and every library it pulls in, except glibc's own; then jemalloc
# (bench/bench.mk's bench-pack).
pack() {
  rm -rf "$PACK" && mkdir -p "$PACK/include" "$PACK/lib" || exit 1
  local inc=/usr/include/criterion lib dep
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
  make -s bench-pack || exit 1
  echo "packed into $PACK ($(du -sh "$PACK" | cut -f1)): carry it with the run (carry: [\"$PACK\"])"
}

# Criterion: the machine's own, else the pack's (only the libraries this machine
# lacks, so that nothing runs with the packing machine's copy of a library it has).
use_criterion() {
  if echo '#include <criterion/criterion.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1; then
    echo "Criterion: this machine's"
    return 0
  fi
  [ -d "$PACK/include/criterion" ] || {
    echo "Criterion is missing: run \`bash bench/gpu-check.sh --pack\` first and carry $PACK"
    return 1
  }
  local dir=$ROOT/build/gpu-check/criterion-lib f
  rm -rf "$dir" && mkdir -p "$dir"
  for f in "$ROOT/$PACK"/lib/*; do
    ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") (" || ln -s "$f" "$dir/"
  done
  export CPATH="$ROOT/$PACK/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$dir${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "Criterion: from $PACK ($(ls "$dir" | wc -l) libraries this machine lacks)"
}

# jemalloc for bench_alloc: the machine's, else the pack's.
jemalloc_args() {
  if echo '#include <jemalloc/jemalloc.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1; then return 0; fi
  [ -f "$PACK/jemalloc/libjemalloc.a" ] &&
    echo "JEMALLOC_CFLAGS=-I$ROOT/$PACK/jemalloc/include JEMALLOC_LIBS=$ROOT/$PACK/jemalloc/libjemalloc.a"
}

# -----------------------------------------------------------------------------
# Steps and sections
# -----------------------------------------------------------------------------

STEP=0
RESULTS=()       # "section|status|seconds" for the summary table
SECTION_RC=0     # the worst status of the running section's steps
BODY=build/gpu-check/body.md

left() { echo $((BUDGET - SECONDS)); }

# The whole output when short, else its first and last lines.
show_output() {
  local log=$1 n
  n=$(wc -l < "$log")
  echo '```'
  if [ "$n" -le "$MAX_LINES" ]; then
    cat "$log"
  else
    head -n $((MAX_LINES / 4)) "$log"
    echo "... ($((n - MAX_LINES)) lines cut: logs.tar.gz has them, $(basename "$log")) ..."
    tail -n $((MAX_LINES - MAX_LINES / 4)) "$log"
  fi
  echo '```'
}

note() { printf '%s\n\n' "$*" >> "$BODY"; }

# A step's result into the section's status: 0 ok, else the first failure.
record() { [ "$1" -ne 0 ] && [ "$SECTION_RC" -eq 0 ] && SECTION_RC=$1; return "$1"; }

# run_step <limit> <command...>: runs it under timeout, never past the budget;
# writes its command, output and status to the body; returns its status.
run_step() {
  local limit=$1 rc t0=$SECONDS log
  shift
  [ "$limit" -gt $(($(left) - 5)) ] && limit=$(($(left) - 5))
  if [ "$limit" -lt 5 ]; then note "skipped (time budget spent): \`$*\`"; record 124; return; fi
  STEP=$((STEP + 1))
  log=$LOGS/$(printf '%02d' "$STEP")-$CURRENT.log
  printf '$ %s\n' "$*" >> "$BODY"
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  show_output "$log" >> "$BODY"
  case $rc in
    124|137) note "**timed out** after ${limit}s" ;;
    *) note "exit $rc, $((SECONDS - t0))s" ;;
  esac
  printf '  [%3ds] %-12s %s: exit %d\n' "$SECONDS" "$CURRENT" "$(basename "$(program_of "$@")")" "$rc"
  record "$rc"
}

# The program a command line runs: its first word that is not env or NAME=value.
program_of() {
  while [ $# -gt 0 ]; do
    case $1 in
      env|*=*) shift ;;
      -u) shift 2 ;;
      *) echo "$1"; return ;;
    esac
  done
}

# cpu: a step that runs in the dry run too (builds, the CPU part of a check).
cpu() { run_step "$@"; }

# gpu: a step that needs the GPU. The dry run checks that its program was
# built and lists the command.
gpu() {
  local limit=$1 prog
  shift
  if [ "$DRY" -eq 0 ]; then run_step "$limit" "$@"; return; fi
  prog=$(program_of "$@")
  if [ -n "$prog" ] && [ "${prog#*/}" != "$prog" ] && [ ! -x "$prog" ]; then
    note "**not built**: $prog (for \`$*\`)"
    record 1
    return
  fi
  note "(dry run) would run, under ${limit}s: \`$*\`"
}

# The log of the last step that ran.
last_log() { ls "$LOGS/$(printf '%02d' "$STEP")"-*.log 2>/dev/null | head -1; }

# A step whose log must contain a line: fails (1) when it does not.
expect_line() {
  local pattern=$1 log
  log=$(last_log)
  [ "$DRY" -eq 1 ] && return 0
  if [ -z "$log" ] || ! grep -q -- "$pattern" "$log"; then
    note "**FAILED**: the output lacks \`$pattern\`"
    record 1
    return 1
  fi
}

# section <name> <seconds it needs to start>
section() {
  local name=$1 need=$2 t0=$SECONDS status
  CURRENT=$name
  SECTION_RC=0
  printf '## %s\n\n' "$name" >> "$BODY"
  if [ "$(left)" -lt "$need" ]; then
    note "skipped: ${need}s needed, $(left)s left of the ${BUDGET}s budget"
    RESULTS+=("$name|skipped (time)|0")
    return 0
  fi
  "section_$name"
  local rc=$?
  [ "$SECTION_RC" -eq 0 ] && SECTION_RC=$rc
  case $SECTION_RC in
    0) status=ok; [ "$DRY" -eq 1 ] && status="dry run: CPU part ok" ;;
    200) status=skipped ;;
    124|137) status="**timed out**" ;;
    *) status="**FAILED** ($SECTION_RC)" ;;
  esac
  RESULTS+=("$name|$status|$((SECONDS - t0))")
  return 0
}

# -----------------------------------------------------------------------------
# The sections, most informative first
# -----------------------------------------------------------------------------

# 1. Can the backend run here at all? Stops the check at once when not.
section_preflight() {
  if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    note "**FAILED**: no nvcc: the GPU check builds its programs on this machine"
    echo "preflight: FAIL: no nvcc (the CUDA toolkit) on this machine" > "$LOGS/00-preflight.log"
    return 1
  fi
  cpu 120 make "${MAKE_ARGS[@]}" build/gpu/preflight || return
  if [ "$DRY" -eq 1 ]; then
    # Without a driver the preflight must fail with its one line; run it here.
    run_step 30 build/gpu/preflight
    local rc=$?
    SECTION_RC=0
    grep -q '^preflight: FAIL: ' "$(last_log)" && [ "$rc" -eq 2 ] ||
      { note "**FAILED**: without a driver the preflight did not stop with one 'preflight: FAIL:' line"; return 1; }
    note "(dry run) without a driver the preflight stops as it must (exit 2); a real run would stop here"
    return 0
  fi
  run_step 60 build/gpu/preflight
}

# Everything the later sections run, in one parallel build (CPU only).
section_build() {
  local bins=() t
  for t in tests/test_*.c; do bins+=("build/tests/$(basename "$t" .c)"); done
  for t in tests/progs/*.c; do bins+=("build/progs/$(basename "$t" .c)"); done
  local criterion
  criterion=$(use_criterion) || note "**$criterion**: the test binaries cannot be built"
  use_criterion >/dev/null 2>&1   # again in this shell, for its exports
  note "$criterion"
  # shellcheck disable=SC2046
  cpu 300 make "${MAKE_ARGS[@]}" lib cuda build/bench/libstepspy.so $(jemalloc_args) build/bench/bench_alloc \
    "${bins[@]}"
}

# 2. The raw driver's answer to every call alloc/backend/cuda.c makes. The dry
# run runs it against the fake driver (no kernels): its CPU part.
section_driver() {
  if [ "$DRY" -eq 1 ]; then
    cpu 60 env LD_LIBRARY_PATH="$ROOT/build/tests/fake" build/gpu/driver_probe --no-kernels || true
    SECTION_RC=0
    grep -q '^driver_probe: \(ok\|[0-9]* answers differ\)' "$(last_log)" ||
      { note "**FAILED**: the probe did not run to its end against the fake driver"; return 1; }
    note "(dry run) the probe ran against the fake driver (tests/fake/libcuda.c); on a GPU: \`build/gpu/driver_probe\`"
    return 0
  fi
  gpu 90 build/gpu/driver_probe
}

# 3. The preload on nvcc programs: static runtime (nvcc's default) and shared.
section_preload() {
  local kind
  for kind in static shared; do
    gpu 60 env -u CUDALLOC_CONF LD_PRELOAD="$LIB" build/progs/gpu_saxpy-$kind &&
      expect_line '^gpu_saxpy: ok' && expect_line '^cudalloc: summary (backend cuda'
  done
  return 0
}

# 4. Fences on the device, under a cap that forces reuse; the plain run shows
# the scenarios pass on the driver's own allocator.
section_fences() {
  gpu 60 env -u LD_PRELOAD build/gpu/fence_check-static
  gpu 60 env CUDALLOC_CONF=memory_cap_mb:64 LD_PRELOAD="$LIB" build/gpu/fence_check-static --expect-cudalloc
  gpu 60 env CUDALLOC_CONF=memory_cap_mb:64 LD_PRELOAD="$LIB" build/gpu/fence_check-shared --expect-cudalloc
  return 0
}

# 5. Contexts: a cuCtxCreate program plain and preloaded (the thread without a
# context must get the same answer from both), and the driver-API entry points.
section_contexts() {
  local a b
  gpu 30 env -u LD_PRELOAD build/gpu/contexts
  [ "$DRY" -eq 0 ] && a=$(grep '^contexts: no context:' "$(last_log)")
  gpu 30 env -u CUDALLOC_CONF LD_PRELOAD="$LIB" build/gpu/contexts --expect-cudalloc
  if [ "$DRY" -eq 0 ]; then
    b=$(grep '^contexts: no context:' "$(last_log)")
    if [ -z "$a" ] || [ "$a" != "$b" ]; then
      note "**FAILED**: a thread without a context: the driver says \`${a#contexts: no context: }\`, cudalloc \`${b#contexts: no context: }\`"
      record 1
    else
      note "a thread without a context gets the driver's answer from cudalloc too: \`${a#contexts: no context: }\`"
    fi
  fi
  gpu 30 env -u CUDALLOC_CONF LD_PRELOAD="$LIB" build/progs/drvapi
  return 0
}

# 6. PyTorch, when it is installed: four allocators on the same model.
section_torch() {
  local py=bench/gpu/torch_check.py mode files=()
  if [ "$DRY" -eq 1 ]; then
    cpu 30 python3 "$py" plan
    return
  fi
  if ! timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    note "skipped: PyTorch with CUDA is not installed (python3 -c 'import torch' fails, or sees no GPU)"
    return 200
  fi
  for mode in native expandable pluggable preload; do
    # shellcheck disable=SC2046
    gpu 80 env -u LD_PRELOAD $(python3 "$py" env "$mode" --lib "$LIB") \
      python3 "$py" run "$mode" --lib "$LIB" --out "$LOGS/torch-$mode.json"
    [ -f "$LOGS/torch-$mode.json" ] && files+=("$LOGS/torch-$mode.json")
  done
  [ ${#files[@]} -gt 0 ] && cpu 10 python3 "$py" table "${files[@]}"
  return 0
}

# 7. The CUDA backend's own suite, one test at a time.
section_backend_cuda() {
  gpu 90 env CUDALLOC_TEST_BACKEND=cuda build/tests/test_backend_cuda --jobs=1 --verbose --short-filename
}

# 8. The kernels, then the workload plain, preloaded and on the driver's pool
# (bench/bench_workload.sh --cuda: verdicts, reserved/allocated, ratios, calls per step).
section_workload() {
  gpu 60 build/kernel-check
  local MAX_LINES=80 run
  [ "$DRY" -eq 0 ] && rm -f build/bench/workload/*.log   # no verdict of an earlier run
  gpu 200 env BUILD=build bench/bench_workload.sh --cuda || return
  [ "$DRY" -eq 1 ] && return 0
  for run in plain cudalloc cudalloc-classic cudaMallocAsync; do
    grep -q '^verdict: PASS' "build/bench/workload/$run.log" 2>/dev/null ||
      { note "**FAILED**: the $run run's verdict is not PASS (build/bench/workload/$run.log)"; record 1; }
  done
  return 0
}

# 9. The preload test programs (gcc, shared runtime) against the real driver.
section_progs() {
  local p
  for p in reset mem_info ptsz threads bad_inputs; do
    gpu 30 env -u CUDALLOC_CONF LD_PRELOAD="$LIB" build/progs/$p && expect_line "^$p: ok"
  done
  gpu 30 env -u LD_PRELOAD -u CUDALLOC_CONF build/progs/torch_api "$LIB" && expect_line '^torch_api: ok'
  return 0
}

# 10. With what time is left: the core suites on the CUDA backend, then the benchmarks.
section_suites() {
  local t
  for t in tests/test_core_*.c; do
    [ "$(left)" -lt 40 ] && { note "stopped: $(left)s left"; break; }
    gpu 60 env CUDALLOC_TEST_BACKEND=cuda "build/tests/$(basename "$t" .c)" --jobs=1 --short-filename
  done
  [ "$(left)" -lt 40 ] && { note "bench_alloc skipped: $(left)s left"; return 0; }
  local MAX_LINES=80
  gpu 90 build/bench/bench_alloc --backend cuda --pairs 50000 --rounds 5
  return 0
}

# -----------------------------------------------------------------------------
# Results
# -----------------------------------------------------------------------------

machine() {
  local commit=${GPU_CHECK_COMMIT:-} nv="no nvcc" torch="not installed"
  [ -z "$commit" ] && commit=$(git rev-parse --short HEAD 2>/dev/null) &&
    ! git diff --quiet HEAD 2>/dev/null && commit="$commit (with uncommitted changes)"
  command -v nvcc >/dev/null && nv=$(nvcc --version | grep -o 'release [0-9.]*')
  [ "$DRY" -eq 0 ] && torch=$(timeout 60 python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo "not installed")
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "commit: ${commit:-unknown (no .git; set GPU_CHECK_COMMIT)}"
  echo "mode: $([ "$DRY" -eq 1 ] && echo "dry run (no GPU command ran)" || echo "GPU run")"
  echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
  echo "compilers: $(${CC:-gcc} --version | head -1); nvcc $nv"
  echo "python: $(python3 --version 2>&1); torch: $torch"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu:"
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm,mig.mode.current \
      --format=csv 2>&1 | sed 's/^/  /'
  else
    echo "gpu: no nvidia-smi"
  fi
}

write_results() {
  local out=$1 r
  {
    echo "# GPU check, $(date +%Y-%m-%d)"
    echo
    echo "Written by \`bench/gpu-check.sh\`$([ "$DRY" -eq 1 ] && echo ' --dry-run'); docs/gpu.md explains each section."
    [ "$DRY" -eq 1 ] && echo && echo "**Dry run: only the CPU part of each step ran; no GPU command.**"
    echo
    echo '```text'
    cat "$out/machine.txt"
    echo '```'
    echo
    echo "| section | result | seconds |"
    echo "| --- | --- | --- |"
    for r in "${RESULTS[@]}"; do echo "| ${r//|/ | } |"; done
    echo
    echo "total: ${SECONDS}s of a ${BUDGET}s budget; each command's output is cut to $MAX_LINES lines"
    echo "(logs.tar.gz has every log)."
    echo
    cat "$BODY"
  } > "$out/summary.md"
  # The benchmark logs are where bench/bench_workload.sh writes them.
  local extra=()
  [ -d build/bench/workload ] && [ "$DRY" -eq 0 ] && extra+=(build/bench/workload)
  cp "$out/summary.md" "$LOGS/summary.md"
  tar czf "$out/logs.tar.gz" "$LOGS" ${extra[@]+"${extra[@]}"}
}

usage() {
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

main() {
  local out=
  case "${1:-}" in
    --pack) pack; exit 0 ;;
    --sections) echo "${SECTIONS[@]}"; exit 0 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  [ $# -gt 1 ] && { echo "gpu-check: one result folder at most (see --help)" >&2; exit 2; }
  out=${1:-${OUT:-build/gpu-check/results}}
  if [ "$DRY" -eq 0 ] && ! has_gpu && [ -z "${GPU_CHECK_FORCE:-}" ]; then
    echo "gpu-check: no GPU on this machine: nothing to check (--dry-run runs every step's CPU part)"
    exit 0
  fi
  mkdir -p "$out" "$LOGS" || exit 1
  rm -f "$LOGS"/* "$BODY" "$out/summary.md" "$out/machine.txt" "$out/logs.tar.gz"
  machine > "$out/machine.txt" 2>&1
  echo "gpu-check: $([ "$DRY" -eq 1 ] && echo "dry run" || echo "GPU run"), budget ${BUDGET}s, results in $out"
  local s stopped=0
  for s in "${SECTIONS[@]}"; do
    if [ "$stopped" -eq 1 ]; then RESULTS+=("$s|not run (preflight failed)|0"); continue; fi
    section "$s" "${NEED[$s]}"
    if [ "$s" = preflight ] && [ "$DRY" -eq 0 ] && [ "$SECTION_RC" -ne 0 ]; then
      stopped=1
      grep -h '^preflight: FAIL: ' "$LOGS"/*-preflight.log >&2 || echo "preflight: FAIL: see $out/summary.md" >&2
    fi
  done
  write_results "$out"
  echo
  printf '%s\n' "${RESULTS[@]}" | awk -F'|' '{printf "  %-14s %-30s %ss\n", $1, $2, $3}'
  echo "gpu-check: ${SECONDS}s; $out/summary.md, machine.txt, logs.tar.gz"
  # The exit status says whether every section passed (or was skipped).
  ! printf '%s\n' "${RESULTS[@]}" | grep -q -e 'FAILED' -e 'timed out' -e 'not run'
}

main "$@"
