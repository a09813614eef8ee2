#!/usr/bin/env bash
# Runs each libFuzzer target (fuzz/, built with GT_FUZZ=ON) for SECONDS (default 600), one after
# the other or GT_FUZZ_JOBS at a time, starting from its committed seed corpus (with fuzz/dict/TARGET.dict, tokens of its format), and
# prints one line per target: seconds run, executions, and whether it found something. An
# allocation over -rss_limit_mb / -malloc_limit_mb and an input that runs longer than -timeout
# count as findings, as crashes and sanitizer reports do.
#   bench/fuzz.sh [SECONDS] [TARGET...]     e.g. bench/fuzz.sh 60 safetensors jobs
# Environment: GT_FUZZ_JOBS (targets run at a time, default 1), GT_FUZZ_BUILD (default
# build-fuzz; configured here if missing), GT_FUZZ_UNITY (ON: configure it as a unity build,
# CMAKE_UNITY_BUILD, as CI does), GT_FUZZ_NICE (default 10: shared machines), GT_FUZZ_BIN (a
# folder of targets built before, e.g. copies kept running while the build is changed: nothing
# is built then). Findings land in $GT_FUZZ_BUILD/fuzz-out/TARGET/ (crash-*, timeout-*, oom-*),
# with the log; turn each into a regression test before fixing it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-600}
shift || true
build=${GT_FUZZ_BUILD:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors state_json config_toml jobs tokens text_data carbon_csv readings
  daemon_protocol run_folder)
bin=${GT_FUZZ_BIN:-$build/fuzz}
if [ -z "${GT_FUZZ_BIN:-}" ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    # Ninja where installed (scripts/apt-packages.txt): about 10 % less build time than Make
    gen=()
    command -v ninja > /dev/null && gen=(-G Ninja)
    cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_C_COMPILER=clang -DGT_FUZZ=ON -DGT_CUDA=OFF -DGT_BUILD_TESTS=OFF -DGT_BUILD_BENCH=OFF \
      -DCMAKE_UNITY_BUILD="${GT_FUZZ_UNITY:-OFF}"
  fi
  cmake --build "$build" -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")
fi
# one target's run; its line of the table goes to $build/fuzz-out/TARGET/result.txt
run_target() {
  local t=$1 out="$build/fuzz-out/$1" dict=() start rc ran execs result
  mkdir -p "$out/corpus"
  # the working corpus grows here; the committed seeds stay as they are
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  start=$(date +%s)
  set +e
  nice -n "${GT_FUZZ_NICE:-10}" "$bin/fuzz_$t" "$out/corpus" "fuzz/corpus/$t" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1 "${dict[@]}" -artifact_prefix="$out/" >"$out/log.txt" 2>&1
  rc=$?
  set -e
  ran=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/log.txt" | grep -o '[0-9]*$' ||
    grep -o '^#[0-9]*' "$out/log.txt" | tail -1 | tr -d '#' || true)
  if [ $rc -eq 0 ]; then
    result="no finding"
  else
    result="FINDING (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|deadly|timeout|out-of-memory' "$out/log.txt" || true); see $out/"
  fi
  printf '%-12s %8s %12s  %s\n' "$t" "$ran" "${execs:-?}" "$result" > "$out/result.txt"
}
# GT_FUZZ_JOBS targets at a time (default 1; CI runs one per core)
jobs_max=${GT_FUZZ_JOBS:-1}
for t in "${targets[@]}"; do
  rm -f "$build/fuzz-out/$t/result.txt"
  run_target "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
done
wait
status=0
printf '%-12s %8s %12s  %s\n' target seconds executions result
for t in "${targets[@]}"; do
  line=$(cat "$build/fuzz-out/$t/result.txt" 2>/dev/null || echo "$t: no result (the run did not finish)")
  echo "$line"
  case "$line" in *"no finding") ;; *) status=1 ;; esac
done
exit $status
