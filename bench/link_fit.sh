#!/usr/bin/env bash
# Fits latency alpha and inverse bandwidth beta of shaped links between namespace hosts (the
# multi-host harness, tests/multihost/netns_hosts.sh): for every link setting, runs
# bench/link_sweep (dptrain's own MPI ring allreduce, message sizes 1 KB .. 64 MB by
# --factor, each after --gap-ms of idle link, as a training step sends after computing) on
# 2 hosts under mpirun and fits t(n) = 2(N-1)(alpha + n beta / N) by least squares
# (bench/step_model.py fit; weights 1/t^2, so every size counts by its relative error).
# Prints the table (link, alpha in us, beta as effective Gbit/s, residuals), the tbf links'
# token buckets, and writes OUT/links.json for bench/step_model.py and bench/model_check.sh.
#
# Link settings (each host's eth0 egress shaped, as a NIC of that rate would be):
#   memory         not between hosts: 2 ranks on this machine over shared memory (Open MPI's
#                  vader), the stand-in for the copies between devices inside one process
#   unshaped       the veth pairs and the bridge as they are (CPU-bound copies)
#   tbf-10gbit, tbf-1gbit, tbf-100mbit    tc tbf rate limits
#   tbf-100mbit+delay-2ms, relay+delay-1ms  netem_relay.py (this kernel has no sch_netem):
#                  every packet between hosts goes through a TUN device and a user-space
#                  relay that holds it back 2 ms / 1 ms (one way); the relay itself is a
#                  bandwidth limit too (a Python loop), which the fit measures
#
#   bench/link_fit.sh [--build DIR] [--out DIR] [--links "unshaped tbf-1gbit ..."] [--reps 7] [--budget 4]
#                     [--gap-ms 20] [--factor 2]
#   (root; needs ip, tc, unshare, mpirun; exit 77 = skipped, as the multihost tests)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/bench_out/link_fit
links="memory unshaped tbf-10gbit tbf-1gbit tbf-100mbit tbf-100mbit+delay-2ms relay+delay-1ms"
reps=7 budget=4 order=--descending gap_ms=20 factor=2
while (($#)); do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --gap-ms) gap_ms=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    *) echo "link_fit: unknown option $1" >&2; exit 2 ;;
  esac
done
sweep=$build/bench/link_sweep
[[ -x $sweep ]] || { echo "link_fit: $sweep not found; build it (cmake --build $build --target link_sweep; needs MPI)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

hosts=(h1 h2)
work=$out/netns # emptied by netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"

echo "link_fit: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" \
  "(a shared machine: the figures move with the load)"

source "$root/bench/netns_links.sh"

printf '%s slots=1\n' "${hosts[@]}" >"$work/hostfile"
specs=()
for setting in $links; do
  t0=$(date +%s.%N)
  status=0
  if [[ $setting == memory ]]; then
    # Two ranks on this machine over shared memory (vader): the stand-in for the copies between
    # devices inside one process (--devices cpu:D under --dist mpi).
    timeout --kill-after=10 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 \
      "$sweep" $order --factor "$factor" --gap-ms "$gap_ms" --reps "$reps" --budget "$budget" --json "$out/sweep-$setting.jsonl" \
      >"$out/sweep-$setting.log" 2>&1 || status=$?
  else
    shape "$setting"
    # --bind-to none: each host's mpirun daemon would otherwise bind its one rank to core 0,
    # and every "host" shares this machine's cores.
    in_ns sw unshare --uts sh -c 'hostname switch && exec "$@"' sh \
      timeout --kill-after=10 300 mpirun --hostfile "$work/hostfile" -np "${#hosts[@]}" --bind-to none \
      "${mpirun_netns_args[@]}" "$sweep" $order --factor "$factor" --gap-ms "$gap_ms" --reps "$reps" --budget "$budget" --json "$out/sweep-$setting.jsonl" \
      >"$out/sweep-$setting.log" 2>&1 || status=$?
    unshape
  fi
  if ((status != 0)); then
    echo "link_fit: $setting: link_sweep failed (status $status); see $out/sweep-$setting.log" >&2
    tail -5 "$out/sweep-$setting.log" >&2
    continue
  fi
  echo "link_fit: $setting: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s," \
    "load average $(cut -d' ' -f1 /proc/loadavg)"
  grep -v '^JSON ' "$out/sweep-$setting.log" | grep -v '^link_sweep:' | sed 's/^/    /'
  specs+=("$setting=$out/sweep-$setting.jsonl")
done
((${#specs[@]})) || { echo "link_fit: no sweep succeeded" >&2; exit 1; }
echo
python3 "$root/bench/step_model.py" fit --out "$out/links.json" "${specs[@]}"
echo "link_fit: fits written to $out/links.json"
