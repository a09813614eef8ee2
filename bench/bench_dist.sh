#!/usr/bin/env bash
# bench/bench_dist.sh: data-parallel training on this machine's cores (issue 18).
# Trains the shakespeare-char CPU model (configs/shakespeare-char-cpu.toml) at one global batch
# of 2 x 12 sequences per step in five set-ups, one after the other, in one session:
#   1 rank  x 1 thread  (2 accumulation steps)        the serial reference
#   1 rank  x 2 threads (2 accumulation steps)        OpenMP over both cores
#   2 ranks x 1 thread  (mpirun, fp32 gradients)       data parallel over both cores
#   2 ranks x 1 thread, train.zero=1                   AdamW state sharded
#   2 ranks x 1 thread, train.grad_comm=bf16           gradients in bf16
# and prints tokens/s (median step time over the steps after the first WARM), joules per token
# (the meter's; ESTIMATED where the machine has no counter), the final training loss, the share
# of step time each rank spent waiting in collectives, the share of the gradient reduction
# hidden behind the backward, and the bytes each rank sent per step against the ring
# all-reduce's 2(N-1)/N x gradient bytes. Scaling efficiency = tokens/s of 2 ranks x 1 thread
# over 1 rank x 2 threads (issue 18's target: >= 0.9).
#
# usage: bench/bench_dist.sh [BUILD_DIR] [STEPS] [DATA]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
steps=${2:-60}
data=${3:-$here/../shared/data/text/tinyshakespeare.txt}
warm=10
bin=$build/src/cli/greentrain
[ -x "$bin" ] || { echo "no $bin: build greentrain first" >&2; exit 1; }
[ -f "$data" ] || { echo "no data file $data" >&2; exit 1; }
mpirun_cmd="mpirun --oversubscribe --allow-run-as-root --bind-to core -np 2"
out=$(mktemp -d /tmp/bench-dist.XXXXXX)
trap 'rm -rf "$out"' EXIT
common=(--data "$data" --set train.max_steps=$steps --set train.batch_size=12
        --set train.eval_interval=0 --set train.checkpoint_interval=0 --set train.log_interval=10)

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # name, launcher, extra arguments...
  local name=$1 launcher=$2
  shift 2
  echo "== $name" >&2
  $launcher "$bin" train "$here/configs/shakespeare-char-cpu.toml" --out "$out/$name" \
    "${common[@]}" "$@" > "$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; exit 1; }
}
run 1x1 "" --set train.threads=1 --set train.grad_accum_steps=2
run 1x2 "" --set train.threads=2 --set train.grad_accum_steps=2
run 2x1 "$mpirun_cmd" --set train.threads=1
run 2x1_zero1 "$mpirun_cmd" --set train.threads=1 --set train.zero=1
run 2x1_bf16 "$mpirun_cmd" --set train.threads=1 --set train.grad_comm=bf16
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$warm" <<'EOF'
import json, statistics, sys
out, warm = sys.argv[1], int(sys.argv[2])
rows = {}
for name in ["1x1", "1x2", "2x1", "2x1_zero1", "2x1_bf16"]:
    lines = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if l.strip()]
    steps = [l for l in lines if "step_time_s" in l]
    s = json.load(open(f"{out}/{name}/summary.json"))
    tokens_per_step = s["tokens"] / len(steps)
    med = statistics.median(l["step_time_s"] for l in steps[warm:])
    jpt = s.get("joules_per_token")
    d = s.get("dist")
    row = {"tok_s": tokens_per_step / med, "jpt": jpt, "est": s.get("energy_estimated"),
           "loss": steps[-1]["loss"], "dur": s["duration_s"]}
    if d:
        row["comm_share"] = [r["collective_wait_s"] / s["duration_s"] for r in d["per_rank"]]
        row["hidden"] = [r["hidden_fraction"] for r in d["per_rank"]]
        row["bytes"] = d["bytes_per_step"]
        row["ring"] = d["ring_allreduce_bytes_per_step"]
    rows[name] = row
print(f"{'set-up':<12} {'tokens/s':>9} {'J/token':>10} {'loss':>7} {'wait share (rank 0, 1)':>24} "
      f"{'hidden':>13} {'bytes/step':>11} {'ring 2(N-1)/N':>14}")
for name, r in rows.items():
    j = "unknown" if r["jpt"] is None else f"{r['jpt']:.3g}{'*' if r['est'] else ''}"
    line = f"{name:<12} {r['tok_s']:>9.0f} {j:>10} {r['loss']:>7.4f}"
    if "bytes" in r:
        line += (f" {', '.join(f'{x:.1%}' for x in r['comm_share']):>24}"
                 f" {', '.join('-' if h is None else f'{h:.0%}' for h in r['hidden']):>13}"
                 f" {r['bytes']:>11.0f} {r['ring']:>14.0f}")
    print(line)
print("* estimated (no energy counter readable here)")
eff = rows["2x1"]["tok_s"] / rows["1x2"]["tok_s"]
print(f"scaling efficiency, 2 ranks x 1 thread over 1 rank x 2 threads: {eff:.2f} (target >= 0.9)")
print(f"2 ranks x 1 thread over 1 rank x 1 thread: {rows['2x1']['tok_s'] / rows['1x1']['tok_s']:.2f}x")
EOF
