#!/usr/bin/env bash
# One LeNet training epoch (Fashion-MNIST, batch 256, lr 0.2): dptrain vs. the same
# from-scratch LeNet in PyTorch (bench/pytorch_lenet.py, 2 threads), in one invocation.
# Prints each sec/epoch, each test-set evaluation time, each test accuracy and the ratios
# pytorch / dptrain for training and for evaluation (>1: dptrain is faster). See
# bench/README.md.
set -euo pipefail

usage() {
  cat <<EOF
usage: $0 [--build DIR] [--epochs N] [--devices LIST] [--precision fp32|bf16] [--data DIR]
  --build DIR     CMake build directory holding apps/dptrain (default: build)
  --epochs N      training epochs for both sides (default: 1)
  --devices LIST  dptrain devices, e.g. cpu:1 (one device) or cpu:2 (two) (default: cpu:1)
  --precision P   dptrain's convolution arithmetic, fp32 or bf16 (default: fp32; PyTorch
                  runs fp32 either way)
  --data DIR      Fashion-MNIST IDX .gz directory, passed to both sides
                  (default: each side's own default, /usr/share/datasets/fashion-mnist)
environment: PYTHON=/path/to/python3 picks the interpreter that has torch
  (default: /usr/bin/python3, then python3 on PATH)
EOF
}

die() { echo "lenet_epoch.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=build
epochs=1
devices=cpu:1
precision=fp32
data=
batch=256
lr=0.2
threads=2

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build)   [[ $# -ge 2 ]] || die "--build needs a directory"; build="$2"; shift 2 ;;
    --epochs)  [[ $# -ge 2 ]] || die "--epochs needs a number"; epochs="$2"; shift 2 ;;
    --devices) [[ $# -ge 2 ]] || die "--devices needs a list"; devices="$2"; shift 2 ;;
    --precision) [[ $# -ge 2 ]] || die "--precision needs fp32 or bf16"; precision="$2"; shift 2 ;;
    --data)    [[ $# -ge 2 ]] || die "--data needs a directory"; data="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || die "--epochs must be a positive integer, got '$epochs'"
[[ -z "$data" || -d "$data" ]] || die "--data '$data' is not a directory"

dptrain="$build/apps/dptrain"
[[ -x "$dptrain" ]] || die "no dptrain binary at '$dptrain'; build it first
  (cmake -S . -B $build && cmake --build $build --target dptrain) or pass --build DIR"

data_args=()
[[ -n "$data" ]] && data_args=(--data "$data")

# Other processes on the cores skew both figures; sample how many cores were busy over
# one second before starting (the load average lags, and would count our own past runs).
cpu_ticks() { awk '/^cpu / { print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6 }' /proc/stat; }
busy_cores() {
  local t0 i0 t1 i1
  read -r t0 i0 < <(cpu_ticks) || { echo '?'; return; }
  sleep 1
  read -r t1 i1 < <(cpu_ticks) || { echo '?'; return; }
  awk -v dt=$((t1 - t0)) -v di=$((i1 - i0)) -v n="$(nproc)" \
    'BEGIN { if (dt > 0) printf "%.1f", n * (1 - di / dt); else print "?" }'
}
busy_before="$(busy_cores 2>/dev/null || echo '?')"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# --- dptrain -----------------------------------------------------------------------
cmd=("$dptrain" train --model lenet --epochs "$epochs" --batch-size "$batch" --lr "$lr"
     --devices "$devices" --precision "$precision" "${data_args[@]}")
echo "== ${cmd[*]}" >&2
set +e
"${cmd[@]}" 2>&1 | tee "$log" >&2
rc=${PIPESTATUS[0]}
set -e
if [[ $rc -ne 0 ]]; then
  die "dptrain exited with status $rc (output above)"
fi
# Documented last line: "test acc: 0.83, 6.1 sec/epoch on [cpu:0]"
summary_re='test acc: ([0-9.eE+-]+), ([0-9.eE+-]+) sec/epoch on \[([^]]*)\]'
summary="$(grep -E "$summary_re" "$log" | tail -n 1 || true)"
if [[ -z "$summary" ]]; then
  echo "---- dptrain output ----" >&2
  cat "$log" >&2
  echo "------------------------" >&2
  die "dptrain printed no line of the form 'test acc: A, S sec/epoch on [DEVICES]'"
fi
[[ "$summary" =~ $summary_re ]]
dpt_acc="${BASH_REMATCH[1]}"
dpt_sec="${BASH_REMATCH[2]}"
dpt_on="${BASH_REMATCH[3]}"
# Each epoch line ends "..., eval 0.21 sec": the test-set evaluation, timed apart.
dpt_eval="$(sed -n 's/^epoch [0-9]*\/[0-9]*: .*, eval \([0-9.]*\) sec$/\1/p' "$log" |
            awk '{ sum += $1; n++ } END { if (n > 0) printf "%.3f", sum / n }')"

# --- PyTorch -----------------------------------------------------------------------
# Debian's python3-torch lives under /usr/bin/python3; a pyenv/venv python3 on PATH
# usually lacks it, so try the system one first. $PYTHON, if set, is the only one tried.
python=
torch_why=
if [[ -n "${PYTHON:-}" ]]; then
  candidates=("$PYTHON")
else
  candidates=(/usr/bin/python3 "$(command -v python3 || true)")
fi
for py in "${candidates[@]}"; do
  [[ -n "$py" && -x "$py" ]] || continue
  if out="$("$py" -c 'import torch, numpy; print(torch.__version__)' 2>&1)"; then
    python="$py"; torch_version="$out"; break
  fi
  torch_why="$py: $(tail -n 1 <<<"$out")"
done

pt_sec='' pt_eval='' pt_acc='' pt_blas=''
if [[ -z "$python" ]]; then
  echo "lenet_epoch.sh: PyTorch is not available (${torch_why:-no python3 found});" \
       "install Debian's python3-torch. Reporting dptrain only." >&2
  torch_version="not installed"
else
  cmd=("$python" "$here/pytorch_lenet.py" --epochs "$epochs" --batch-size "$batch"
       --lr "$lr" --threads "$threads" "${data_args[@]}")
  echo "== ${cmd[*]}" >&2
  set +e
  "${cmd[@]}" 2>&1 | tee "$log" >&2
  rc=${PIPESTATUS[0]}
  set -e
  [[ $rc -eq 0 ]] || die "pytorch_lenet.py exited with status $rc (output above)"
  field() { sed -n "s/^$1: //p" "$log" | tail -n 1; }
  pt_sec="$(field 'sec\/epoch')"
  pt_eval="$(field 'eval sec')"
  pt_acc="$(field 'test acc')"
  pt_blas="$(field 'blas')"
  [[ -n "$pt_sec" && -n "$pt_acc" ]] || die "pytorch_lenet.py printed no 'sec/epoch:' / 'test acc:' lines"
fi

# --- report ------------------------------------------------------------------------
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
cores="$(nproc 2>/dev/null || echo '?')"
echo
echo "LeNet, Fashion-MNIST, batch $batch, lr $lr, $epochs epoch(s); sec/epoch = training loop only"
printf '  %-22s %s\n' "cpu" "${cpu:-unknown}, $cores cores available"
busy_note=''
if awk -v b="$busy_before" 'BEGIN { exit !(b + 0 >= 0.3) }'; then
  busy_note=" (other work was running: timings are not reliable)"
fi
printf '  %-22s %s\n' "busy before run" "$busy_before of $cores cores$busy_note"
printf '  %-22s %s\n' "torch" "$torch_version${pt_blas:+, BLAS: $pt_blas}"
printf '  %-22s %12s %12s %10s\n' "" "sec/epoch" "eval sec" "test acc"
dpt_label="dptrain [$dpt_on]"
[[ "$precision" == fp32 ]] || dpt_label="dptrain $precision [$dpt_on]"
printf '  %-22s %12s %12s %10s\n' "$dpt_label" "$dpt_sec" "${dpt_eval:-?}" "$dpt_acc"
ratio_of() { awk -v p="$1" -v d="$2" 'BEGIN { if (p > 0 && d > 0) printf "%.2f", p / d; else print "n/a" }'; }
if [[ -n "$pt_sec" ]]; then
  printf '  %-22s %12s %12s %10s\n' "pytorch [$threads threads]" "$pt_sec" "${pt_eval:-?}" "$pt_acc"
  echo "ratio (pytorch / dptrain): training $(ratio_of "$pt_sec" "$dpt_sec")x," \
       "evaluation $(ratio_of "${pt_eval:-0}" "${dpt_eval:-0}")x"
else
  printf '  %-22s %12s %12s %10s\n' "pytorch" "n/a" "n/a" "n/a"
  echo "ratio (pytorch / dptrain): n/a (PyTorch not available)"
fi
