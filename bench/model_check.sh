#!/usr/bin/env bash
# Checks bench/step_model.py against measured step times of real `dptrain train --dist mpi`
# runs on 2 to 4 namespace hosts (tests/multihost/netns_hosts.sh) over shaped links
# (bench/netns_links.sh, the settings bench/link_fit.sh fitted): link speed x bucket size x
# hosts x model (LeNet, ResNet-18 on a small --train-limit subset), plus optional
# configurations with --devices cpu:2 (hierarchical), --grad-compression bf16 and --zero 1,
# each run only when this dptrain accepts the flag (skipped with the reason otherwise).
#
# How each configuration is measured and predicted:
#   measured  mpirun on the first P hosts (one rank each, --cores D, --bind-to none), a few
#             epochs with --trace (docs/PROFILING.md); bench/trace_step_times.py reads every
#             rank's spans: T = rank 0's `iteration` span (the wait for the batch, the step,
#             the divergence guard), the median over the steps after the first epoch; the
#             median of 2 runs (ResNet-18: 1). (The epochs' seconds / steps from --metrics
#             are kept beside it in results.jsonl: they agree to a few %.)
#   C_run     the compute of the same steps: per rank, the iteration minus W, the time after
#             the end of backward covered by communication spans (`allreduce`, `bucket
#             allreduce`, `buffers`, `gather parameters`, ...); the largest over the ranks (the
#             ring waits for the slowest), median over the steps. Measured in the run
#             itself, so the other work on this shared machine weighs on it as on T. It
#             contains what the trace does not mark as communication (the step's small
#             collectives of its loss and counts, the optimizer, the guard).
#   C_ref     before the first run and after the last (the median of them), P x D copies
#             of the same training with no communication at all (`--dist none --devices
#             cpu:1 --cores 1`, each with its share B/(P D) of the global batch, as many
#             steps) at the same time: one device's step time under the same sharing of
#             this machine's 2 cores, the way the issue asks for it (a run without
#             communication). It moves with the other work on the machine between the
#             moments it and the runs are measured.
#   predicted python3 bench/step_model.py predict with C, the model's parameter list, the
#             bucket size, the compression and ZeRO, and the link: "pred" = C_run with
#             the local link model (a tbf link's token bucket, the other links' sweep at
#             the same bytes per host; bench/README.md),
#             "pred_glob" = C_run with the link's one fitted alpha/beta, "pred_ref" = C_ref
#             with the local link model.
# Prints one line per configuration (measured, compute, both predictions, errors) and writes
# OUT/results.jsonl. The machine is shared: the load average is printed with every line.
#
#   bench/model_check.sh [--build DIR] [--links FILE] [--out DIR] [--data DIR] [--only REGEX]
#   (root; the links file from bench/link_fit.sh, default bench_out/link_fit/links.json)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
links_json=$root/bench_out/link_fit/links.json
out=$root/bench_out/model_check
data=/usr/share/datasets/fashion-mnist
only=.
while (($#)); do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --links) links_json=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "model_check: unknown option $1" >&2; exit 2 ;;
  esac
done
dptrain=$build/apps/dptrain
[[ -x $dptrain ]] || { echo "model_check: $dptrain not found (cmake --build $build --target dptrain)" >&2; exit 1; }
[[ -f $links_json ]] || { echo "model_check: $links_json not found: run bench/link_fit.sh first" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

hosts=(h1 h2 h3 h4)
work=$out/netns # emptied by netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
source "$root/bench/netns_links.sh"
export OMP_NUM_THREADS=1

# Per model: global batch, training images (a multiple of the batch), epochs, extra flags.
declare -A batch=([lenet]=256 [resnet18]=16)
declare -A limit=([lenet]=2560 [resnet18]=96)
declare -A epochs=([lenet]=4 [resnet18]=3)
declare -A repeats=([lenet]=2 [resnet18]=1)
declare -A flags=([lenet]="--api concise --model lenet --lr 0.1"
  [resnet18]="--api concise --model resnet18 --init kaiming --lr 0.05")

# MODEL HOSTS LINK BUCKET_MB OPTION (- | devices=2 | bf16 | zero1); OPTION configurations
# are the ones dptrain may refuse. Ordered by link: each link is set up once.
configs=(
  "lenet 2 unshaped 0 -"
  "lenet 2 unshaped 0.25 -"
  "resnet18 2 unshaped 0 -"
  "resnet18 2 unshaped 4 -"
  "lenet 2 tbf-10gbit 0 -"
  "lenet 2 tbf-1gbit 0 -"
  "lenet 2 tbf-1gbit 0.25 -"
  "lenet 3 tbf-1gbit 0 -"
  "lenet 4 tbf-1gbit 0.25 -"
  "resnet18 2 tbf-1gbit 0 -"
  "resnet18 2 tbf-1gbit 4 -"
  "lenet 2 tbf-1gbit 0 devices=2"
  "resnet18 2 tbf-1gbit 4 bf16"
  "lenet 2 tbf-100mbit 0 -"
  "lenet 2 tbf-100mbit 0.25 -"
  "lenet 4 tbf-100mbit 0 -"
  "lenet 2 tbf-100mbit 0 bf16"
  "lenet 2 tbf-100mbit 0 zero1"
  "lenet 2 tbf-100mbit 0.25 devices=2"
  "lenet 2 tbf-100mbit+delay-2ms 0 -"
  "lenet 2 tbf-100mbit+delay-2ms 0.25 -"
  "lenet 3 tbf-100mbit+delay-2ms 0 -"
)

help_text=$("$dptrain" train --help 2>&1 || true)
# step_seconds METRICS STEPS: median over the epochs after the first of seconds / STEPS.
step_seconds() {
  python3 - "$@" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = int(sys.argv[2])
vals = [r["seconds"] / steps for r in rows[1:]] or [rows[0]["seconds"] / steps]
print(f"{statistics.median(vals):.6f}")
PY
}

# compute_ref MODEL K: K concurrent no-communication runs with 1/K of the batch each.
compute_ref() {
  local model=$1 k=$2 b l pids=() i
  b=$((batch[$model] / k))
  l=$((b * limit[$model] / batch[$model]))
  for i in $(seq 1 "$k"); do
    rm -f "$out/ref-$i.jsonl"
    # shellcheck disable=SC2086
    "$dptrain" train --dist none --devices cpu:1 --cores 1 ${flags[$model]} --data "$data" --batch-size "$b" \
      --train-limit "$l" --test-limit 16 --epochs "${epochs[$model]}" --progress off --metrics "$out/ref-$i.jsonl" \
      >"$out/ref-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || { echo "model_check: a compute reference run failed: $out/ref-*.log" >&2; return 1; }; done
  local steps=$((limit[$model] / batch[$model]))
  for i in $(seq 1 "$k"); do step_seconds "$out/ref-$i.jsonl" "$steps"; done | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

current_link=
results=$out/results.jsonl
: >"$results"
intra_alpha_us=$(python3 -c "import json; l = json.load(open('$links_json'))['links']; print(l['memory']['alpha_s'] * 1e6 if 'memory' in l else 5)")
intra_gbyte_s=$(python3 -c "import json; l = json.load(open('$links_json'))['links']; print(1 / l['memory']['beta_s_per_byte'] / 1e9 if 'memory' in l else 5)")
echo "model_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(getconf _NPROCESSORS_ONLN) cores" \
  "(shared machine); links from $links_json; step times in ms"
printf '%-42s %8s %8s %8s %7s %8s %7s %8s %8s %7s %5s\n' "configuration" "measured" "C_run" "pred" "error" \
  "pred_glob" "error" "C_ref" "pred_ref" "error" "load"
n=0
for c in "${configs[@]}"; do
  read -r model P link bucket option <<<"$c"
  D=1 comp=none zero=0 extra=()
  case $option in
    devices=*) D=${option#devices=} ;;
    bf16) comp=bf16; extra=(--grad-compression bf16) ;;
    zero1) zero=1; extra=(--zero 1) ;;
  esac
  name="$model P=$P"
  ((D == 1)) || name+=" D=$D"
  name+=" $link bucket=${bucket}MB"
  [[ $comp == none ]] || name+=" $comp"
  ((zero == 0)) || name+=" zero1"
  [[ $name =~ $only ]] || continue
  if [[ $comp == bf16 && $help_text != *--grad-compression* ]]; then
    echo "$name: skipped: this dptrain does not accept --grad-compression (not in dptrain train --help)"
    continue
  fi
  if ((zero)) && [[ $help_text != *--zero* ]]; then
    echo "$name: skipped: this dptrain does not accept --zero (not in dptrain train --help)"
    continue
  fi
  if [[ $link != "$current_link" ]]; then
    [[ -z $current_link ]] || unshape
    shape "$link"
    current_link=$link
  fi
  n=$((n + 1))
  printf '%s slots=1\n' "${hosts[@]:0:P}" >"$work/hostfile"
  # A compute reference, the runs (repeats[model], each traced), another reference.
  refs=("$(compute_ref "$model" $((P * D)))") runs=() cruns=() eruns=() failed=
  steps=$((limit[$model] / batch[$model]))
  for r in $(seq 1 "${repeats[$model]}"); do
    metrics=$out/run-$n-$r.jsonl
    rm -f "$metrics"
    status=0
    # shellcheck disable=SC2086
    in_ns sw unshare --uts sh -c 'hostname switch && exec "$@"' sh \
      timeout --kill-after=10 300 mpirun --hostfile "$work/hostfile" -np "$P" --bind-to none "${mpirun_netns_args[@]}" \
      "$dptrain" train --dist mpi --devices "cpu:$D" --cores "$D" ${flags[$model]} --data "$data" \
      --batch-size "${batch[$model]}" --train-limit "${limit[$model]}" --test-limit 16 --epochs "${epochs[$model]}" \
      --bucket-mb "$bucket" "${extra[@]}" --progress off --metrics "$metrics" --trace "$out/run-$n-$r.trace.json" \
      >"$out/run-$n-$r.log" 2>&1 || status=$?
    if ((status != 0)); then
      reason=$(grep -m1 'dptrain: error' "$out/run-$n-$r.log" || tail -1 "$out/run-$n-$r.log")
      if [[ $option != - ]]; then
        failed="$name: skipped: dptrain refused or failed (status $status): $reason"
      else
        failed="$name: FAILED (status $status): $reason ($out/run-$n-$r.log)"
      fi
      break
    fi
    read -r t c _ < <(python3 "$root/bench/trace_step_times.py" "$out/run-$n-$r.trace.json" --skip "$steps")
    runs+=("$t")
    cruns+=("$c")
    eruns+=("$(step_seconds "$metrics" "$steps")")
  done
  if [[ -n $failed ]]; then
    echo "$failed"
    continue
  fi
  refs+=("$(compute_ref "$model" $((P * D)))")
  median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  measured=$(median "${runs[@]}")
  measured_epochs=$(median "${eruns[@]}")
  C=$(median "${cruns[@]}")
  Cref=$(median "${refs[@]}")
  # predict LINK_MODEL COMPUTE: the model's step seconds (global: the link's one alpha/beta;
  # local: alpha/beta refitted on the sweep sizes near each message).
  predict() {
    python3 "$root/bench/step_model.py" predict --links "$links_json" --link "$link" --processes "$P" \
      --devices "$D" --compute-s "$2" --model "$model" --bucket-mb "$bucket" --compression "$comp" --zero "$zero" \
      --intra-alpha-us "$intra_alpha_us" --intra-gbyte-s "$intra_gbyte_s" --link-model "$1" --json |
      python3 -c "import json, sys; print(json.load(sys.stdin)['step_s'])"
  }
  pl=$(predict local "$C")
  pg=$(predict global "$C")
  pr=$(predict local "$Cref")
  load=$(cut -d' ' -f1 /proc/loadavg)
  error() { awk -v m="$measured" -v p="$1" 'BEGIN { printf "%.1f", 100 * (p - m) / m }'; }
  el=$(error "$pl") eg=$(error "$pg") er=$(error "$pr")
  ms() { awk -v x="$1" 'BEGIN { printf "%.1f", 1e3 * x }'; }
  printf '%-42s %8s %8s %8s %6s%% %8s %6s%% %8s %8s %6s%% %5s\n' "$name" "$(ms "$measured")" "$(ms "$C")" \
    "$(ms "$pl")" "$el" "$(ms "$pg")" "$eg" "$(ms "$Cref")" "$(ms "$pr")" "$er" "$load"
  printf '{"config":"%s","model":"%s","processes":%d,"devices":%d,"link":"%s","bucket_mb":%s,"compression":"%s","zero":%d,"measured_s":%s,"runs_s":[%s],"measured_epochs_s":%s,"compute_run_s":%s,"compute_ref_s":%s,"refs_s":[%s],"predicted_local_s":%s,"error_local_pct":%s,"predicted_global_s":%s,"error_global_pct":%s,"predicted_ref_s":%s,"error_ref_pct":%s,"load":%s}\n' \
    "$name" "$model" "$P" "$D" "$link" "$bucket" "$comp" "$zero" "$measured" "$(IFS=,; echo "${runs[*]}")" \
    "$measured_epochs" "$C" "$Cref" "$(IFS=,; echo "${refs[*]}")" "$pl" "$el" "$pg" "$eg" "$pr" "$er" "$load" >>"$results"
done
[[ -z $current_link ]] || unshape
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for kind, what in (("local", "C from the run, local link model"), ("global", "C from the run, the link's one alpha/beta"),
                   ("ref", "C from the separate no-communication runs, local link model")):
    errs = [abs(r[f"error_{kind}_pct"]) for r in rows]
    if errs:
        worst = errs.index(max(errs))
        print(f"model_check: {what}: {len(rows)} configurations, {sum(e <= 15 for e in errs)} within 15%, "
              f"mean |error| {sum(errs) / len(errs):.1f}%, worst {max(errs):.1f}% ({rows[worst]['config']})")
PY
echo "model_check: results in $results"
