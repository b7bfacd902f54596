#!/usr/bin/env bash
# ResNet-18 on a subset of Fashion-MNIST on the CPU: dptrain (--model resnet18 --api concise)
# against the same network in PyTorch (bench/pytorch_resnet18.py --device cpu, 2 threads),
# in one invocation, on the same images, recipe and epochs. The first epoch warms up (oneDNN
# compiles its kernels, PyTorch's allocator grows); the last epoch is the timed one. Prints
# each side's epochs, the timed epoch's training and evaluation seconds, and
# `ratio (pytorch / dptrain): training X.XXx, evaluation Y.YYx` (>1: dptrain is faster).
# The reorders per step are build/bench/resnet18_step's (bench/README.md).
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--build DIR] [--train-limit 2048] [--test-limit 1024] [--batch-size 128]
          [--epochs 2] [--devices cpu:1] [--data DIR] [extra dptrain train flags...]
  --build DIR        CMake build directory holding apps/dptrain (default: build)
  --train-limit N    train on the first N training images on both sides (default: 2048)
  --test-limit N     evaluate on the first N test images (default: 1024)
  --batch-size N     (default: 128); lr 0.05, Kaiming init, plain SGD, mean loss on both sides
  --epochs N         (default: 2); the last one is reported
  --devices LIST     dptrain devices (default: cpu:1, one device on all cores)
environment: PYTHON=/path/to/python3 picks the interpreter that has torch (default /usr/bin/python3)
USAGE
}
die() { echo "resnet18_epoch.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=build train_limit=2048 test_limit=1024 batch=128 epochs=2 devices=cpu:1 data= lr=0.05 threads=2
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --test-limit) test_limit="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --devices) devices="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || die "--epochs must be a positive integer, got '$epochs'"
dptrain="$build/apps/dptrain"
[[ -x "$dptrain" ]] || die "no dptrain binary at '$dptrain'; build it first (scripts/build.sh) or pass --build DIR"
data_args=()
[[ -n "$data" ]] && data_args=(--data "$data")

cpu_ticks() { awk '/^cpu / { print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6 }' /proc/stat; }
busy_cores() {
  local t0 i0 t1 i1
  read -r t0 i0 < <(cpu_ticks); sleep 1; read -r t1 i1 < <(cpu_ticks)
  awk -v dt=$((t1 - t0)) -v di=$((i1 - i0)) -v n="$(nproc)" 'BEGIN { if (dt > 0) printf "%.1f", n * (1 - di / dt); else print "?" }'
}
busy_before="$(busy_cores 2>/dev/null || echo '?')"

log="$(mktemp)" metrics="$(mktemp)"
trap 'rm -f "$log" "$metrics"' EXIT

# --- dptrain -------------------------------------------------------------------------
rm -f "$metrics"
cmd=("$dptrain" train --model resnet18 --api concise --init kaiming --lr "$lr" --batch-size "$batch"
     --epochs "$epochs" --train-limit "$train_limit" --test-limit "$test_limit" --devices "$devices"
     --metrics "$metrics" "${data_args[@]}" "${extra[@]}")
echo "== ${cmd[*]}" >&2
"${cmd[@]}" 2>&1 | tee "$log" >&2 || die "dptrain failed (output above)"
field_of() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" "$metrics"; }
dpt_secs="$(field_of seconds | tr '\n' ' ')"
dpt_evals="$(field_of eval_seconds | tr '\n' ' ')"
dpt_sec="$(field_of seconds | tail -n 1)"
dpt_eval="$(field_of eval_seconds | tail -n 1)"
dpt_acc="$(field_of test_acc | tail -n 1)"
[[ -n "$dpt_sec" ]] || die "dptrain wrote no epoch to its --metrics file"

# --- PyTorch -------------------------------------------------------------------------
python="${PYTHON:-/usr/bin/python3}"
pt_sec='' pt_eval='' pt_acc='' pt_secs='' pt_evals='' torch_version='not installed'
if "$python" -c 'import torch' 2>/dev/null; then
  torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
  cmd=("$python" "$here/pytorch_resnet18.py" --device cpu --threads "$threads" --epochs "$epochs"
       --batch-size "$batch" --lr "$lr" --train-limit "$train_limit" --test-limit "$test_limit" "${data_args[@]}")
  echo "== ${cmd[*]}" >&2
  "${cmd[@]}" 2>&1 | tee "$log" >&2 || die "pytorch_resnet18.py failed (output above)"
  pt_field() { sed -n "s/^$1: //p" "$log" | tail -n 1; }
  pt_secs="$(pt_field 'epoch secs')"
  pt_evals="$(pt_field 'eval secs')"
  pt_sec="$(awk '{ print $NF }' <<<"$pt_secs")"
  pt_eval="$(awk '{ print $NF }' <<<"$pt_evals")"
  pt_acc="$(pt_field 'test acc')"
else
  echo "resnet18_epoch.sh: no torch under $python; reporting dptrain only" >&2
fi

# --- report --------------------------------------------------------------------------
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo
echo "ResNet-18, Fashion-MNIST first $train_limit train / $test_limit test images, batch $batch, lr $lr," \
     "Kaiming, plain SGD; $epochs epochs, the last one timed (training loop only; evaluation apart)"
echo "  cpu                    ${cpu:-unknown}, $(nproc) cores; busy before run: $busy_before cores"
echo "  torch                  $torch_version, $threads threads"
printf '  %-22s %12s %12s %10s   %s\n' "" "sec (last)" "eval sec" "test acc" "all epochs (train | eval)"
printf '  %-22s %12s %12s %10s   %s\n' "dptrain [$devices]" "$dpt_sec" "$dpt_eval" "$dpt_acc" "$dpt_secs| $dpt_evals"
ratio_of() { awk -v p="$1" -v d="$2" 'BEGIN { if (p > 0 && d > 0) printf "%.2f", p / d; else print "n/a" }'; }
if [[ -n "$pt_sec" ]]; then
  printf '  %-22s %12s %12s %10s   %s\n' "pytorch [$threads threads]" "$pt_sec" "$pt_eval" "$pt_acc" "$pt_secs | $pt_evals"
  echo "ratio (pytorch / dptrain): training $(ratio_of "$pt_sec" "$dpt_sec")x, evaluation $(ratio_of "$pt_eval" "$dpt_eval")x"
else
  echo "ratio (pytorch / dptrain): n/a (PyTorch not available)"
fi
