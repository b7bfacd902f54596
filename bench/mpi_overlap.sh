#!/usr/bin/env bash
# Step time with the gradient allreduce overlapped with backward (buckets) against one
# allreduce after backward, over MPI on this machine, and the wire volume per step against
# the ring's 2 (N-1)/N x gradient bytes. Runs bench/mpi_overlap.cc under mpirun.
#   bench/mpi_overlap.sh [--build DIR] [--np 2] [mpi_overlap options: --model resnet18 --batch 32 --steps 10 ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
np=2
args=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
bench=$build/bench/mpi_overlap
if [[ ! -x $bench ]]; then
  echo "mpi_overlap: $bench not found; build with MPI installed (libopenmpi-dev): cmake --build $build --target mpi_overlap" >&2
  exit 1
fi
busy=$(awk '{print $1}' /proc/loadavg)
echo "load average before the run: $busy (on $(nproc) cores; figures from a busy machine are noisy)"
# As root in a container: --allow-run-as-root; shared memory without the CMA single-copy path.
exec mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
  -np "$np" "$bench" "${args[@]}"
