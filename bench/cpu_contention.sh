#!/usr/bin/env bash
# The CPU step beside a competing load (issue 32): STEPS steps of shakespeare-char-cpu (bf16,
# fusion, every core), idle and beside a fixed CPU-bound competitor (one busy process per
# core), under each thread policy, in alternating rounds. Prints the median step time of
# each case (summary.json's duration_s / steps: the steps only, not loading or evaluation)
# and the issue's ratios:
#   - idle: adaptive / fixed (target: within 2 %),
#   - loaded: adaptive against its target, 1.5 x idle time / fair share of the cores (with one
#     competitor per core and a full team, the fair share is team / (team + cores)),
#   - loaded: adaptive / OMP_WAIT_POLICY=passive (target: <= 1, never slower), of the medians
#     and round by round (the median of the rounds' ratios).
# "fixed" is greentrain's team of every core with its default spin (GOMP_SPINCOUNT=10000,
# src/cli/main.cpp); "passive" is fixed with OMP_WAIT_POLICY=passive, the old advice of
# docs/benchmarks.md; "spin300k" is fixed with libgomp's own default spin (GOMP_SPINCOUNT=300000).
#
# usage: bench/cpu_contention.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 300)
# Check `uptime` first: other work on the machine is a competitor this script did not start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-300}
bin=$build/src/cli/greentrain
data=../shared/data/text/tinyshakespeare.txt
[ -x "$bin" ] || { echo "cpu_contention: $bin not found: build first (cmake --build $build)" >&2; exit 2; }
[ -r "$data" ] || { echo "cpu_contention: $data not found (the shared data folder)" >&2; exit 2; }
cores=$(nproc)
work=$(mktemp -d)
competitors=()
stop_competitors() {
  for p in "${competitors[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${competitors[@]}"; do wait "$p" 2>/dev/null || true; done
  competitors=()
}
trap 'stop_competitors; rm -rf "$work"' EXIT
start_competitors() {  # one busy process per core, at the trainer's priority
  for ((i = 0; i < cores; i++)); do
    bash -c 'while :; do :; done' &
    competitors+=($!)
  done
  sleep 0.5
}

# run NAME POLICY [ENV...]: one training run, its seconds per step appended to $work/NAME
run() {
  local name=$1 policy=$2
  shift 2
  local out=$work/run-$name
  rm -rf "$out"
  env "$@" "$bin" train configs/shakespeare-char-cpu.toml --data "$data" --out "$out" \
    --set train.max_steps="$steps" --set train.eval_interval=0 --set train.checkpoint_interval=0 \
    --set train.precision=bf16 --set train.thread_policy="$policy" >"$out.log" 2>&1 ||
    { echo "cpu_contention: the $name run failed:" >&2; tail -5 "$out.log" >&2; exit 1; }
  python3 - "$out/summary.json" "$name" >>"$work/$name" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
t = s.get("threads") or {}
print(s["duration_s"] / s["step"], t.get("steps_with_fewer", 0), t.get("changes", 0),
      t.get("steps_waits_sleeping", 0))
EOF
}

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p' | head -1) model $(lscpu | sed -n 's/^Model: *//p' | head -1))"
echo "cpu_contention: $cpu, $cores cores;" \
  "uptime:$(uptime | sed 's/.*load average/ load average/')"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then
    run idle_fixed fixed
    run idle_adaptive adaptive
  else
    run idle_adaptive adaptive
    run idle_fixed fixed
  fi
  start_competitors
  # the loaded cases in a rotated order each round: a machine under load can slow down as the
  # load goes on (a hypervisor's steal time), which a fixed order would pin on the last case
  for ((i = 0; i < 4; i++)); do
    case $(((i + r) % 4)) in
      0) run loaded_adaptive adaptive ;;
      1) run loaded_passive fixed OMP_WAIT_POLICY=passive ;;
      2) run loaded_fixed fixed ;;
      3) run loaded_spin300k fixed GOMP_SPINCOUNT=300000 ;;
    esac
  done
  stop_competitors
  echo "round $r of $rounds done"
done
python3 - "$work" "$cores" <<'EOF'
import statistics, sys, os
work, cores = sys.argv[1], int(sys.argv[2])
def rows(n):
    return [list(map(float, l.split())) for l in open(os.path.join(work, n))]
med = {}
for n in ["idle_fixed", "idle_adaptive", "loaded_adaptive", "loaded_passive", "loaded_fixed",
          "loaded_spin300k"]:
    r = rows(n)
    med[n] = statistics.median(x[0] for x in r)
    print(f"{n:16s} median {med[n]*1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x[0]*1e3:.2f}" for x in r)
          + f"; steps with a smaller team: {', '.join(str(int(x[1])) for x in r)}"
          + f"; with sleeping waits: {', '.join(str(int(x[3])) for x in r)})")
share = cores / (cores + cores)
target = 1.5 * med["idle_fixed"] / share
print(f"idle: adaptive / fixed = {med['idle_adaptive'] / med['idle_fixed']:.3f} (target 0.98-1.02)")
print(f"loaded: adaptive = {med['loaded_adaptive'] / med['idle_fixed']:.2f}x idle; target <= "
      f"{target / med['idle_fixed']:.2f}x (1.5 x idle / fair share {share:.2f}): "
      f"{'met' if med['loaded_adaptive'] <= target else 'NOT met'}")
# each round's own ratio too: the two runs of a round are minutes apart at most, so a drift of
# the machine's speed over the call (a virtual machine's host) cancels in it
pairs = [a[0] / p[0] for a, p in zip(rows("loaded_adaptive"), rows("loaded_passive"))]
print(f"loaded: adaptive / passive = {med['loaded_adaptive'] / med['loaded_passive']:.3f} (target <= 1); "
      f"round by round {', '.join(f'{r:.3f}' for r in pairs)}, median {statistics.median(pairs):.3f}")
print(f"loaded: fixed / adaptive = {med['loaded_fixed'] / med['loaded_adaptive']:.2f}; "
      f"libgomp's spin / adaptive = {med['loaded_spin300k'] / med['loaded_adaptive']:.2f}")
EOF
