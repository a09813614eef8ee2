#!/usr/bin/env bash
# bench/gpu-check.sh --rehearse in CI: every stage of the GPU check on cuda-emu (the CUDA
# backend's code and kernels on the SIMT runtime) with tiny shapes, from this build. Checks
# that the output folder holds exactly results.json and logs.tgz, that results.json records
# every stage (those that need a GPU as skipped, with the reason), that the stages that run on
# cuda-emu pass, and that a check stopped by SIGTERM still leaves both files, complete.
#   gpu_check_rehearsal.sh BUILD_DIR
set -uo pipefail
build="$(cd "${1:?usage: gpu_check_rehearsal.sh BUILD_DIR}" && pwd)"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

GT_CHECK_BUILD_DIR="$build" GT_CHECK_BUDGET_S=400 bash bench/gpu-check.sh --rehearse "$tmp/out" > "$tmp/log" 2>&1
rc=$?
[ $rc = 0 ] || { tail -30 "$tmp/log"; fail "gpu-check.sh --rehearse exited $rc"; }
files="$(cd "$tmp/out" && ls -A | tr '\n' ' ')"
[ "$files" = "logs.tgz results.json " ] || fail "the output folder holds '$files', not exactly logs.tgz results.json"
python3 - "$tmp/out/results.json" << 'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["rehearsal"] is True and doc["state"] == "done", doc.get("state")
by = {s["name"]: s for s in doc["stages"]}
want_ok = ["build", "op-test", "losses", "gpt2-124m", "fp8-vs-bf16", "ablate"]
want_skip = ["gpu-state", "matmul-peak", "kernel-bench", "sanitizer"]
for n in want_ok:
    assert n in by, f"stage {n} missing"
    assert by[n]["status"] == "ok", f"stage {n}: {by[n]['status']}: {by[n].get('reason')}"
for n in want_skip:
    assert by[n]["status"] == "skipped" and by[n].get("reason"), f"stage {n}: {by[n]}"
assert all(s["rehearsal"] for s in doc["stages"])
assert by["losses"]["within_tolerance"], by["losses"]["headline"]
assert doc["log_tails"], "no log tails"
print("results.json: %d stages, %s s" % (len(doc["stages"]), doc["elapsed_s"]))
PY
# the listing first: `grep -q` ends at the first match, and under pipefail tar's SIGPIPE would fail
listing="$(tar -tzf "$tmp/out/logs.tgz")" || fail "logs.tgz is not a readable tar.gz"
grep -q 'gpu-check/logs/' <<< "$listing" || fail "logs.tgz holds no logs"

# the helper's figures: each precision's own datasheet peak, and a GPU domain without energy
# makes the GPU's joules unknown (null with a reason), not a smaller sum
python3 - "$tmp" << 'PY' || fail "gpu_check.py's peaks or GPU energy"
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("gpu_check", "bench/gpu_check.py")
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
assert g.datasheet_peak("NVIDIA H200")[0] == 989.0
assert g.datasheet_peak("NVIDIA H200", "fp8")[0] == 1979.0
assert g.datasheet_peak("NVIDIA H100 PCIe", "fp8")[0] == 1513.0
assert g.datasheet_peak("NVIDIA A100-SXM4-80GB", "fp8")[0] is None
run = os.path.join(sys.argv[1], "run-null-gpu")
os.makedirs(run)
gpu = lambda j: {"domain": "gpu", "sensor": "nvml", "energy_j": j, "avg_power_w": 300.0}
json.dump({"tokens": 1000, "energy": {"method": "counters", "domains": [gpu(500.0), gpu(None)]}},
          open(os.path.join(run, "summary.json"), "w"))
r = g.train_stats(run, 989.0, None, 0)
assert r["gpu_joules_per_token_run"] is None and r["gpu_energy_unknown_reason"], r
json.dump({"tokens": 1000, "energy": {"method": "counters", "domains": [gpu(500.0), gpu(300.0)]}},
          open(os.path.join(run, "summary.json"), "w"))
assert g.train_stats(run, 989.0, None, 0)["gpu_joules_per_token_run"] == 0.8
PY

# stopped by a signal: both files still there and readable
rm -rf "$tmp/out2"
GT_CHECK_BUILD_DIR="$build" GT_CHECK_BUDGET_S=400 bash bench/gpu-check.sh --rehearse --stages 0,1,3,4 "$tmp/out2" > "$tmp/log2" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  grep -q '"name": "build"' "$tmp/out2/results.json" 2> /dev/null && break
  sleep 0.1
done
pkill -TERM -P "$pid" 2> /dev/null
kill -TERM "$pid" 2> /dev/null
wait "$pid"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["stages"], d' "$tmp/out2/results.json" ||
  fail "no readable results.json after SIGTERM"
[ -s "$tmp/out2/logs.tgz" ] || fail "no logs.tgz after SIGTERM"
echo "PASS"
