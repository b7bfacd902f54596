#!/usr/bin/env bash
# Open MPI's remote-shell agent for the multi-host harness (--mca plm_rsh_agent): where
# mpirun would run `ssh HOST COMMAND`, this runs COMMAND in HOST's network namespace
# ($DPT_MH_PREFIX-HOST), under that host's own host name (a UTS namespace), as ssh would
# on a separate machine.
#   usage: netns_rsh.sh HOST COMMAND...
set -euo pipefail
host=$1
shift
exec ip netns exec "${DPT_MH_PREFIX:?}-$host" unshare --uts sh -c "hostname $host && exec sh -c \"\$0\"" "$*"
