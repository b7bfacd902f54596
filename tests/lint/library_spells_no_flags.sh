#!/usr/bin/env bash
# Fails if a string literal in the library (src/) spells a command-line flag ("--batch-size"):
# the library names settings by config field in backquotes ("`batch_size`", see
# core/config_error.h) and only the CLI knows its flags (apps/cli.cc rewrites them).
#   usage: library_spells_no_flags.sh SRC_DIR
# A line is scanned from its start, past code, comments (// to the end of the line) and
# closed literals, to the first string literal holding "--" and a letter.
set -uo pipefail
src=${1:?usage: library_spells_no_flags.sh SRC_DIR}
literal='"(?:[^"\\]|\\.)*?--[a-z]'
code='(?:[^"'"'"'/]|/(?!/)|"(?:[^"\\]|\\.)*"|'"'"'(?:[^'"'"'\\]|\\.)*'"'"')*?'
hits=$(grep -rnP --include='*.cc' --include='*.h' --include='*.cu' --include='*.cuh' "^${code}${literal}" "$src")
if [[ -n $hits ]]; then
  echo "FAIL: library string literals spell CLI flags; name the config field instead (\`batch_size\`):"
  echo "$hits"
  exit 1
fi
echo "PASS: no library string literal spells a CLI flag"
