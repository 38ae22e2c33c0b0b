#!/usr/bin/env bash
# CI's check that `make bench`'s summary tells its tables apart (.ci/run):
#
#   bench/summary_check.sh [SUMMARY]   (default build/bench/summary.md)
#
# SUMMARY is what bench/run.sh prints after "== summary": every "|" line of
# the log under the "$ " line of the command that printed it. The thread part
# runs twice, with the default arenas and at arenas:1; before the
# twenty-second session both of its target tables read "two threads / one,
# GPU-like sequence", so the summary gave two figures (1.92 and 0.57) for one
# target. This fails when:
# - two target rows (label | figure | goal) carry the same label;
# - a target row has no command line above it;
# - the check lets through either fault, planted in a summary written here
#   (so that it cannot pass whatever SUMMARY holds).
# It checks no figure: benchmarks print, they do not pass or fail.
set -u
cd "$(dirname "$0")/.." || exit 1
summary=${1:-build/bench/summary.md}
failed=0
fail() { echo "summary_check: FAILED: $*"; failed=1; }

# The target rows' labels ("ok" or "NO COMMAND": whether a command line came
# before the row), one a line.
labels() {
  awk -F' [|] ' '
    /^\$ / { cmd = $0; next }
    /^\| .* \| [^|]* \| (<=|>=) [^|]* \|$/ && NF == 3 {
      label = substr($1, 3)
      print (cmd == "" ? "NO COMMAND" : "ok") "\t" label
    }' "$1"
}

check() {
  local rows
  rows=$(labels "$1")
  [ -n "$rows" ] || { echo "no target rows"; return 1; }
  if grep -q '^NO COMMAND' <<< "$rows"; then
    echo "target rows with no command line above them: $(grep '^NO COMMAND' <<< "$rows" | cut -f2 | head -3 | tr '\n' ';')"
    return 1
  fi
  local dup
  dup=$(cut -f2 <<< "$rows" | sort | uniq -d)
  [ -z "$dup" ] || { echo "the same label on more than one target row: $(tr '\n' ';' <<< "$dup")"; return 1; }
  return 0
}

[ -f "$summary" ] || { echo "summary_check: no $summary (run make bench first)"; exit 1; }
why=$(check "$summary") || fail "$summary: $why"

# The check must refuse the summary as it was before the labels: the same two
# thread tables with the default's labels.
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.nocmd"' EXIT
cat > "$tmp" <<'EOF'
$ build/bench/bench_alloc --part threads
| target | figure | goal |
| --- | --- | --- |
| two threads / one, GPU-like sequence | 1.92 | >= 1.8 |
$ build/bench/bench_alloc --part threads --conf ,arenas:1
| target | figure | goal |
| --- | --- | --- |
| two threads / one, GPU-like sequence | 0.57 | >= 1.8 |
EOF
check "$tmp" >/dev/null && fail "a summary with one label on two target rows passed"
# And one whose labels differ but that has no command lines (the old grep's).
grep -v '^\$ ' "$tmp" | sed 's/sequence | 0.57/sequence, with arenas:1 | 0.57/' > "$tmp.nocmd"
check "$tmp.nocmd" >/dev/null && fail "a summary with no command lines passed"

[ "$failed" = 0 ] && echo "summary_check: $summary: every target row has its own label and a command above it"
exit "$failed"
