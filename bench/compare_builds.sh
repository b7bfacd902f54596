#!/usr/bin/env bash
# Two dptrain builds on the same LeNet epochs, alternating run by run, so that a machine
# whose speed drifts over minutes (this project's VM drifts by 20%) slows both sides alike.
# Prints every run's epochs and each side's mean sec/epoch and evaluation, and the ratio.
#
#   bench/compare_builds.sh BASE_DPTRAIN NEW_DPTRAIN [--pairs 4] [--epochs 2] [dptrain train flags...]
#
# e.g. to measure a change against the commit before it:
#   git worktree add /tmp/base HEAD~1 && cmake -S /tmp/base -B /tmp/base/build -DDPT_CUDA=OFF &&
#   cmake --build /tmp/base/build --target dptrain -j2 &&
#   bench/compare_builds.sh /tmp/base/build/apps/dptrain build/apps/dptrain --devices cpu:2
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  usage
  exit 2
fi
base=$1 new=$2
shift 2
pairs=4 epochs=2 flags=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --pairs) pairs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) flags+=("$1"); shift ;;
  esac
done
for bin in "$base" "$new"; do
  [[ -x $bin ]] || { echo "compare_builds: $bin is not an executable dptrain" >&2; exit 2; }
done

# One run: "sec sec ... | eval eval ...", each epoch's from the --metrics file (the epoch
# lines round to 0.1 s).
metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
run() {
  rm -f "$metrics"
  if ! "$1" train --epochs "$epochs" "${flags[@]}" --metrics "$metrics" >/dev/null 2>&1; then
    echo "compare_builds: $1 train --epochs $epochs ${flags[*]} failed" >&2
    exit 1
  fi
  awk '{ match($0, /"seconds":[0-9.eE+-]+/); t = t " " substr($0, RSTART + 10, RLENGTH - 10)
         match($0, /"eval_seconds":[0-9.eE+-]+/); e = e " " substr($0, RSTART + 15, RLENGTH - 15) }
       END { print t " |" e }' "$metrics"
}

echo "== base: $base"
echo "== new:  $new"
echo "== dptrain train --epochs $epochs ${flags[*]}, $pairs pairs, alternating (base first, then new)"
results=()
for ((p = 1; p <= pairs; p++)); do
  for side in base new; do
    bin=$base
    [[ $side == new ]] && bin=$new
    line=$(run "$bin")
    echo "pair $p $side: sec/epoch${line%%|*}  eval${line#*|}"
    results+=("$side $line")
  done
done
printf '%s\n' "${results[@]}" | awk '
  { side = $1; in_eval = 0
    for (i = 2; i <= NF; i++) { if ($i == "|") { in_eval = 1; continue }
      if (in_eval) { e[side] += $i; ne[side]++ } else { t[side] += $i; nt[side]++ } } }
  END {
    if (nt["base"] == 0 || nt["new"] == 0) { print "compare_builds: no epoch lines (see the runs above)"; exit 1 }
    tb = t["base"] / nt["base"]; tn = t["new"] / nt["new"]; eb = e["base"] / ne["base"]; en = e["new"] / ne["new"]
    printf "base: %.3f sec/epoch, eval %.3f s (mean of %d epochs)\n", tb, eb, nt["base"]
    printf "new:  %.3f sec/epoch, eval %.3f s (mean of %d epochs)\n", tn, en, nt["new"]
    printf "ratio (base / new): training %.2fx, evaluation %.2fx (above 1: new is faster)\n", tb / tn, eb / en }'
