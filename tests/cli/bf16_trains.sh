#!/usr/bin/env bash
# --precision bf16 end to end: the concise LeNet trained for 3 epochs on 12,000 images in
# fp32 and in bf16 (same seed, devices and settings). The bf16 run must say it computes its
# convolutions in bf16, clear the same bar and end within 0.03 of fp32's test accuracy
# (bf16 rounds each operand of a product to 8 bits of mantissa; the runs differ by about
# 0.01 to 0.02 here). That the convolutions round their operands to bf16 at all is
# tests/ops_gradcheck_test.cc's (Conv2dBf16): the figures alone cannot tell, since bf16 also
# moves conv2's backward-data from our fp32 kernel to oneDNN's. Exits 77 (ctest: skipped, counted by scripts/test.sh) on a CPU
# without avx512_bf16, where dptrain refuses bf16.
#   usage: bf16_trains.sh DPTRAIN DATA_DIR WORK_DIR
set -euo pipefail
dptrain=$1 data=$2 work=$3
if ! grep -qw avx512_bf16 /proc/cpuinfo; then
  echo "SKIP: this CPU has no avx512_bf16, so --precision bf16 is refused here"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
bar=0.70
acc() { sed -n 's/^loss .*test acc \([0-9.]*\)$/\1/p' "$1"; }
for p in fp32 bf16; do
  "$dptrain" train --precision "$p" --api concise --init kaiming --momentum 0.9 --lr 0.05 --devices cpu:2 \
    --data "$data" --train-limit 12000 --test-limit 2000 --epochs 3 --progress off >"$work/$p.log" 2>&1 || {
    echo "FAIL: the $p run exited with $?"
    cat "$work/$p.log"
    exit 1
  }
done
grep -q "convolutions in bf16 (fp32 accumulation)" "$work/bf16.log" || {
  echo "FAIL: the bf16 run does not say it computes in bf16"
  cat "$work/bf16.log"
  exit 1
}
fp32=$(acc "$work/fp32.log") bf16=$(acc "$work/bf16.log")
python3 - "$fp32" "$bf16" "$bar" <<'PY'
import sys
fp32, bf16, bar = map(float, sys.argv[1:])
if bf16 < bar or fp32 < bar:
    sys.exit(f"FAIL: test accuracy fp32 {fp32:.3f}, bf16 {bf16:.3f}: below the bar {bar:.2f}")
if abs(bf16 - fp32) > 0.03:
    sys.exit(f"FAIL: bf16 ends at {bf16:.3f}, more than 0.03 from fp32's {fp32:.3f}")
print(f"PASS: 3 epochs of the concise LeNet: test accuracy fp32 {fp32:.3f}, bf16 {bf16:.3f} "
      f"(difference {bf16 - fp32:+.3f}, at most 0.03; bar {bar:.2f})")
PY
