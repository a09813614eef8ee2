#!/usr/bin/env bash
# bench/gpu-check.sh: greentrain's check on a machine with one NVIDIA GPU, in at most 7 minutes
# of that machine's time (GT_CHECK_BUDGET_S, default 420), so that a second, targeted run fits
# in the same 15-minute lease. Nothing is lost when it is cut short: after every stage it
# rewrites the only two files of OUT_DIR, results.json (every stage so far: status, figures,
# the tails of its logs) and logs.tgz (every log and table), and a trap rewrites them on TERM
# and INT; the whole script runs under `timeout` below the budget.
#
#   bench/gpu-check.sh [--rehearse] [--dry-run] [--stages 0,1,...] OUT_DIR
#   bench/gpu-check.sh --prepare [DIR]    (here: build what travels; default DIR gpu-prepared)
#
# --prepare builds, on this machine (Debian 12 + nvcc 13.0, as on the GPU machines), the CUDA
# tree for sm_90 without oneDNN (greentrain, the op test, the GPU engine tests, the cuBLASLt
# peak and the kernel benchmark; libstdc++ linked statically, stripped, the shared libraries
# they need beside them) and the Debian packages a rebuild needs, into DIR (ignored by git,
# under 64 MiB: carry it with the checkout). On the GPU machine the check runs DIR's binaries
# and rebuilds from source only if they do not start there.
#
# Stages, in the order they run (those needing no build run first):
#   0 gpu-state     read-only GPU state (nvidia-smi -q): clocks, power limits, processes. Nothing
#                   is ever changed: no clocks, no power limit, no reset.
#   1 build         the prepared binaries, or a rebuild (CMake, ninja, the prepared packages)
#   5 matmul-peak   the measured bf16 cuBLASLt peak beside the datasheet figure
#   8 kernel-bench  every own kernel with CUDA events at GPT-2 124M and XL shapes (ms, GB/s,
#                   TFLOP/s) beside the measured copy bandwidth
#   2 op-test       every op on `cuda` against `ref`, and the GPU training/fp8 engine tests
#   3 losses        20 fp32 steps of a small model on `cuda` and on `ref`, per-step losses
#   4 gpt2-124m     GPT-2 124M bf16 with fusion: tokens/s, MFU, NVML joules per token, beside
#                   PyTorch eager and torch.compile where PyTorch with CUDA is importable
#   6 fp8-vs-bf16   GPT-2 XL, 50 steps each: tokens/s ratio and loss after 50 steps
#   9 sanitizer     compute-sanitizer memcheck (fp32, bf16, fp8) and racecheck (bf16) on 3
#                   steps of a tiny model, where the machine allows it (Firecracker: yes;
#                   gVisor: no, and the stage says so)
#   7 ablate        `greentrain ablate` on the GPU, if time is left
# A stage that cannot run records "skipped" and why; one that runs past its share of the
# budget is stopped and recorded as such.
#
# --rehearse   every stage on the CPU: `cuda-emu` (the CUDA backend's code and kernels on the
#              SIMT runtime) with tiny shapes, the binaries of GT_CHECK_BUILD_DIR (default
#              build); checks the script's plumbing in CI; every document says "rehearsal".
# --dry-run    print the commands instead of running them.
# --stages L   only the stages in the comma-separated list L.
# Environment: GT_CHECK_BUDGET_S (420), GT_CHECK_PREPARED (gpu-prepared), GT_CHECK_BUILD_DIR
# (build-gpu; build with --rehearse), GT_CHECK_JOBS (nproc), GT_CHECK_PYTHON (a Python with
# PyTorch for stage 4), GT_CHECK_WORK (the work folder: default a temporary one).
set -uo pipefail
{ # read whole before it runs: a checkout changed under a running check is harmless
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root="$(pwd)"

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-2}"
}

dry=0 rehearse=0 prepare="" out="" stages="0,1,5,8,2,3,4,6,9,7"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --rehearse) rehearse=1 ;;
    --stages) stages="${2:?--stages needs a list, e.g. 1,4}"; shift ;;
    --prepare) prepare="${2:-gpu-prepared}"; [ $# -gt 1 ] && shift ;;
    -h | --help) usage 0 ;;
    -*) echo "gpu-check.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$out" ] || { echo "gpu-check.sh: one OUT_DIR only ('$out', '$1')" >&2; usage; }
       out="$1" ;;
  esac
  shift
done

# The Debian 12 packages a rebuild needs beyond the CUDA toolkit (headers, CMake configurations
# and the shared libraries of fmt, toml++, SentencePiece and PCRE2; xxHash's header).
deb_packages=(libfmt-dev libfmt9 libtomlplusplus-dev libtomlplusplus3 libcli11-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libsentencepiece-dev libsentencepiece0
  libpcre2-dev libpcre2-8-0 libxxhash-dev libxxhash0 pkgconf pkgconf-bin libpkgconf3)

if [ -n "$prepare" ]; then
  exec bash bench/gpu-prepare.sh "$prepare" "${deb_packages[@]}"
fi

[ -n "$out" ] || { echo "gpu-check.sh: OUT_DIR is missing" >&2; usage; }
command -v python3 > /dev/null || { echo "gpu-check.sh: python3 is needed (bench/gpu_check.py)" >&2; exit 1; }
budget="${GT_CHECK_BUDGET_S:-420}"
# the whole check under `timeout` (TERM a minute before the hard limit; the trap publishes)
if [ -z "${GT_CHECK_TIMED:-}" ] && [ "$dry" = 0 ]; then
  export GT_CHECK_TIMED=1
  exec timeout --kill-after=20 "$((budget + 40))" bash "$0" "$@" \
    $([ "$rehearse" = 1 ] && echo --rehearse) --stages "$stages" "$out"
fi
start=$(date +%s)
prepared="${GT_CHECK_PREPARED:-gpu-prepared}"
build="${GT_CHECK_BUILD_DIR:-$([ "$rehearse" = 1 ] && echo build || echo build-gpu)}"
jobs="${GT_CHECK_JOBS:-$(nproc)}"
work="${GT_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gt-check.XXXXXX")}"
logs="$work/logs"
helper=(python3 "$root/bench/gpu_check.py")
rflag=()
[ "$rehearse" = 1 ] && rflag=(--rehearse)
if [ "$dry" = 0 ]; then
  mkdir -p "$out" "$logs" || exit 1
  # OUT_DIR holds the two result files only
  find "$out" -mindepth 1 -maxdepth 1 ! -name results.json ! -name logs.tgz -exec rm -rf {} +
fi

left() { echo $((budget - ($(date +%s) - start))); }
want() { [[ ",$stages," == *",$1,"* ]]; }
q() { printf '%q ' "$@"; }
secs_since() { echo $(($(date +%s) - $1)); }

publish() {  # results.json and logs.tgz from what the work folder holds now
  [ "$dry" = 1 ] && return 0
  "${helper[@]}" publish "$work" "$out" "${rflag[@]}" --budget "$budget" \
    --elapsed "$(($(date +%s) - start))" --state "${1:-running}" > /dev/null 2>&1 ||
    echo "gpu-check.sh: could not write $out/results.json" >&2
}
on_signal() {
  echo "gpu-check.sh: stopped by a signal after $(($(date +%s) - start)) s; results in $out" >&2
  jobs -p | xargs -r kill 2> /dev/null
  publish "stopped by a signal"
  exit 143
}
trap on_signal TERM INT

# run LOG SECONDS CMD...: CMD under `timeout`, output in LOG; sets rc
run() {
  local log=$1 secs=$2
  shift 2
  if [ "$dry" = 1 ]; then echo "+ timeout ${secs}s $(q "$@")> $log"; rc=0; return 0; fi
  echo "  $(date -u +%H:%M:%S) $(q "$@")" | cut -c1-200
  timeout --kill-after=10 "$secs" "$@" > "$log" 2>&1
  rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then echo "    (stopped by the ${secs} s limit)" >> "$log"; fi
  return 0
}
# report SUBCOMMAND ARGS...: the stage's document and table (bench/gpu_check.py), then publish
report() {
  local sub=$1
  shift
  if [ "$dry" = 1 ]; then echo "+ $(q "${helper[@]}" "$sub" "$work" "$@")"; return 0; fi
  "${helper[@]}" "$sub" "$work" "$@" "${rflag[@]}"
  publish
}
skip() { report skip "$1" "$2" --seconds 0; }
# limit STAGE CAP MIN: lim = CAP seconds or what the budget has left; records a skip when that
# is under MIN
limit_q() {
  local l=$(($(left) - 10))
  lim=$(($1 < l ? $1 : l))
  [ "$lim" -ge "$2" ]
}
limit() {
  limit_q "$2" "$3" && return 0
  skip "$1" "time budget: $((lim + 10)) s left of GT_CHECK_BUDGET_S=$budget, the stage needs at least $3 s"
  return 1
}

# ---- the GPU (read-only queries) ---------------------------------------------------------
gpu="${CUDA_VISIBLE_DEVICES:-0}"
gpu="${gpu%%,*}"
have_gpu=0
if [ "$rehearse" = 0 ] && command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
  have_gpu=1
fi
gpu_name="" cc="" mem_mib=0
if [ "$have_gpu" = 1 ]; then
  IFS=',' read -r gpu_name mem_mib cc < <(nvidia-smi -i "$gpu" --query-gpu=name,memory.total,compute_cap --format=csv,noheader,nounits)
  gpu_name="$(echo "$gpu_name" | xargs)" mem_mib="$(echo "$mem_mib" | xargs)" cc="$(echo "$cc" | xargs)"
fi
nvcc_bin="$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })"
arch="${cc/./}"
[ -n "$arch" ] || arch=90
peak="" peak_source=""
IFS=$'\t' read -r peak peak_source < <("${helper[@]}" peak-of "$gpu_name")
[ "$peak" = None ] && peak=""
fp8_peak=""
IFS=$'\t' read -r fp8_peak _ < <("${helper[@]}" peak-of --precision fp8 "$gpu_name")
[ "$fp8_peak" = None ] && fp8_peak=""
mem_gib=$((mem_mib / 1024))
# the machine's runtime: compute-sanitizer and ncu work on Firecracker microVMs, not under gVisor
runtime=other
if dmesg 2> /dev/null | grep -qi gvisor || grep -qi gvisor /proc/version 2> /dev/null; then
  runtime=gvisor
elif grep -qi firecracker /proc/cpuinfo /sys/devices/virtual/dmi/id/* 2> /dev/null ||
  [ -e /dev/vda ] && grep -q virtio /proc/interrupts 2> /dev/null; then
  runtime=firecracker
fi
echo "gpu-check.sh: ${gpu_name:-no GPU} (compute ${cc:-?}, ${mem_gib} GiB, $runtime), budget ${budget} s, work $work, results $out"
publish

# ---- stage 0: read-only state ------------------------------------------------------------
if want 0; then
  if [ "$have_gpu" = 1 ]; then
    t=$(date +%s)
    run "$logs/00-nvidia-smi-q.txt" 30 nvidia-smi -q -i "$gpu"
    report gpu-state --gpu "$gpu" --smi-q "$logs/00-nvidia-smi-q.txt" \
      --nvcc "$([ -n "$nvcc_bin" ] && "$nvcc_bin" --version | tail -1)" \
      --cpu "$(lscpu | sed -n 's/^Model name: *//p' | head -1) ($runtime)" --cores "$(nproc)" \
      --visible "${CUDA_VISIBLE_DEVICES:-}" --seconds "$(secs_since "$t")"
  else
    skip 0 "no NVIDIA GPU: nvidia-smi is missing or lists none$([ "$rehearse" = 1 ] && echo ' (rehearsal)')"
  fi
fi

# ---- stage 1: the binaries ---------------------------------------------------------------
bin=""  # where greentrain and the tests are
lib_path=""
if want 1 || true; then
  t=$(date +%s)
  why=""
  # a prepared folder that would pass 64 MiB travels packed (gpu-prepare.sh): unpacked here
  if [ "$rehearse" = 0 ] && [ -f "$prepared/pack.tar.xz" ] && [ ! -d "$prepared/bin" ]; then
    tar -C "$prepared" -xJf "$prepared/pack.tar.xz" 2> "$logs/01-unpack.log" ||
      "${GT_CHECK_PYTHON:-python3}" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$prepared/pack.tar.xz" "$prepared" 2>> "$logs/01-unpack.log" || true
  fi
  if [ "$rehearse" = 1 ]; then
    bin="$build"
    [ -x "$bin/src/cli/greentrain" ] || why="no $bin/src/cli/greentrain: build the tree first (cmake --build $build)"
    want 1 && report build --rc "$([ -z "$why" ] && echo 0 || echo 1)" --log /dev/null \
      --cmake-line "(the CI build in $build)" --onednn "$(grep -q '^GT_ONEDNN:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null && echo ON || echo OFF)" \
      --arch none --reason "$why" --seconds "$(secs_since "$t")"
  elif [ -x "$prepared/bin/greentrain" ] && LD_LIBRARY_PATH="$prepared/lib" "$prepared/bin/greentrain" --version > "$logs/01-prepared.log" 2>&1; then
    bin="$prepared/bin" lib_path="$root/$prepared/lib"
    want 1 && report build --rc 0 --log "$logs/01-prepared.log" --cmake-line "(prepared: $(head -1 "$prepared/BUILD.txt" 2> /dev/null))" \
      --onednn OFF --arch 90 --seconds "$(secs_since "$t")"
  else
    [ -x "$prepared/bin/greentrain" ] && why="the prepared binaries do not start here ($(tail -1 "$logs/01-prepared.log" 2> /dev/null)); rebuilt"
    deps=() found=()
    if [ -d "$prepared/debs" ]; then
      prefix="$work/deps-prefix"
      mkdir -p "$prefix"
      for f in "$prepared"/debs/*.deb; do
        dpkg -x "$f" "$prefix" 2> /dev/null || "${helper[@]}" unpack-deb "$f" "$prefix"
      done
      paths="$prefix/usr"
      for d in "$prefix"/usr/lib/*-linux-gnu; do [ -d "$d" ] && paths="$paths;$d"; done
      deps=("-DCMAKE_PREFIX_PATH=$paths")
      for d in "$prefix"/usr/lib/*-linux-gnu/pkgconfig "$prefix"/usr/share/pkgconfig; do
        [ -d "$d" ] && export PKG_CONFIG_PATH="$d${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
      done
      export PKG_CONFIG_SYSROOT_DIR="$prefix"
      lib_path="$(ls -d "$prefix"/usr/lib/*-linux-gnu | head -1)"
    fi
    args=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGT_ONEDNN=OFF -DGT_BUILD_PYTHON=OFF
      -DGT_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" "${deps[@]}")
    command -v ninja > /dev/null && [ ! -f "$build/CMakeCache.txt" ] && args+=(-G Ninja)
    [ -n "$nvcc_bin" ] && args+=("-DCMAKE_CUDA_COMPILER=$nvcc_bin")
    if limit 1 300 60; then
      run "$logs/01-configure.log" 120 cmake "${args[@]}"
      if [ $rc = 0 ] && limit_q 300 60; then
        run "$logs/01-build.log" "$lim" cmake --build "$build" -j "$jobs" --target greentrain \
          backend_ops_test engine_tests gt_cuda_matmul_peak gt_gpu_kernel_bench
      fi
      [ -x "$build/src/cli/greentrain" ] && bin="$build"
      report build --rc "$rc" --log "$logs/01-build.log" --cmake-line "$(q "${args[@]}")" \
        --onednn OFF --arch "$arch" --reason "$why" --seconds "$(secs_since "$t")"
    fi
  fi
fi
# where each binary is (a prepared folder is flat; a build tree is not)
bpath() {
  case "$1" in
    greentrain) [ -x "$bin/greentrain" ] && echo "$bin/greentrain" || echo "$bin/src/cli/greentrain" ;;
    backend_ops_test) [ -x "$bin/backend_ops_test" ] && echo "$bin/backend_ops_test" || echo "$bin/tests/backend/backend_ops_test" ;;
    engine_tests) [ -x "$bin/engine_tests" ] && echo "$bin/engine_tests" || echo "$bin/tests/engine/engine_tests" ;;
    *) [ -x "$bin/$1" ] && echo "$bin/$1" || echo "$bin/bench/$1" ;;
  esac
}
[ -n "$lib_path" ] && export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN 9 for train.attention = cudnn (loaded at run time): a system one, or else the one
# PyTorch's wheels bring (site-packages/nvidia/cudnn/lib), whose folder goes on the path
cudnn_dir=""
if [ "$rehearse" = 0 ] && ! ldconfig -p 2> /dev/null | grep -q 'libcudnn\.so\.9'; then
  for p in ${GT_CHECK_PYTHON:-} python3 /usr/bin/python3; do
    command -v "$p" > /dev/null || continue
    cudnn_dir="$("$p" -c 'import nvidia.cudnn as c, os; print(next(os.path.join(d, "lib") for d in c.__path__ if os.path.exists(os.path.join(d, "lib", "libcudnn.so.9"))))' 2> /dev/null)" && break
  done
  # cuDNN compiles its fused attention at run time with NVRTC: the wheel's, where there is one
  if [ -n "$cudnn_dir" ]; then
    nvrtc_dir="$(cd "$cudnn_dir/../.." 2> /dev/null && ls -d "$PWD"/cuda_nvrtc/lib 2> /dev/null | head -1)"
    [ -n "$nvrtc_dir" ] && cudnn_dir="$cudnn_dir:$nvrtc_dir"
  fi
  [ -n "$cudnn_dir" ] && export LD_LIBRARY_PATH="$cudnn_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
gt="$(bpath greentrain)"
dev=$([ "$rehearse" = 1 ] && echo cuda-emu || echo cuda)
needs() {  # needs STAGE BINARY: 0 when the stage can run, else records why not
  if [ "$rehearse" = 0 ] && [ "$have_gpu" = 0 ] && [ "$dry" = 0 ]; then
    skip "$1" "no NVIDIA GPU visible (nvidia-smi is missing or lists none)"
    return 1
  fi
  if [ "$dry" = 0 ] && [ ! -x "$2" ]; then skip "$1" "no $2: the build did not make it"; return 1; fi
}

# training configuration: toml NAME LAYERS HEADS WIDTH CONTEXT VOCAB BATCH STEPS DATA
toml() {
  [ "$dry" = 1 ] && { echo "+ write $work/$1.toml: $2 layers, $3 heads, $4 wide, context $5, vocab $6, batch $7, $8 steps"; return; }
  cat > "$work/$1.toml" << EOF
[model]
n_layer = $2
n_head = $3
n_embd = $4
block_size = $5
vocab_size = $6
[train]
batch_size = $7
max_steps = $8
learning_rate = 6e-4
min_lr = 6e-5
warmup_steps = $(($8 < 20 ? 2 : 10))
weight_decay = 0.1
grad_clip = 1.0
eval_interval = 0
eval_steps = 1
checkpoint_interval = 0
log_interval = 1
seed = 1337
[data]
path = "$9"
format = "llmc"
val_fraction = 0.05
EOF
}
shard() {  # shard NAME TOKENS VOCAB
  [ "$dry" = 1 ] && return
  [ -f "$work/$1.bin" ] || "${helper[@]}" shard "$work/$1.bin" --tokens "$2" --vocab "$3"
}
# train_until NAME CONFIG SECONDS LAST_STEP ARGS...: a run killed once LAST_STEP is logged
# (what the stage reads is there: losses, tokens/s, energy; GPT-2 XL's final checkpoint would
# take longer than its steps); rc 0 when LAST_STEP was reached
train_until() {
  local name=$1 cfg=$2 secs=$3 last=$4 pid t0 reached=0
  shift 4
  if [ "$dry" = 1 ]; then echo "+ $(q "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@")"; rc=0; return; fi
  rm -rf "${work:?}/$name"
  echo "  $(date -u +%H:%M:%S) $(q "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@")" | cut -c1-200
  "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@" > "$logs/$name.log" 2>&1 &
  pid=$!
  t0=$(date +%s)
  while kill -0 "$pid" 2> /dev/null; do
    if grep -q "^{\"step\":$last," "$work/$name/metrics.jsonl" 2> /dev/null; then
      kill -KILL "$pid" 2> /dev/null
      reached=1
      break
    fi
    if [ $(($(date +%s) - t0)) -ge "$secs" ]; then
      kill -TERM "$pid" 2> /dev/null
      sleep 5
      kill -KILL "$pid" 2> /dev/null
      echo "    (stopped by the ${secs} s limit)" >> "$logs/$name.log"
      break
    fi
    sleep 0.5
  done
  wait "$pid" 2> /dev/null
  rc=$?
  [ "$reached" = 1 ] && rc=0
  find "$work/$name" -name '*.safetensors' -delete 2> /dev/null
}

if [ "$rehearse" = 1 ]; then
  small=(2 2 32 32 512 4 8) g2=(2 2 32 32 512 2 6) xl=(2 2 32 32 512 2 6) mid=(2 2 32 32 512 2)
  big_vocab=512 big_tokens=40000 small_tokens=40000
else
  B=$((mem_gib >= 70 ? 32 : (mem_gib >= 35 ? 16 : 8)))
  BX=$((mem_gib >= 120 ? 8 : (mem_gib >= 70 ? 4 : 2)))
  small=(2 2 64 64 512 4 20) g2=(12 12 768 1024 50304 "$B" 50) xl=(48 25 1600 1024 50304 "$BX" 50)
  mid=(8 8 512 512 50304 16)
  big_vocab=50304 big_tokens=2000000 small_tokens=200000
fi

# ---- stage 5: the cuBLASLt bf16 peak -------------------------------------------------------
measured=""
if want 5; then
  peakbin="$(bpath gt_cuda_matmul_peak)"
  if [ "$rehearse" = 1 ]; then
    skip 5 "rehearsal: no GPU"
  elif needs 5 "$peakbin" && limit 5 60 15; then
    t=$(date +%s)
    run "$logs/05-matmul-peak.out" "$lim" "$peakbin" 8192 20 10 0
    report peak --result "$logs/05-matmul-peak.out" --rc "$rc" ${peak:+--peak "$peak"} \
      --source "$peak_source" --seconds "$(secs_since "$t")"
    [ "$dry" = 1 ] || measured="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["measured"]["median_tflops"])' "$work/05-matmul-peak.json" 2> /dev/null)"
  fi
fi

# ---- stage 8: every own kernel -------------------------------------------------------------
if want 8; then
  kb="$(bpath gt_gpu_kernel_bench)"
  if [ "$rehearse" = 1 ]; then
    skip 8 "rehearsal: no GPU"
  elif needs 8 "$kb" && limit 8 90 20; then
    t=$(date +%s)
    run "$logs/08-kernel-bench.out" "$lim" "$kb" all
    report kernel-bench --result "$logs/08-kernel-bench.out" --rc "$rc" --seconds "$(secs_since "$t")"
  fi
fi

# ---- stage 2: the op test and the GPU engine tests ----------------------------------------
if want 2; then
  optest="$(bpath backend_ops_test)"
  # the backend's tests (BackendOps.*/cuda) and its rows of the op table (*/cuda_fp32_* ...)
  filter="*/cuda:*/cuda_fp*:*/cuda_bf16_*"
  # the rehearsal runs the quick gradient cases only (ctest ran the whole op test on cuda-emu)
  [ "$rehearse" = 1 ] && filter="*GradientsMatchFiniteDifferences/cuda_emu"
  if needs 2 "$optest" && limit 2 120 20; then
    t=$(date +%s)
    run "$logs/02-op-test.log" "$lim" "$optest" "--gtest_filter=$filter" "--gtest_output=xml:$work/02-op-test.xml"
    report optest --xml "$work/02-op-test.xml" --log "$logs/02-op-test.log" --rc "$rc" \
      --filter "$filter" --seconds "$(secs_since "$t")"
    engine="$(bpath engine_tests)"
    if [ "$rehearse" = 0 ] && [ -x "$engine" ] && limit_q 120 30; then
      GT_BINARY="$(realpath "$gt")" run "$logs/02-gpu-tests.log" "$lim" "$engine" \
        "--gtest_filter=Device.CudaBackendOnAGpu*:Fp8.ProductsOnAGpu*:CudnnAttention.*" "--gtest_output=xml:$work/02-gpu-tests.xml"
      publish
    fi
  fi
fi

# ---- stage 3: 20 fp32 steps, device against ref ---------------------------------------------
if want 3 && needs 3 "$gt" && limit 3 90 20; then
  t=$(date +%s)
  shard small "$small_tokens" "${small[4]}"
  toml small "${small[@]}" "$work/small.bin"
  train_until "s3-a-$dev" small $((lim / 2)) "${small[6]}" --set "train.device=$dev" --set train.precision=fp32
  rc_a=$rc
  train_until "s3-b-ref" small $((lim / 2)) "${small[6]}" --set train.device=ref --set train.precision=fp32
  report losses --run-a "$work/s3-a-$dev" --run-b "$work/s3-b-ref" --dev-a "$dev" --dev-b ref \
    --log-a "$logs/s3-a-$dev.log" --log-b "$logs/s3-b-ref.log" --rc-a "$rc_a" --rc-b "$rc" \
    --steps "${small[6]}" --tol 1e-4 --seconds "$(secs_since "$t")"
fi

# ---- stage 4: GPT-2 124M bf16, beside PyTorch ------------------------------------------------
torch_python() {  # the first Python whose PyTorch has CUDA and scaled_dot_product_attention
  local p
  for p in ${GT_CHECK_PYTHON:-} python3 /usr/bin/python3; do
    command -v "$p" > /dev/null || continue
    "$p" -c 'import torch, torch.nn.functional as F, sys; sys.exit(0 if torch.cuda.is_available() and hasattr(F, "scaled_dot_product_attention") else 1)' 2> /dev/null && { echo "$p"; return; }
  done
}
if want 4 && needs 4 "$gt" && limit 4 200 40; then
  t=$(date +%s)
  shard big "$big_tokens" "$big_vocab"
  toml gpt2 "${g2[@]}" "$work/big.bin"
  train_until s4-gpt2-bf16 gpt2 $((lim < 100 ? lim : 100)) "${g2[6]}" --set "train.device=$dev" --set train.precision=bf16 --set train.fusion=on
  rc4=$rc
  g2args=(--run "$work/s4-gpt2-bf16" --log "$logs/s4-gpt2-bf16.log" --rc "$rc4" --steps "${g2[6]}" --precision bf16
    --batch "${g2[5]}" ${peak:+--peak "$peak"} ${measured:+--measured-peak "$measured"})
  # the same run with cuDNN's fused attention (train.attention = cudnn), where a GPU has it
  if [ "$rehearse" = 0 ] && limit_q 100 30; then
    train_until s4-gpt2-bf16-cudnn gpt2 $((lim < 80 ? lim : 80)) "${g2[6]}" --set "train.device=$dev" \
      --set train.precision=bf16 --set train.fusion=on --set train.attention=cudnn
    g2args+=(--cudnn-run "$work/s4-gpt2-bf16-cudnn" --cudnn-log "$logs/s4-gpt2-bf16-cudnn.log" --rc-cudnn "$rc")
  fi
  # the same run queued op by op (train.cuda_graph = off): what the step's graph gives
  if limit_q 100 30; then
    train_until s4-gpt2-bf16-nograph gpt2 $((lim < 80 ? lim : 80)) "${g2[6]}" --set "train.device=$dev" \
      --set train.precision=bf16 --set train.fusion=on --set train.cuda_graph=off
    g2args+=(--nograph-run "$work/s4-gpt2-bf16-nograph" --nograph-log "$logs/s4-gpt2-bf16-nograph.log" --rc-nograph "$rc")
  fi
  # where the step's time goes: 20 steps under GT_PROFILE (each op timed between two
  # synchronizations; the table is printed when the run ends, so it runs to its end)
  if [ "$rehearse" = 0 ] && limit_q 90 40; then
    [ "$dry" = 1 ] || rm -rf "$work/s4-profile"
    GT_PROFILE=1 run "$logs/s4-gpt2-profile.log" "$lim" "$gt" train "$work/gpt2.toml" --out "$work/s4-profile" \
      --set "train.device=$dev" --set train.precision=bf16 --set train.fusion=on --set train.max_steps=20
    g2args+=(--profile-log "$logs/s4-gpt2-profile.log")
  fi
  tp=""
  [ "$rehearse" = 0 ] && [ "$dry" = 0 ] && tp="$(torch_python)"
  treason="no Python here has PyTorch with CUDA (set GT_CHECK_PYTHON)"
  [ "$rehearse" = 1 ] && treason="rehearsal: PyTorch runs only on a GPU here"
  report gpt2 "${g2args[@]}" --torch-reason "$treason" --seconds "$(secs_since "$t")"
  if [ -n "$tp" ] && limit_q 150 60; then
    run "$logs/04-torch.log" "$lim" "$tp" bench/torch_gpt2_gpu.py --out "$work/04-torch.json" \
      --batch "${g2[5]}" --steps 20 --warmup 3 ${peak:+--peak-tflops "$peak"}
    report gpt2 "${g2args[@]}" --torch-json "$work/04-torch.json" --seconds "$(secs_since "$t")"
  fi
fi

# ---- stage 6: fp8 against bf16 on GPT-2 XL --------------------------------------------------
# (on an H200, 2026-12-04: bf16 took about 100 s for its 50 steps with the start, fp8 at
# 0.67x its speed more: bf16 gets 2/5 of the stage's share, fp8 what is left of it)
if want 6 && needs 6 "$gt" && limit 6 280 60; then
  t=$(date +%s)
  stage_lim=$lim
  shard big "$big_tokens" "$big_vocab"
  toml xl "${xl[@]}" "$work/big.bin"
  per=$((lim * 2 / 5))
  train_until s6-xl-bf16 xl "$per" "${xl[6]}" --set "train.device=$dev" --set train.precision=bf16 --set train.fusion=on
  rcb=$rc
  fp8skip=""
  [ -n "$cc" ] && [ "${cc%%.*}" -lt 9 ] && [ "$cc" != 8.9 ] && fp8skip="compute capability $cc: fp8 tensor cores need 8.9 or 9.0"
  fargs=(--bf16-run "$work/s6-xl-bf16" --bf16-log "$logs/s6-xl-bf16.log" --rc-bf16 "$rcb" --precision bf16
    --steps "${xl[6]}" --batch "${xl[5]}" ${peak:+--peak "$peak"} ${measured:+--measured-peak "$measured"}
    ${fp8_peak:+--fp8-peak "$fp8_peak"})
  if [ -z "$fp8skip" ]; then
    if limit_q $((stage_lim - $(secs_since "$t"))) 30; then
      train_until s6-xl-fp8 xl "$lim" "${xl[6]}" --set "train.device=$dev" --set train.precision=fp8 --set train.fusion=on
      fargs+=(--fp8-run "$work/s6-xl-fp8" --fp8-log "$logs/s6-xl-fp8.log" --rc-fp8 "$rc")
    else
      fp8skip="time budget: not enough left after the bf16 run"
    fi
  fi
  report fp8 "${fargs[@]}" ${fp8skip:+--fp8-skip "$fp8skip"} --seconds "$(secs_since "$t")"
fi

# ---- stage 9: compute-sanitizer ---------------------------------------------------------------
if want 9; then
  cs="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)"
  if [ "$rehearse" = 1 ]; then
    skip 9 "rehearsal: compute-sanitizer needs a GPU (the SIMT runtime's ASan and TSan builds cover the CPU side)"
  elif [ -z "$cs" ]; then
    skip 9 "no compute-sanitizer in the toolkit here"
  elif [ "$runtime" = gvisor ]; then
    skip 9 "this machine runs under gVisor, where compute-sanitizer cannot attach"
  elif needs 9 "$gt" && limit 9 150 40; then
    t=$(date +%s)
    shard small "$small_tokens" "${small[4]}"
    toml tiny 1 2 64 64 512 2 3 "$work/small.bin"
    runs=()
    for spec in memcheck:fp32 memcheck:bf16 memcheck:fp8 racecheck:bf16; do
      tool=${spec%%:*} prec=${spec##*:}
      limit_q 60 15 || break
      rm -rf "$work/s9-$tool-$prec"
      run "$logs/s9-$tool-$prec.log" "$lim" "$cs" --tool "$tool" --error-exitcode 3 "$gt" train "$work/tiny.toml" \
        --out "$work/s9-$tool-$prec" --set "train.device=$dev" --set "train.precision=$prec" --set train.fusion=on
      runs+=("$tool:$prec:$logs/s9-$tool-$prec.log:$rc")
    done
    report sanitizer --runs "${runs[@]}" --machine "$runtime" --seconds "$(secs_since "$t")"
  fi
fi

# ---- stage 7: the ablation on the GPU, if time is left -----------------------------------------
if want 7 && needs 7 "$gt" && limit 7 120 60; then
  t=$(date +%s)
  shard big "$big_tokens" "$big_vocab"
  toml mid "${mid[@]}" 30 "$work/big.bin"
  [ "$dry" = 1 ] || rm -rf "$work/s7-ablate"
  run "$logs/s7-ablate.log" "$lim" "$gt" ablate "$work/mid.toml" --steps 20 --out "$work/s7-ablate" \
    --order bf16,fusion,recompute --set "train.device=$dev"
  report ablate --dir "$work/s7-ablate" --log "$logs/s7-ablate.log" --rc "$rc" --device "$dev" \
    --model "GPT ${mid[0]} layers, ${mid[2]} wide, context ${mid[3]}, vocabulary ${mid[4]}, batch ${mid[5]}" \
    --seconds "$(secs_since "$t")"
fi

publish done
echo
echo "gpu-check.sh: $(($(date +%s) - start)) s of ${budget}; results in $out (results.json, logs.tgz)"
[ "$dry" = 1 ] || cat "$work/summary.txt" 2> /dev/null
[ -z "${GT_CHECK_WORK:-}" ] && [ "$dry" = 0 ] && rm -rf "$work"
exit 0
}
