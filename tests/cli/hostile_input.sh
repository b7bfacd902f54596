#!/usr/bin/env bash
# Hostile input through the real dptrain binary: data damaged or crafted to crash or exhaust
# it, outputs that cannot be written, and checkpoint folders shared with another run. Each
# bad input must stop with exactly its one-line message and status 1 before any damage,
# and no run may delete or resume another run's checkpoints (docs/CHECKPOINTS.md).
#   usage: hostile_input.sh DPTRAIN FASHION_MNIST_DIR
set -uo pipefail
dptrain=$(realpath "${1:?usage: hostile_input.sh DPTRAIN FASHION_MNIST_DIR}")
fashion=$(realpath "${2:?usage: hostile_input.sh DPTRAIN FASHION_MNIST_DIR}")
here=$(realpath "$(dirname "$0")")
source "$here/expect_error.sh"
work=$(mktemp -d)
trap 'umount "$work/read_only" 2>/dev/null; rm -rf "$work"' EXIT
/usr/bin/python3 "$here/write_hostile_data.py" "$work" || { echo "FAIL: cannot write the hostile data"; exit 1; }
cd "$work" || exit 1
base=(--data "$fashion" --test-limit 64 --progress off)
small=("${base[@]}" --train-limit 64 --batch-size 32)
fail() {
  echo "FAIL: $1"
  failures=$((failures + 1))
}

# --- Data that would crash, exhaust memory or lose the run's work.
expect "NumPy file 'npy_overflow/x_train.npy' holds 0 data bytes where its header declares shape (2305843009213693952, 16, 16) of '|u1' (more than 2^64 values); it is cut short or damaged, save it again" \
  train --data npy_overflow
expect "picture 'bomb/train/a/bomb.jpg' declares 60000x60000 pixels (3600000000), more than the limit of 89478485 (--max-image-pixels): a damaged header or a decompression bomb; if the picture is real, raise --max-image-pixels; remove it, or pass --on-bad-image skip to leave such pictures out" \
  train --data bomb
expect "class folder 'not_utf8/train/b\\xffag' has a name that is not UTF-8 (its bytes are shown as \\xNN); rename it with UTF-8 characters (e.g. convmv -f latin1 -t utf8), since the class names go into checkpoints and reports" \
  train --data not_utf8
expect "--batch-size 2000000000 is larger than the 64 training examples; pass at most that (a batch of all of them is one step per epoch)" \
  train "${base[@]}" --train-limit 64 --batch-size 2000000000 --lr-scaling linear
expect "--lr-scaling linear turns --lr 5 into 20 for 1024 examples per update, above 10, where no optimizer here trains; lower --lr, --batch-size or --accumulate, or pass --lr-scaling none" \
  train "${base[@]}" --train-limit 1024 --batch-size 1024 --lr 5 --lr-scaling linear

# --- Outputs checked before the data loads.
touch a_file
mkdir a_folder
expect "cannot use checkpoint directory a_file (a file is in its place); pass --checkpoint-dir a folder this process can create and write" \
  train "${small[@]}" --epochs 1 --checkpoint-dir a_file
expect "cannot write SVG plot a_folder: Is a directory" train "${small[@]}" --epochs 1 --plot a_folder
if [[ $(id -u) -eq 0 ]]; then  # a read-only file system of our own
  mkdir read_only
  if mount -t tmpfs -o ro tmpfs read_only; then
    expect "cannot use checkpoint directory read_only/ckpt (Read-only file system); pass --checkpoint-dir a folder this process can create and write" \
      train "${small[@]}" --epochs 1 --checkpoint-dir read_only/ckpt
  else
    fail "cannot mount a read-only tmpfs as root"
  fi
fi

# --- Settings that were accepted silently.
expect "--batch-size 99999999999 is larger than the 256 training examples; pass at most that (a batch of all of them is one step per epoch)" \
  train "${base[@]}" --train-limit 256 --batch-size 99999999999
expect "--cores must be at least 1, got 0" train --cores 0
expect "--image-size 100000 makes pictures of 100000x100000 pixels, more than --max-image-pixels 89478485; choose a smaller --image-size (e.g. 224), or raise --max-image-pixels" \
  train --image-size 100000
expect "the training labels of 'idx_label_200' run up to 200, more classes than its 64 training examples can cover: a damaged label, or classes without examples; name the classes in 'idx_label_200/classes.txt', one per line, to train on them anyway" \
  train --data idx_label_200 --batch-size 16
expect "the data of 'one_class' has one class only ('only'); a classifier needs two or more" train --data one_class
# --train-limit 16 at --image-size 224 resizes 16 pictures, not all 70,000 (4 GB before):
# it must train within 2.5 GB of address space.
got=$(ulimit -v 2500000; "$dptrain" train --data "$fashion" --image-size 224 --train-limit 16 --test-limit 16 \
  --batch-size 16 --epochs 1 --progress off 2>&1) || fail "--image-size 224 --train-limit 16 within 2.5 GB: $got"
cores=$(nproc)
got=$("$dptrain" train "${small[@]}" --epochs 1 --cores $((cores * 500)) 2>&1 >/dev/null)
[[ $got == "dptrain: warning: --cores $((cores * 500)) is more than the $cores cores this process may run on; their threads will wait on each other" ]] ||
  fail "--cores $((cores * 500)) on $cores cores: got '$got'"

# --- Messages that misled.
expect "the training split of 'idx_empty' is empty (0 examples); give it examples" train --data idx_empty
expect "the training split of 'npy_empty' is empty (0 examples); give it examples" train --data npy_empty
expect "NumPy file 'npy_objects/y_train.npy' has dtype '|O' (Python objects), which dptrain does not read; save numbers, little-endian: images as uint8 or float32, labels as int64 (e.g. numpy.save(f, a.astype('int64')))" \
  train --data npy_objects
expect_like "cannot decode picture 'bad_png/train/a/0.png': its PNG data is damaged (stb_image: *); remove or replace it, or pass --on-bad-image skip (which decodes every picture when the folder opens, and leaves out those that fail)" \
  train --data bad_png --batch-size 4 --epochs 1 --progress off
got=$("$dptrain" train --data bad_png --batch-size 4 --epochs 1 --progress off --on-bad-image skip 2>&1)
[[ $? -eq 0 && $got == *"dptrain: warning: left out 1 picture(s) of 'bad_png/train' that do not decode (--on-bad-image skip)"* ]] ||
  fail "--on-bad-image skip did not leave out the damaged PNG: $got"
expect "cannot read 'link_loop/train/a/loop.png' (Too many levels of symbolic links); a symbolic link there points back into itself (a loop); remove or fix the link" \
  train --data link_loop
expect "data 'no/such/folder' does not exist; check the path given to --data" train --data no/such/folder

# A model trained on other classes of the same shape: the differing class is named.
"$dptrain" train --data classes_ab --batch-size 4 --epochs 1 --progress off --checkpoint-dir ab >ab.log 2>&1 ||
  fail "training on classes_ab failed: $(cat ab.log)"
expect "the model was trained on 3x28x28 images in 2 classes, the test split of 'classes_ac' holds 3x28x28 images in 2 classes (class 1 is 'b' in the model, 'c' in the test split); pass the --data it was trained on" \
  evaluate --checkpoint ab --data classes_ac
expect "cannot resume from ab/step-000000002.ckpt: it was written with data of 3x28x28 images in 2 classes (a, b), this run has data of 3x28x28 images in 2 classes (a, c) (class 1 is 'b' in the checkpoint, 'c' in this run's data); resume with the --data it was trained on" \
  train --data classes_ac --batch-size 4 --epochs 2 --progress off --checkpoint-dir ab --resume

# --- Checkpoint folders: one run's; another run's checkpoints are never deleted or resumed.
"$dptrain" train "${small[@]}" --epochs 2 --checkpoint-dir first >first.log 2>&1 || fail "the first run failed: $(cat first.log)"
first_run=$("$dptrain" checkpoint-info first/step-000000004.ckpt | sed -n 's/^run: //p')
[[ $first_run =~ ^[0-9a-f]{16}$ ]] || fail "checkpoint-info shows no run id: '$first_run'"
# evaluate takes the folder: its newest checkpoint.
got=$("$dptrain" evaluate --checkpoint first --data "$fashion" --test-limit 64 2>&1) ||
  fail "evaluate --checkpoint FOLDER: $got"
expect "picture 'bomb.jpg' declares 60000x60000 pixels (3600000000), more than the limit of 89478485 (--max-image-pixels): a damaged header or a decompression bomb; if the picture is real, raise --max-image-pixels" \
  predict --checkpoint first bomb.jpg
cp -r first copy
expect "checkpoint directory copy already holds another run's checkpoints (run $first_run: newest step-000000004.ckpt, 2 files); pass --resume to continue that run, a fresh --checkpoint-dir for a new one, or --share-checkpoint-dir to write beside them (each run prunes only its own)" \
  train "${small[@]}" --epochs 1 --checkpoint-dir copy
# Sharing the folder: the new run's step 2 does not replace the first run's step-000000002.ckpt,
# and its pruning keeps both of the first run's files.
"$dptrain" train "${small[@]}" --epochs 3 --checkpoint-dir copy --share-checkpoint-dir >shared.log 2>&1 ||
  fail "the shared run failed: $(cat shared.log)"
second_run=$(sed -n 's/^run: //p' <("$dptrain" checkpoint-info copy/step-000000006.ckpt))
want="step-000000002.ckpt step-000000004-$second_run.ckpt step-000000004.ckpt step-000000006.ckpt"
[[ $(cd copy && echo step-*) == "$want" ]] || fail "the shared folder holds $(cd copy && echo step-*), not $want"
cmp -s first/step-000000002.ckpt copy/step-000000002.ckpt && cmp -s first/step-000000004.ckpt copy/step-000000004.ckpt ||
  fail "the second run changed the first run's checkpoints"
# Two runs in the folder: --resume must be told which; a learning rate that differs is refused.
expect_like "checkpoint directory copy holds the checkpoints of 2 runs; pass --resume-run with the id of the one to continue:
  run $second_run: newest step-000000006.ckpt, 2 files
  run $first_run: newest step-000000004.ckpt, 2 files" train "${small[@]}" --epochs 4 --checkpoint-dir copy --resume
expect "cannot resume from copy/step-000000004.ckpt: it was written with --lr 0.2, this run has 0.05; resume with the settings it was written with" \
  train "${small[@]}" --epochs 4 --checkpoint-dir copy --resume --resume-run "$first_run" --lr 0.05
"$dptrain" train "${small[@]}" --epochs 3 --checkpoint-dir copy --resume --resume-run "$first_run" >resumed.log 2>&1 ||
  fail "--resume-run failed: $(cat resumed.log)"
grep -q "^resuming from copy/step-000000004.ckpt" resumed.log || fail "--resume-run did not resume the first run: $(cat resumed.log)"
# SIGINT names a checkpoint that exists, and a third run prunes only its own files.
others=$(cd copy && echo step-*)
"$dptrain" train "${base[@]}" --batch-size 32 --epochs 1 --checkpoint-dir copy --share-checkpoint-dir \
  --checkpoint-every 1 >sigint.log 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q "^training" sigint.log && break; sleep 0.1; done
sleep 1.5
kill -INT $pid
wait $pid
saved=$(sed -n 's/.*checkpoint written to \([^,]*\), rerun.*/\1/p' sigint.log)
[[ -n $saved && -f $saved ]] || fail "SIGINT named '$saved', which does not exist: $(tail -2 sigint.log)"
for file in $others; do [[ -f copy/$file ]] || fail "the third run deleted $file of another run"; done
# A second run on the folder at once is refused; a killed run leaves no lock behind, and the
# next run removes the temporary files killed writers left.
"$dptrain" train --data "$fashion" --epochs 3 --progress off --checkpoint-dir busy >busy.log 2>&1 &  # killed below
pid=$!
for _ in $(seq 200); do [[ -e busy/.dptrain.lock ]] && ! flock -n busy/.dptrain.lock true && break; sleep 0.05; done
expect "checkpoint directory busy is in use by another run (pid $pid); two runs in one folder would replace each other's checkpoints: wait for it to end, or pass a fresh --checkpoint-dir" \
  train "${small[@]}" --epochs 1 --checkpoint-dir busy --share-checkpoint-dir
kill -KILL $pid
wait $pid 2>/dev/null
touch busy/.step-000000099.ckpt.tmp4242
got=$("$dptrain" train "${small[@]}" --epochs 1 --checkpoint-dir busy --resume-if-any 2>&1) || fail "the run after the killed one failed: $got"
[[ $got == *"dptrain: warning: removed 1 temporary file(s) that killed writers left in busy (.step-000000099.ckpt.tmp4242)"* &&
  ! -e busy/.step-000000099.ckpt.tmp4242 ]] || fail "the orphaned temporary file was not removed: $got"
# --resume-if-any over damaged checkpoints only: it says which and why before starting afresh.
mkdir damaged
echo junk >damaged/step-000000005.ckpt
got=$("$dptrain" train "${small[@]}" --epochs 1 --checkpoint-dir damaged --resume-if-any 2>&1) || fail "resume-if-any failed: $got"
[[ $got == *"dptrain: warning: no usable checkpoint in damaged; starting from the first step
  skipped: checkpoint damaged/step-000000005.ckpt is not a dptrain checkpoint (no DPTCKPT header)"* ]] ||
  fail "--resume-if-any over a damaged checkpoint did not say so: $got"

report_failures "every hostile input ends with its one line, and no run touches another's checkpoints"
