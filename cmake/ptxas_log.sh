#!/usr/bin/env bash
# cmake/ptxas_log.sh: the CUDA compiler launcher of the build (CMAKE_CUDA_COMPILER_LAUNCHER):
# runs the compile command it is given (which may start with another launcher, ccache say) and
# keeps what the compiler wrote to stderr (ptxas's register, stack and spill report, from
# -Xptxas -v) in OBJECT.ptxas.log beside the object file, for the resource gate
# (tests/backend/resource_gate_test.cpp). The terminal gets everything but ptxas's report.
# Exit status: the compiler's.
set -o pipefail
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  prev="$a"
done
if [ -z "$out" ]; then exec "$@"; fi
log="$out.ptxas.log"
"$@" 2> "$log.tmp"
rc=$?
grep -Ev '^ptxas info|^ +[0-9]+ bytes stack frame' "$log.tmp" >&2
mv -f "$log.tmp" "$log"
exit $rc
