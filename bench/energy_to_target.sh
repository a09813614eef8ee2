#!/usr/bin/env bash
# bench/energy_to_target.sh [TARGET]: the headline comparison of issue 16. Trains the
# shakespeare-char-cpu setting (nanoGPT's CPU setting) to validation loss TARGET (default 1.95)
# with greentrain fp32, greentrain bf16 + fusion, and the equivalent PyTorch script
# (bench/torch_train_to_target.py: same model, split, tokenizer, batches, optimizer, schedule)
# in fp32, bf16 autocast and, with PyTorch 2.x, torch.compile; each stops at the target and is
# wrapped by `greentrain measure`, so one meter measures all, one after another in one run.
# Prints (and writes to OUT/table.md) seconds, joules (estimated where the machine has no
# energy counter, and said so), gCO2e, tokens and steps to target, the loss reached, and each
# one's joules against PyTorch fp32's; writes OUT/report.html of all runs, greentrain's and
# PyTorch's (bench/e2t_report_runs.py gives each the one meter's joules).
#
# Environment: GT (greentrain binary, default build/src/cli/greentrain), DATA (default
# ../shared/data/text/tinyshakespeare.txt), CONFIG (default configs/shakespeare-char-cpu.toml),
# THREADS (default all cores), OUT (default runs/energy-to-target-DATE), PYTHON (default the
# bench venv of bench/setup-torch2.sh, ../venv-torch2, else Debian's /usr/bin/python3 with
# python3-torch), VARIANTS (default: all; e.g. "gt-fp32 torch-fp32"), SCOPE (default
# --process: see below), EVAL_INTERVAL (validate every N steps, default 100: the target is
# seen at the first validation at or below it, so a coarse interval adds up to N steps to the
# figures; the config's 250 would), SEED (default the config's train.seed; both sides).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${1:-1.95}"
gt="${GT:-build/src/cli/greentrain}"
data="${DATA:-../shared/data/text/tinyshakespeare.txt}"
config="${CONFIG:-configs/shakespeare-char-cpu.toml}"
threads="${THREADS:-$(nproc)}"
out="${OUT:-runs/energy-to-target-$(date +%Y%m%d-%H%M%S)}"
venv_py="$(cd .. && pwd)/venv-torch2/bin/python"
python="${PYTHON:-$([ -x "$venv_py" ] && echo "$venv_py" || echo /usr/bin/python3)}"
[ -x "$gt" ] || { echo "no greentrain binary at $gt (build first, or set GT)" >&2; exit 1; }
[ -f "$data" ] || { echo "no data at $data (set DATA)" >&2; exit 1; }
torch_version="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
mkdir -p "$out"
# where the machine has no energy counter, estimate each command's own process tree (CPU
# time x TDP share), not the whole machine's utilization, which other work would inflate;
# SCOPE= (empty) measures the whole machine
scope="${SCOPE---process}"
eval_interval="${EVAL_INTERVAL:-100}"
seed_gt=(); seed_torch=()
[ -n "${SEED:-}" ] && { seed_gt=(--set "train.seed=$SEED"); seed_torch=(--seed "$SEED"); }
variants="${VARIANTS:-gt-fp32 gt-bf16-fused torch-fp32 torch-bf16 torch-fp32-compile torch-bf16-compile}"
echo "energy to validation loss $target: $config on $data, $threads threads, PyTorch $torch_version," \
  "validation every $eval_interval steps, seed ${SEED:-of the config}"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(date -u '+%Y-%m-%d %H:%M UTC')"

gt_train() {  # NAME then --set overrides
  local name="$1"; shift
  rm -rf "$out/$name"
  "$gt" measure $scope --json "$out/$name.measure.json" -- "$gt" train "$config" --data "$data" \
    --out "$out/$name" --set "train.target_loss=$target" --set train.stop_at_target=true \
    --set "train.threads=$threads" --set "train.eval_interval=$eval_interval" \
    ${seed_gt[@]+"${seed_gt[@]}"} "$@" > "$out/$name.log" 2>&1
}
torch_train() {  # NAME then script options
  local name="$1"; shift
  "$gt" measure $scope --json "$out/$name.measure.json" -- "$python" bench/torch_train_to_target.py \
    --config "$config" --data "$data" --target "$target" --threads "$threads" \
    --out "$out/$name.json" --run-dir "$out/$name.run" --eval-interval "$eval_interval" \
    ${seed_torch[@]+"${seed_torch[@]}"} "$@" > "$out/$name.log" 2>&1
}
for v in $variants; do
  echo "running $v ..."
  case "$v" in
    gt-fp32) gt_train gt-fp32 ;;
    gt-bf16-fused) gt_train gt-bf16-fused --set train.precision=bf16 --set train.fusion=on ;;
    torch-fp32) torch_train torch-fp32 ;;
    torch-bf16) torch_train torch-bf16 --precision bf16 ;;
    torch-fp32-compile | torch-bf16-compile)
      if "$python" -c 'import torch, sys; sys.exit(0 if hasattr(torch, "compile") else 1)' 2>/dev/null; then
        if [ "$v" = torch-fp32-compile ]; then torch_train "$v" --compile
        else torch_train "$v" --compile --precision bf16; fi
      else
        echo "  skipped: torch.compile needs PyTorch 2.x (bench/setup-torch2.sh); this is $torch_version"
      fi ;;
    *) echo "unknown variant $v" >&2; exit 1 ;;
  esac || echo "  $v failed: see $out/$v.log"
done

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
"$python" - "$out" "$target" "$cpu, $threads threads, PyTorch $torch_version, validation every $eval_interval steps, seed ${SEED:-of the config}, $(date -u '+%Y-%m-%d')" <<'EOF'
import json, os, sys
out, target, where = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = []
for name in ["gt-fp32", "gt-bf16-fused", "torch-fp32", "torch-bf16", "torch-fp32-compile",
             "torch-bf16-compile"]:
    mpath = os.path.join(out, name + ".measure.json")
    if not os.path.exists(mpath):
        continue
    m = json.load(open(mpath))
    r = {"name": name, "seconds": m.get("duration_s"), "joules": m.get("energy_j"),
         "g": m.get("g_co2e"), "estimated": m.get("estimated", False)}
    if name.startswith("gt-"):
        s = json.load(open(os.path.join(out, name, "summary.json")))
        t = s.get("target", {})
        r.update(reached=t.get("reached", False), steps=t.get("step") or s.get("step"),
                 tokens=t.get("tokens") or s.get("tokens"), loss=t.get("val_loss") or s.get("val_loss"))
    else:
        tpath = os.path.join(out, name + ".json")
        t = json.load(open(tpath)) if os.path.exists(tpath) else {}
        r.update(reached=t.get("reached", False), steps=t.get("steps"), tokens=t.get("tokens"),
                 loss=t.get("val_loss"))
    rows.append(r)
base = next((r for r in rows if r["name"] == "torch-fp32" and r["reached"]), None)
fmt = lambda v, f: "unknown" if v is None else format(v, f)
lines = [f"Validation loss {target}: {where}", "",
         "| run | reached | steps | tokens | seconds | joules | gCO2e | val loss | J vs PyTorch fp32 |",
         "|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    est = " (estimated)" if r["estimated"] else ""
    ratio = (format(r["joules"] / base["joules"], ".2f") + "x"
             if base and r["reached"] and r["joules"] and base["joules"] else "-")
    lines.append(f"| {r['name']} | {'yes' if r['reached'] else 'NO'} | {fmt(r['steps'], 'd')} | "
                 f"{fmt(r['tokens'], 'd')} | {fmt(r['seconds'], '.1f')} | {fmt(r['joules'], '.0f')}{est} | "
                 f"{fmt(r['g'], '.3g')} | {fmt(r['loss'], '.4f')} | {ratio} |")
if any(not r["reached"] for r in rows):
    lines.append("")
    lines.append("A run marked NO stopped before the target: its seconds and joules are not to target.")
if any(r["estimated"] for r in rows):
    lines.append("")
    lines.append("Joules are ESTIMATED (no energy counter on this machine: CPU utilization x TDP): "
                 "they follow time, not measured power.")
text = "\n".join(lines)
print(text)
open(os.path.join(out, "table.md"), "w").write(text + "\n")
EOF
# the report of all runs, greentrain's and PyTorch's, each with the one meter's joules
measured=()
for v in $variants; do [ -f "$out/$v.measure.json" ] && measured+=("$v"); done
if [ ${#measured[@]} -gt 0 ]; then
  rm -rf "$out/report-runs"
  mapfile -t report_runs < <("$python" bench/e2t_report_runs.py "$out" "${measured[@]}")
  [ ${#report_runs[@]} -gt 0 ] && "$gt" report "${report_runs[@]}" -o "$out/report.html"
fi
echo "table: $out/table.md"
