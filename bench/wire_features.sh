#!/usr/bin/env bash
# What bf16 gradient compression, two-level allreduce and ZeRO-1 buy across hosts, in one
# invocation on two network-namespace hosts (tests/multihost/netns_hosts.sh), each feature
# against its plain counterpart, runs alternating so that a busy machine slows both alike:
#   compression  LeNet (the default job), 2 hosts x 1 process, --grad-compression bf16 against
#                none: seconds per epoch (the epochs after the first) on a tc tbf link of
#                --rate (default 100mbit) and unshaped, and test accuracy after --accuracy-epochs
#                (default 10) unshaped, the same seed for both;
#   hierarchy    2 hosts x 2 devices (mpirun -np 2 --devices cpu:2) against 4 flat ranks
#                (-np 4, two per host, --devices cpu:1; and once with the 4 ranks alternating
#                between the hosts): the bytes that crossed between the hosts (each host's
#                eth0 counters) and seconds per epoch on the --rate link;
#   zero         --api concise --momentum 0.9 with --zero 1 against --zero 0, 2 hosts x 1
#                process, unshaped: seconds per epoch and the optimizer state per process.
# Prints each pair, its ratio and the run's figures; needs root, ip, tc, mpirun (else exits 77).
#   bench/wire_features.sh [--build DIR] [--data DIR] [--rate 100mbit] [--rounds 2]
#                          [--train-limit 12800] [--accuracy-epochs 10] [--only compression|hierarchy|zero]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build data=/usr/share/datasets/fashion-mnist rate=100mbit rounds=2 limit=12800 accuracy_epochs=10 only=
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --accuracy-epochs) accuracy_epochs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "wire_features: unknown option $1" >&2; exit 2 ;;
  esac
done
dptrain=$build/apps/dptrain
[[ -x $dptrain ]] || { echo "wire_features: $dptrain not found; build it: cmake --build $build --target dptrain" >&2; exit 1; }
hosts=(h1 h2)
work=$(mktemp -d /tmp/wire-features.XXXXXX)
out=$work
source "$root/tests/multihost/netns_hosts.sh"
source "$root/bench/netns_links.sh"
printf '%s slots=2\n' "${hosts[@]}" >"$work/hosts"
echo "wire_features: $(nproc) cores, load average before: $(cut -d' ' -f1 /proc/loadavg); dptrain $("$dptrain" --version 2>/dev/null | head -1)"

# Bytes received on both hosts' eth0 so far.
host_bytes() {
  local h total=0
  for h in "${hosts[@]}"; do total=$((total + $(in_ns "$h" cat /sys/class/net/eth0/statistics/rx_bytes))); done
  echo "$total"
}
# run NAME NP FLAGS...: one job on the hosts; its log and metrics under $work/NAME.*;
# prints "SECONDS_PER_EPOCH TEST_ACC HOST_BYTES" (seconds: mean of the epochs after the first).
run() {
  local name=$1 np=$2
  shift 2
  local before map=slot
  # One process per host spreads (by node); more fill each host's slots in turn (ranks 0
  # and 1 on h1), as a scheduler packs them, unless map_by says otherwise.
  ((np == ${#hosts[@]})) && map=node
  map=${map_by:-$map}
  before=$(host_bytes)
  # mpirun runs in the switch's namespace, as on a login node (netns_hosts.sh).
  if ! in_ns sw unshare --uts sh -c 'hostname switch && exec "$@"' sh \
    timeout --kill-after=10 900 mpirun --hostfile "$work/hosts" -np "$np" --map-by "$map" --bind-to none "${mpirun_netns_args[@]}" \
    "$dptrain" train --dist mpi --data "$data" --progress off --collective-timeout 120 --metrics "$work/$name.jsonl" \
    "$@" >"$work/$name.log" 2>&1; then
    echo "wire_features: the run $name failed:" >&2
    tail -20 "$work/$name.log" >&2
    exit 1
  fi
  local after
  after=$(host_bytes)
  python3 - "$work/$name.jsonl" "$((after - before))" <<'PY'
import json, sys
epochs = [json.loads(line) for line in open(sys.argv[1])]
later = epochs[1:] or epochs
print(f"{sum(e['seconds'] for e in later) / len(later):.3f} {epochs[-1]['test_acc']:.4f} {sys.argv[2]}")
PY
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mean() { awk '{ s += $1 } END { printf "%.3f", s / NR }'; }

# Alternates two configurations `rounds` times; prints their mean seconds per epoch and the
# last run's accuracy and host bytes of each: "A_SEC A_ACC A_BYTES B_SEC B_ACC B_BYTES".
pair() {
  local label=$1 np_a=$2 flags_a=$3 np_b=$4 flags_b=$5
  shift 5
  local r a_sec=() b_sec=() a b
  for ((r = 0; r < rounds; ++r)); do
    # shellcheck disable=SC2086
    a=$(run "$label-a$r" "$np_a" $flags_a "$@") || exit 1
    # shellcheck disable=SC2086
    b=$(run "$label-b$r" "$np_b" $flags_b "$@") || exit 1
    a_sec+=("${a%% *}") b_sec+=("${b%% *}")
  done
  echo "$(printf '%s\n' "${a_sec[@]}" | mean) $(echo "$a" | cut -d' ' -f2-) $(printf '%s\n' "${b_sec[@]}" | mean) $(echo "$b" | cut -d' ' -f2-)"
}

short=(--train-limit "$limit" --test-limit 2000 --epochs 3 --seed 1)
if [[ -z $only || $only == compression ]]; then
  echo
  echo "== bf16 gradient compression: LeNet (the default job, batch 256), 2 hosts x 1 process =="
  for link in "tbf-$rate" unshaped; do
    shape "$link"
    figures=$(pair "compression-$link" 2 "--devices cpu:1 --cores 1" 2 \
      "--devices cpu:1 --cores 1 --grad-compression bf16" "${short[@]}")
    read -r f_sec _ f_bytes b_sec _ b_bytes <<<"$figures"
    unshape
    echo "$link: fp32 $f_sec s/epoch, bf16 $b_sec s/epoch; speedup fp32/bf16 $(ratio "$f_sec" "$b_sec")x;" \
      "bytes between the hosts (last run) fp32 $f_bytes, bf16 $b_bytes, ratio $(ratio "$b_bytes" "$f_bytes")"
  done
  figures=$(rounds=1 pair accuracy 2 "--devices cpu:1 --cores 1" 2 \
    "--devices cpu:1 --cores 1 --grad-compression bf16" --epochs "$accuracy_epochs" --seed 1)
  read -r _ f_acc _ _ b_acc _ <<<"$figures"
  echo "test accuracy after $accuracy_epochs epochs (full data, unshaped, seed 1): fp32 $f_acc, bf16 $b_acc," \
    "difference $(awk -v a="$f_acc" -v b="$b_acc" 'BEGIN { printf "%+.4f", b - a }')"
fi
if [[ -z $only || $only == hierarchy ]]; then
  echo
  echo "== two levels: 2 hosts x 2 devices (-np 2 --devices cpu:2) against 4 flat ranks (-np 4, two per host) =="
  shape "tbf-$rate"
  figures=$(pair hierarchy 2 "--devices cpu:2 --cores 1" 4 "--devices cpu:1 --cores 1" "${short[@]}")
  read -r h_sec _ h_bytes f_sec _ f_bytes <<<"$figures"
  # The same 4 flat ranks alternating between the hosts (rank 0 and 2 on h1): every edge of
  # the ring crosses between them.
  read -r a_sec _ a_bytes <<<"$(map_by=node run hierarchy-alternating 4 --devices cpu:1 --cores 1 "${short[@]}")"
  unshape
  echo "tbf-$rate: two levels $h_sec s/epoch, flat $f_sec s/epoch, speedup flat/two-level $(ratio "$f_sec" "$h_sec")x;" \
    "bytes between the hosts (last run) two levels $h_bytes, flat $f_bytes, ratio $(ratio "$h_bytes" "$f_bytes")"
  echo "tbf-$rate: flat ranks alternating between the hosts (1 run): $a_sec s/epoch, bytes between the hosts" \
    "$a_bytes; two levels against it: speedup $(ratio "$a_sec" "$h_sec")x, bytes ratio $(ratio "$h_bytes" "$a_bytes")"
fi
if [[ -z $only || $only == zero ]]; then
  echo
  echo "== ZeRO-1: --api concise --momentum 0.9, 2 hosts x 1 process, unshaped =="
  figures=$(pair zero 2 "--devices cpu:1 --cores 1 --zero 1" 2 "--devices cpu:1 --cores 1" \
    "${short[@]}" --api concise --momentum 0.9)
  read -r z_sec _ _ u_sec _ _ <<<"$figures"
  echo "zero 1 $z_sec s/epoch, zero 0 $u_sec s/epoch, ratio zero/plain $(ratio "$z_sec" "$u_sec");" \
    "$(grep -h "^zero 1:" "$work"/zero-a0.log | head -1)"
fi
