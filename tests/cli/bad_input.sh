#!/usr/bin/env bash
# Bad configurations through the real dptrain binary: each must stop with exactly its
# message on stderr (the library's backquoted fields rewritten into flags by the CLI) and
# exit status 1, before any training (and, but for the last case, before loading data).
#   usage: bad_input.sh DPTRAIN
set -uo pipefail
dptrain=${1:?usage: bad_input.sh DPTRAIN}
source "$(dirname "$0")/expect_error.sh"
expect "--batch-size must be positive, got 0" train --batch-size 0
expect "--epochs must be at least 1, got 0" train --epochs 0
expect "learning rate must be a finite number >= 0, got -0.500000" train --lr=-0.5
expect "--model must be lenet or resnet18, got 'lenet2'" train --model lenet2
expect "--api must be scratch or concise, got 'fancy'" train --api fancy
expect "--allreduce must be naive or ring, got 'tree'" train --allreduce tree
expect "--dist must be none or mpi, got 'tcp'" train --dist tcp
expect "--progress must be auto, on or off, got 'sometimes'" train --progress sometimes
expect "--on-nan must be stop or skip, got 'ignore'" train --on-nan ignore
expect "--precision must be fp32 or bf16, got 'fp16'" train --precision fp16
expect "--conv-algorithm must be winograd or direct, got 'fft'" train --conv-algorithm fft
expect "--init must be lesson, kaiming or xavier, got 'he'" train --api concise --init he
expect "--loss must be cross-entropy or mse, got 'hinge'" train --loss hinge
expect "label smoothing is for the cross-entropy loss, not mse; drop it or use cross-entropy" \
  train --loss mse --label-smoothing 0.1
expect "cross-entropy loss: label smoothing 1.500000 is outside [0, 1); 0 turns it off, 0.1 is usual" \
  train --label-smoothing 1.5
expect "--model resnet18 needs --api concise (the from-scratch loop is LeNet's)" train --model resnet18
expect "--momentum, --weight-decay and --init need --api concise (the lesson's sgd has none)" train --momentum 0.9
expect "--train-limit and --test-limit must be >= 0" train --test-limit -1
expect "--train-limit and --test-limit must be >= 0" train --train-limit -5
expect "--bucket-mb must be a number >= 0, got -1.000000" train --bucket-mb -1
expect "--collective-timeout must be > 0 seconds, got 0.000000" train --dist mpi --collective-timeout 0
expect "--collective-timeout must be > 0 seconds, got -2.500000" train --dist mpi --collective-timeout -2.5
expect "bad --devices 'cpu:0': cpu:N needs N >= 1 CPU devices (expected cpu:N (N CPU devices), cuda:I[,cuda:J...] or a device count such as 2)" \
  train --devices cpu:0
expect "--batch-size 2 is smaller than the 3 devices: every device needs at least one example per batch" \
  train --devices cpu:3 --batch-size 2
expect "--lr-schedule must be constant, step or cosine, got 'linear'" train --lr-schedule linear
expect "--warmup-epochs must be >= 0, got -1" train --warmup-epochs -1
expect "--warmup-epochs 10 must be fewer than the 10 --epochs, leaving epochs for the schedule after it" \
  train --lr-schedule cosine --warmup-epochs 10
expect "--lr-scaling must be none or linear, got 'sqrt'" train --lr-scaling sqrt
expect "--accumulate must be at least 1 micro-batch per update, got 0" train --accumulate 0
expect "--sync-bn needs --api concise (the from-scratch LeNet has no BatchNorm)" train --sync-bn
expect "--sync-bn and --deterministic exclude each other: --deterministic normalizes every chunk with its own statistics" \
  train --api concise --sync-bn --deterministic
expect "--sync-bn allreduces BatchNorm's statistics during backward, which the gradient buckets would overlap: leave --bucket-mb at 0" \
  train --api concise --sync-bn --bucket-mb 1
expect "--resume needs --checkpoint-dir" train --resume
expect "--checkpoint-every needs --checkpoint-dir" train --checkpoint-every 5
expect "--keep-checkpoints must be at least 1, got 0" train --keep-checkpoints 0 --checkpoint-dir /nonexistent/ckpt
expect "data '/nonexistent/fm' does not exist; check the path given to --data" train --data /nonexistent/fm
expect "Fashion-MNIST directory '/nonexistent/fashion' does not exist; install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR" \
  train --data /nonexistent/fashion
expect "--deterministic cuts every batch into chunks of --chunk-size 32: --batch-size 100 is not a multiple of it" \
  train --deterministic --batch-size 100
expect "--chunk-size must be at least 1, got 0" train --deterministic --chunk-size 0
expect "--deterministic sums the gradients in a fixed tree after backward, so it cannot overlap them with backward in buckets: leave --bucket-mb at 0" \
  train --deterministic --bucket-mb 1
expect "--grad-compression must be none or bf16, got 'fp16'" train --grad-compression fp16
expect "--grad-compression bf16 and --deterministic exclude each other: bf16 rounds each process's partial sums, which depend on how many processes there are, so the bits could not stay those of one device" \
  train --grad-compression bf16 --deterministic
expect "--grad-compression bf16 compresses the gradients that travel between processes, and one process sends none: use it with --dist mpi" \
  train --grad-compression bf16 --devices cpu:2
expect "--zero 1 needs --api concise: the lesson's sgd keeps no state to shard" train --zero 1
expect "--zero must be 0 (off) or 1 (the optimizer state sharded), got 2" train --api concise --zero 2
expect "--zero 1 reduce-scatters the gradients after backward, and the buckets would allreduce them during it: leave --bucket-mb at 0" \
  train --api concise --zero 1 --bucket-mb 1
report_failures "every bad input stops with its message and status 1"
