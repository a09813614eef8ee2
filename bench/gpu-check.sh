#!/usr/bin/env bash
# bench/gpu-check.sh: greentrain's check on a machine with one NVIDIA GPU, from a clean
# checkout, in at most 9 minutes (issue 14). Each stage writes its results to OUT_DIR as
# NN-name.json and NN-name.txt (a plain-text table) as soon as it ends, and OUT_DIR/summary.txt
# is refreshed after every stage, so a run cut short keeps every stage before the cut.
#
#   bench/gpu-check.sh [--dry-run] [--rehearse] [--stages 0,1,...] [--deps DIR] OUT_DIR
#   bench/gpu-check.sh --prepare DIR     (on a machine with Debian's package registry)
#
# Stages, in the order they run (5 runs early so that 4 can give MFU against it):
#   0 gpu-state    read-only GPU state: `nvidia-smi -q` into OUT_DIR, name, driver, power
#                  limits, clocks. Nothing is ever changed: no clocks, no power limit, no reset.
#   1 build        CMake for the GPU present (CMAKE_CUDA_ARCHITECTURES from its compute
#                  capability), GT_ONEDNN=ON where oneDNN is found else OFF, -j$(nproc), only
#                  greentrain, backend_ops_test and gt_cuda_matmul_peak.
#   5 matmul-peak  the GPU's measured bf16 cuBLASLt peak (bench/cuda_matmul_peak.cu) beside the
#                  datasheet figure (bench/gpu_check.py's table, with its source).
#   2 op-test      backend_ops_test --gtest_filter='*/cuda' (every op against `ref`), with XML.
#   3 losses       20 fp32 steps of a small model (configs/quickstart.toml's shape) on cuda and
#                  on cpu (ref without oneDNN): per-step losses, max |diff| against 1e-4.
#   4 gpt2-124m    GPT-2 124M (12 layers, 768 wide, 12 heads, context 1024, vocabulary 50304)
#                  in bf16 with fusion, 50 steps: tokens/s, MFU (datasheet and measured peak),
#                  NVML joules per token and watts; beside bench/torch_gpt2_gpu.py (eager and
#                  torch.compile) where PyTorch with CUDA is importable, with the ratios.
#   6 fp8-vs-bf16  GPT-2 XL (48 layers, 1600 wide, 25 heads) for 50 steps in bf16 and in fp8:
#                  tokens/s ratio and loss after 50 steps (fp8 skipped below compute 9.0).
#   7 ablate       `greentrain ablate` (fp32, +bf16, +fusion, +recompute) on a mid-size model
#                  (8 layers, 512 wide, context 512) with train.device=cuda.
# Tokens are written by bench/gpu_check.py as llm.c shards: a seeded Markov chain over the
# vocabulary (learnable, so losses fall; random enough for speed). A stage that cannot run
# (no GPU, no binary, not enough time left, fp8 below Hopper) records "skipped" and the reason.
#
# --dry-run    print every command instead of running it (GPU queries, which only read, still
#              run where nvidia-smi exists); writes nothing.
# --rehearse   run every stage on the CPU with tiny shapes (the GPU role goes to the cpu backend,
#              or ref without oneDNN): checks the script's plumbing where there is no GPU; its
#              figures say nothing about a GPU and every JSON says "rehearsal": true.
# --stages L   run only the stages in the comma-separated list L (e.g. 1,4 for a rerun).
# --prepare D  download the Debian packages the build needs (fmt, toml++, CLI11, nlohmann-json,
#              GoogleTest and their runtime libraries; < 30 MB) into D with `apt-get download`.
# --deps D     unpack D's packages into a private prefix (BUILD/deps-prefix, with `dpkg -x`, or
#              bench/gpu_check.py where dpkg is missing; never into /) and hand it to CMake.
# Environment: GT_CHECK_BUDGET_S (seconds for the whole run, default 540), GT_CHECK_BUILD_DIR
# (default build-gpu), GT_CHECK_JOBS (default nproc), GT_CHECK_ONEDNN (AUTO, ON or OFF),
# GT_CHECK_CUDA_ARCH (default: the GPU's compute capability), GT_CHECK_CMAKE_ARGS (more CMake
# arguments, split at spaces), GT_CHECK_PYTHON (a Python with PyTorch for stage 4),
# GT_CHECK_BUILD_S (the build's own limit, default 300 s).
set -uo pipefail
{ # the whole script is read before it runs: a checkout changed under a running check is harmless
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-2}"
}

dry=0 rehearse=0 deps="" prepare="" out="" stages="0,1,2,3,4,5,6,7"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --rehearse) rehearse=1 ;;
    --stages) stages="${2:?--stages needs a list, e.g. 1,4}"; shift ;;
    --deps) deps="${2:?--deps needs the folder --prepare wrote}"; shift ;;
    --prepare) prepare="${2:?--prepare needs a folder}"; shift ;;
    -h | --help) usage 0 ;;
    -*) echo "gpu-check.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$out" ] || { echo "gpu-check.sh: one OUT_DIR only ('$out', '$1')" >&2; usage; }
       out="$1" ;;
  esac
  shift
done

# The Debian 12 packages the build needs from outside the CUDA toolkit (headers, CMake
# configurations, and the shared libraries of fmt and toml++).
deb_packages=(libfmt-dev libfmt9 libtomlplusplus-dev libtomlplusplus3 libcli11-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev
  libsentencepiece-dev libsentencepiece0 libpcre2-dev libpcre2-8-0 pkgconf pkgconf-bin
  libpkgconf3)

# ---- --prepare ------------------------------------------------------------------------------
if [ -n "$prepare" ]; then
  mkdir -p "$prepare" && cd "$prepare" || exit 1
  if [ "$dry" = 1 ]; then echo "+ apt-get download ${deb_packages[*]}"; exit 0; fi
  apt-get download "${deb_packages[@]}" || { echo "gpu-check.sh --prepare: apt-get download failed" >&2; exit 1; }
  {
    # shellcheck source=/dev/null
    echo "# greentrain bench/gpu-check.sh --deps packages, $(date -u '+%Y-%m-%d %H:%M UTC'), $(. /etc/os-release && echo "$PRETTY_NAME")"
    for f in *.deb; do echo "$(sha256sum "$f" | cut -c1-64)  $(stat -c %s "$f")  $f"; done
  } > MANIFEST.txt
  kb=$(du -sk . | cut -f1)
  echo "gpu-check.sh --prepare: ${#deb_packages[@]} packages, ${kb} KiB in $(pwd)"
  [ "$kb" -lt 30720 ] || { echo "gpu-check.sh --prepare: ${kb} KiB is over the 30 MB limit" >&2; exit 1; }
  exit 0
fi

[ -n "$out" ] || { echo "gpu-check.sh: OUT_DIR is missing" >&2; usage; }
command -v python3 > /dev/null || { echo "gpu-check.sh: python3 is needed (bench/gpu_check.py writes the results)" >&2; exit 1; }
start=$(date +%s)
budget="${GT_CHECK_BUDGET_S:-540}"
build="${GT_CHECK_BUILD_DIR:-build-gpu}"
jobs="${GT_CHECK_JOBS:-$(nproc)}"
work="$out/work"
logs="$out/logs"
helper=(python3 bench/gpu_check.py)
[ "$dry" = 1 ] || mkdir -p "$out" "$work" "$logs" || exit 1
rflag=()
[ "$rehearse" = 1 ] && rflag=(--rehearse)

left() { echo $((budget - ($(date +%s) - start))); }
want() { [[ ",$stages," == *",$1,"* ]]; }
q() { printf '%q ' "$@"; }

# run LOG SECONDS CMD...: CMD under `timeout` (TERM, then KILL 15 s later), its output in LOG;
# sets rc. --dry-run prints it instead.
run() {
  local log=$1 secs=$2
  shift 2
  if [ "$dry" = 1 ]; then echo "+ timeout ${secs}s $(q "$@")> $log"; rc=0; return 0; fi
  echo "  $(date -u +%H:%M:%S) $(q "$@")" | cut -c1-220
  timeout --kill-after=15 "$secs" "$@" > "$log" 2>&1
  rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && echo "    (stopped by the ${secs} s limit)" >> "$log"
  return 0
}

# report SUBCOMMAND ARGS...: bench/gpu_check.py writes the stage's JSON and table.
report() {
  local sub=$1
  shift
  if [ "$dry" = 1 ]; then echo "+ $(q "${helper[@]}" "$sub" "$out" "$@")"; return 0; fi
  "${helper[@]}" "$sub" "$out" "$@" "${rflag[@]}"
}
skip() { report skip "$1" "$2" --seconds 0; }

# limit_q CAP MIN: sets lim to CAP seconds, or what the budget has left if less; returns 1
# when that is under MIN. limit STAGE CAP MIN: the same for a whole stage, recording the skip.
limit_q() {
  local l=$(($(left) - 5))
  lim=$(($1 < l ? $1 : l))
  [ "$lim" -ge "$2" ]
}
limit() {
  limit_q "$2" "$3" && return 0
  skip "$1" "time budget: $((lim + 5)) s left of GT_CHECK_BUDGET_S=$budget, the stage needs at least $3 s"
  return 1
}

secs_since() { echo $(($(date +%s) - $1)); }

# ---- the GPU (read-only queries) ----------------------------------------------------------
gpu="${CUDA_VISIBLE_DEVICES:-0}"
gpu="${gpu%%,*}"
have_gpu=0
if [ "$rehearse" = 0 ] && command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
  have_gpu=1
fi
gpu_name="" cc="" mem_mib=0
if [ "$have_gpu" = 1 ]; then
  IFS=',' read -r gpu_name mem_mib < <(nvidia-smi -i "$gpu" --query-gpu=name,memory.total --format=csv,noheader,nounits)
  gpu_name="$(echo "$gpu_name" | xargs)"
  mem_mib="$(echo "$mem_mib" | xargs)"
  cc="$(nvidia-smi -i "$gpu" --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | xargs)"
  [[ "$cc" =~ ^[0-9]+\.[0-9]+$ ]] || cc=""
elif [ "$dry" = 1 ] && [ "$rehearse" = 0 ]; then
  gpu_name="(GPU name)" cc="9.0" mem_mib=143771  # placeholders: this machine has no GPU
fi
nvcc_bin="$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })"
if [ -z "$cc" ] && [ -n "$nvcc_bin" ] && [ -x "$(dirname "$nvcc_bin")/__nvcc_device_query" ] && [ "$have_gpu" = 1 ]; then
  c="$("$(dirname "$nvcc_bin")/__nvcc_device_query" 2> /dev/null | cut -d, -f1)"
  [[ "$c" =~ ^[0-9]+$ ]] && cc="${c:0:${#c}-1}.${c: -1}"
fi
arch="${GT_CHECK_CUDA_ARCH:-${cc/./}}"
[ -n "$arch" ] || arch=90
peak="" peak_source=""
IFS=$'\t' read -r peak peak_source < <("${helper[@]}" peak-of "$gpu_name")
[ "$peak" = None ] && peak=""
mem_gib=$((mem_mib / 1024))
echo "gpu-check.sh: ${gpu_name:-no GPU} (compute ${cc:-?}, ${mem_gib} GiB), budget ${budget} s, results in $out"

# ---- stage 0: read-only state -------------------------------------------------------------
if want 0; then
  if [ "$have_gpu" = 1 ] || { [ "$dry" = 1 ] && [ "$rehearse" = 0 ]; }; then
    t=$(date +%s)
    run "$out/00-nvidia-smi-q.txt" 30 nvidia-smi -q -i "$gpu"
    report gpu-state --gpu "$gpu" --smi-q "$out/00-nvidia-smi-q.txt" \
      --nvcc "$([ -n "$nvcc_bin" ] && "$nvcc_bin" --version | tail -1)" \
      --cpu "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" --cores "$(nproc)" \
      --visible "${CUDA_VISIBLE_DEVICES:-}" --seconds "$(secs_since "$t")"
  else
    skip 0 "no NVIDIA GPU: nvidia-smi is missing or lists none$([ "$rehearse" = 1 ] && echo ' (rehearsal)')"
  fi
fi

# ---- stage 1: build -----------------------------------------------------------------------
gt="$build/src/cli/greentrain"
optest="$build/tests/backend/backend_ops_test"
peakbin="$build/bench/gt_cuda_matmul_peak"
onednn="${GT_CHECK_ONEDNN:-AUTO}"
if [ "$onednn" = AUTO ]; then  # a quick look; the configuration falls back to OFF if CMake disagrees
  onednn=OFF
  for d in /usr/lib/*/cmake/dnnl /usr/lib*/cmake/dnnl /usr/local/lib*/cmake/dnnl /opt/*/lib*/cmake/dnnl \
    ${DNNLROOT:+$DNNLROOT/lib*/cmake/dnnl}; do
    [ -e "$d/dnnl-config.cmake" ] || [ -e "$d/dnnlConfig.cmake" ] && onednn=ON && break
  done
fi

deps_args=() found=() prefix=""
unpack_deps() {
  prefix="$(cd "$(dirname "$build")" && pwd)/$(basename "$build")/deps-prefix"
  [ -d "$deps" ] || { echo "gpu-check.sh: --deps $deps: no such folder (run --prepare there first)" >&2; exit 1; }
  ls "$deps"/*.deb > /dev/null 2>&1 || { echo "gpu-check.sh: --deps $deps holds no .deb files" >&2; exit 1; }
  if [ "$dry" = 0 ]; then rm -rf "$prefix" && mkdir -p "$prefix"; fi
  for f in "$deps"/*.deb; do
    if command -v dpkg > /dev/null; then
      if [ "$dry" = 1 ]; then echo "+ dpkg -x $f $prefix"; else dpkg -x "$f" "$prefix" || exit 1; fi
    else
      if [ "$dry" = 1 ]; then echo "+ $(q "${helper[@]}" unpack-deb "$f" "$prefix")"; else "${helper[@]}" unpack-deb "$f" "$prefix" || exit 1; fi
    fi
  done
  local paths="$prefix/usr"
  for d in "$prefix"/usr/lib/*-linux-gnu; do [ -d "$d" ] && paths="$paths;$d"; done
  deps_args=("-DCMAKE_PREFIX_PATH=$paths")
  # SentencePiece and PCRE2 come through pkg-config: the prefix's .pc files, their /usr paths
  # rewritten into the prefix (PKG_CONFIG_SYSROOT_DIR), the prefix's pkg-config if none exists
  for d in "$prefix"/usr/lib/*-linux-gnu/pkgconfig "$prefix"/usr/share/pkgconfig; do
    [ -d "$d" ] && export PKG_CONFIG_PATH="$d${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  done
  export PKG_CONFIG_SYSROOT_DIR="$prefix"
  if ! command -v pkg-config > /dev/null && [ -x "$prefix/usr/bin/pkgconf" ]; then
    export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    deps_args+=("-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkgconf")
  fi
  # each package's configuration folder by name, so CMake takes the prefix's over the system's
  while IFS= read -r cfg; do
    local name
    name="$(basename "$cfg")"
    name="${name%Config.cmake}"
    name="${name%-config.cmake}"
    deps_args+=("-D${name}_DIR=$(dirname "$cfg")")
  done < <(find "$prefix" \( -name '*Config.cmake' -o -name '*-config.cmake' \) 2> /dev/null | sort)
}

if want 1; then
  t=$(date +%s)
  if limit 1 "$((${GT_CHECK_BUILD_S:-300} + 60))" 60; then
    [ -n "$deps" ] && unpack_deps
    targets=(greentrain backend_ops_test engine_tests cuda_host_math_test)
    base=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGT_BUILD_PYTHON=OFF -DGT_BUILD_BENCH=ON)
    if [ "$rehearse" = 1 ]; then
      base+=(-DGT_CUDA=OFF)
    else
      base+=(-DGT_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch")
      [ -n "$nvcc_bin" ] && base+=("-DCMAKE_CUDA_COMPILER=$nvcc_bin")
      targets+=(gt_cuda_matmul_peak)
    fi
    [ ! -f "$build/CMakeCache.txt" ] && command -v ninja > /dev/null && base+=(-G Ninja)
    # shellcheck disable=SC2206
    extra=(${GT_CHECK_CMAKE_ARGS:-})
    tests=ON
    for _ in 1 2 3; do
      args=("${base[@]}" "-DGT_ONEDNN=$onednn" "-DGT_BUILD_TESTS=$tests" "${deps_args[@]}" "${extra[@]}")
      run "$logs/01-configure.log" "$lim" cmake "${args[@]}"
      [ $rc = 0 ] && break
      if [ "$onednn" = ON ] && grep -qi 'dnnl\|OpenMP' "$logs/01-configure.log"; then
        onednn=OFF  # oneDNN or OpenMP not usable: build without the cpu backend
      elif [ "$tests" = ON ] && grep -q 'GTest' "$logs/01-configure.log"; then
        tests=OFF  # no GoogleTest: stage 2 will say so
        targets=(greentrain)
        [ "$rehearse" = 0 ] && targets+=(gt_cuda_matmul_peak)
      else
        break
      fi
    done
    configure_s=$(secs_since "$t")
    if [ "$rc" = 0 ]; then
      tb=$(date +%s)
      why=""
      if limit_q "${GT_CHECK_BUILD_S:-300}" 30; then
        run "$logs/01-build.log" "$lim" cmake --build "$build" -j "$jobs" --target "${targets[@]}"
      else
        rc=124 why="time budget: $((lim + 5)) s left after the configuration"
      fi
      build_s=$(secs_since "$tb")
      if [ "$dry" = 0 ]; then
        for k in fmt nlohmann_json tomlplusplus CLI11 GTest dnnl CUDAToolkit_BIN; do
          v="$(sed -n "s/^${k}_DIR:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1)"
          [ -n "$v" ] && found+=("$k=$v")
        done
      fi
      report build --rc "$rc" --log "$logs/01-build.log" --cmake-line "$(q "${args[@]}")" \
        --targets "${targets[@]}" --jobs "$jobs" --configure-s "$configure_s" --build-s "$build_s" \
        --onednn "$onednn" --arch "$([ "$rehearse" = 1 ] && echo none || echo "$arch")" \
        --deps-prefix "$prefix" --found "${found[@]}" --reason "$why" --seconds "$(secs_since "$t")"
    else
      report build --rc "$rc" --log "$logs/01-configure.log" --cmake-line "$(q "${args[@]}")" \
        --configure-s "$configure_s" --onednn "$onednn" --arch "$arch" --deps-prefix "$prefix" \
        --reason "cmake configuration failed (exit status $rc); see logs/01-configure.log" \
        --seconds "$(secs_since "$t")"
    fi
  fi
fi
# which backend plays which part
has_cpu=0
if [ "$dry" = 0 ] && [ -f "$build/CMakeCache.txt" ] && grep -q '^GT_ONEDNN:BOOL=ON' "$build/CMakeCache.txt"; then has_cpu=1; fi
[ "$dry" = 1 ] && [ "$onednn" = ON ] && has_cpu=1
half=bf16 ablate_order=bf16,fusion,recompute
if [ "$rehearse" = 1 ]; then
  dev=$([ $has_cpu = 1 ] && echo cpu || echo ref) cmp=ref
  # ref computes in fp32 only: the rehearsal's "bf16" runs are fp32 there
  [ "$dev" = ref ] && half=fp32 ablate_order=fusion,recompute
else
  dev=cuda cmp=$([ $has_cpu = 1 ] && echo cpu || echo ref)
fi
gpu_ok=$([ "$have_gpu" = 1 ] || [ "$rehearse" = 1 ] || [ "$dry" = 1 ] && echo 1 || echo 0)
no_gpu_reason="no NVIDIA GPU visible (nvidia-smi is missing or lists none)"
# needs STAGE BINARY: 0 when the stage can run; otherwise records why not
needs() {
  if [ "$gpu_ok" = 0 ]; then skip "$1" "$no_gpu_reason"; return 1; fi
  if [ "$dry" = 0 ] && [ ! -x "$2" ]; then
    skip "$1" "no $2: the build did not make it (see 01-build.txt)"
    return 1
  fi
}

# a training configuration: toml NAME LAYERS HEADS WIDTH CONTEXT VOCAB BATCH STEPS DATA
toml() {
  local f="$work/$1.toml"
  local text="# written by bench/gpu-check.sh
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
log_interval = 10
seed = 1337

[data]
path = \"$9\"
format = \"llmc\"
val_fraction = 0.05"
  if [ "$dry" = 1 ]; then echo "+ write $f: ${2} layers, ${3} heads, ${4} wide, context ${5}, vocabulary ${6}, batch ${7}, ${8} steps"; else echo "$text" > "$f"; fi
}
# shard NAME TOKENS VOCAB: an llm.c shard of Markov-chain tokens
shard() {
  if [ "$dry" = 1 ]; then echo "+ $(q "${helper[@]}" shard "$work/$1.bin" --tokens "$2" --vocab "$3")"; return; fi
  [ -f "$work/$1.bin" ] || "${helper[@]}" shard "$work/$1.bin" --tokens "$2" --vocab "$3"
}
# train NAME CONFIG SECONDS --set ...: a greentrain run in work/NAME (its checkpoint removed
# afterwards: GPT-2 XL's is 19 GB), log in logs/NAME.log; sets rc
train() {
  local name=$1 cfg=$2 secs=$3
  shift 3
  [ "$dry" = 1 ] || rm -rf "${work:?}/$name"
  run "$logs/$name.log" "$secs" "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@"
  [ "$dry" = 1 ] || find "$work/$name" -name '*.safetensors' -delete 2> /dev/null
}

# train_fast NAME CONFIG SECONDS LAST_STEP --set ...: as train, but killed (SIGKILL) as soon as
# metrics.jsonl holds LAST_STEP: what the stage reads is there already (losses, tokens/s,
# interval energy), and GPT-2 XL's final checkpoint (19 GB with the AdamW moments) would take
# longer than its 50 steps. rc is 0 when LAST_STEP was reached.
train_fast() {
  local name=$1 cfg=$2 secs=$3 last=$4 pid t0 reached=0
  shift 4
  if [ "$dry" = 1 ]; then
    echo "+ $(q "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@")> $logs/$name.log (killed once step $last is in metrics.jsonl, or after ${secs}s)"
    rc=0
    return 0
  fi
  rm -rf "${work:?}/$name"
  echo "  $(date -u +%H:%M:%S) $(q "$gt" train "$work/$cfg.toml" --out "$work/$name" "$@")" | cut -c1-220
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
      sleep 10
      kill -KILL "$pid" 2> /dev/null
      echo "    (stopped by the ${secs} s limit)" >> "$logs/$name.log"
      break
    fi
    sleep 0.5
  done
  wait "$pid"
  rc=$?
  if [ "$reached" = 1 ]; then
    rc=0
    echo "    (gpu-check.sh: killed after step $last was logged; no final checkpoint or summary.json)" >> "$logs/$name.log"
  fi
  find "$work/$name" -name '*.safetensors' -delete 2> /dev/null
}

# tiny shapes for --rehearse
if [ "$rehearse" = 1 ]; then
  small=(2 2 32 32 512 4 20) g2=(2 2 32 32 512 2 30) xl=(2 2 32 32 512 2 50) mid=(2 2 32 32 512 2)
  big_vocab=512 big_tokens=200000
else
  B=$((mem_gib >= 70 ? 32 : (mem_gib >= 35 ? 16 : 8)))
  BX=$((mem_gib >= 120 ? 8 : (mem_gib >= 70 ? 4 : 2)))
  small=(4 4 192 128 512 16 20) g2=(12 12 768 1024 50304 "$B" 50) xl=(48 25 1600 1024 50304 "$BX" 50)
  mid=(8 8 512 512 50304 16)
  big_vocab=50304 big_tokens=2000000
fi

# ---- stage 5 (run early): the measured bf16 peak ------------------------------------------
measured=""
if want 5; then
  if [ "$rehearse" = 1 ]; then
    skip 5 "rehearsal: no CUDA build"
  elif needs 5 "$peakbin" && limit 5 60 15; then
    t=$(date +%s)
    run "$out/05-matmul-peak.out" "$lim" "$peakbin" 8192 20 10 0
    report peak --result "$out/05-matmul-peak.out" --rc "$rc" ${peak:+--peak "$peak"} \
      --source "$peak_source" --seconds "$(secs_since "$t")"
    [ "$dry" = 1 ] || measured="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["measured"]["median_tflops"])' "$out/05-matmul-peak.json" 2> /dev/null)"
  fi
fi

# ---- stage 2: op test ---------------------------------------------------------------------
if want 2; then
  filter="*/${dev}"  # exactly the device (not cuda_emu, the CUDA code on the CPU)
  if needs 2 "$optest" && limit 2 120 20; then
    t=$(date +%s)
    run "$logs/02-op-test.log" "$lim" "$optest" "--gtest_filter=$filter" "--gtest_output=xml:$out/02-op-test.xml"
    report optest --xml "$out/02-op-test.xml" --log "$logs/02-op-test.log" --rc "$rc" \
      --filter "$filter" --seconds "$(secs_since "$t")"
    # the GPU training and fp8 tests (20-step losses against the CPU, bit-exact resume, fp8
    # products), and the host-side math; their XML beside the op test's
    engine="$build/tests/engine/engine_tests"
    if [ "$rehearse" = 0 ] && { [ -x "$engine" ] || [ "$dry" = 1 ]; }; then
      run "$logs/02-gpu-tests.log" 300 "$engine" \
        "--gtest_filter=Device.CudaBackendOnAGpu*:Fp8.ProductsOnAGpu*" \
        "--gtest_output=xml:$out/02-gpu-tests.xml"
      echo "  GPU training/fp8 tests: exit $rc (log $logs/02-gpu-tests.log, $out/02-gpu-tests.xml)"
    fi
  fi
fi

# ---- stage 3: 20 fp32 steps, device against cpu/ref ----------------------------------------
if want 3 && needs 3 "$gt" && limit 3 120 30; then
  t=$(date +%s)
  shard small 300000 "${small[4]}"
  toml small "${small[@]}" "$work/small.bin"
  train "s3-a-$dev" small $((lim / 2)) --set "train.device=$dev" --set train.precision=fp32
  rc_a=$rc
  train "s3-b-$cmp" small $((lim / 2)) --set "train.device=$cmp" --set train.precision=fp32
  report losses --run-a "$work/s3-a-$dev" --run-b "$work/s3-b-$cmp" --dev-a "$dev" --dev-b "$cmp" \
    --log-a "$logs/s3-a-$dev.log" --log-b "$logs/s3-b-$cmp.log" --rc-a "$rc_a" --rc-b "$rc" \
    --steps "${small[6]}" --tol 1e-4 --seconds "$(secs_since "$t")"
fi

# ---- stage 4: GPT-2 124M bf16, beside PyTorch ---------------------------------------------
torch_python() {  # the first Python whose PyTorch has CUDA and scaled_dot_product_attention
  local p
  for p in ${GT_CHECK_PYTHON:-} python3 /usr/bin/python3; do
    command -v "$p" > /dev/null || continue
    if "$p" -c 'import torch, torch.nn.functional as F, sys; sys.exit(0 if torch.cuda.is_available() and hasattr(F, "scaled_dot_product_attention") else 1)' 2> /dev/null; then
      echo "$p"
      return
    fi
  done
}
if want 4 && needs 4 "$gt" && limit 4 300 40; then
  t=$(date +%s)
  shard big "$big_tokens" "$big_vocab"
  toml gpt2 "${g2[@]}" "$work/big.bin"
  train s4-gpt2-bf16 gpt2 $((lim < 150 ? lim : 150)) --set "train.device=$dev" --set "train.precision=$half" --set train.fusion=on
  rc4=$rc
  g2args=(--run "$work/s4-gpt2-bf16" --log "$logs/s4-gpt2-bf16.log" --rc "$rc4" --steps "${g2[6]}" --precision "$half"
    --batch "${g2[5]}" ${peak:+--peak "$peak"} ${measured:+--measured-peak "$measured"})
  tp=""
  [ "$rehearse" = 0 ] && [ "$dry" = 0 ] && tp="$(torch_python)"
  treason="no Python here has PyTorch with CUDA and F.scaled_dot_product_attention (set GT_CHECK_PYTHON)"
  [ "$rehearse" = 1 ] && treason="rehearsal: PyTorch runs only on a GPU here"
  if [ -n "$tp" ] || [ "$dry" = 1 ]; then treason="not run: the time budget ran out first"; fi
  report gpt2 "${g2args[@]}" --torch-reason "$treason" --seconds "$(secs_since "$t")"
  if [ -n "$tp" ] || [ "$dry" = 1 ]; then
    if limit_q 200 60; then
      run "$logs/04-torch.log" "$lim" "${tp:-python3}" bench/torch_gpt2_gpu.py --out "$out/04-torch.json" \
        --batch "${g2[5]}" --steps 30 --warmup 3 ${peak:+--peak-tflops "$peak"}
      report gpt2 "${g2args[@]}" --torch-json "$out/04-torch.json" --seconds "$(secs_since "$t")"
    fi
  fi
fi

# ---- stage 6: fp8 against bf16 on GPT-2 XL ------------------------------------------------
if want 6 && needs 6 "$gt" && limit 6 330 60; then
  t=$(date +%s)
  shard big "$big_tokens" "$big_vocab"
  toml xl "${xl[@]}" "$work/big.bin"
  per=$((lim / 2 < 165 ? lim / 2 : 165))
  train_fast s6-xl-bf16 xl "$per" "${xl[6]}" --set "train.device=$dev" --set "train.precision=$half" --set train.fusion=on
  rcb=$rc
  fp8skip=""
  if [ "$rehearse" = 1 ]; then
    fp8skip="rehearsal: fp8 needs the CUDA backend"
  elif [ -n "$cc" ] && [ "${cc%%.*}" -lt 9 ]; then
    fp8skip="compute capability $cc: fp8 tensor cores need 9.0 (Hopper) or newer"
  fi
  fargs=(--bf16-run "$work/s6-xl-bf16" --bf16-log "$logs/s6-xl-bf16.log" --rc-bf16 "$rcb" --precision "$half"
    --steps "${xl[6]}" --batch "${xl[5]}" ${peak:+--peak "$peak"} ${measured:+--measured-peak "$measured"})
  if [ -z "$fp8skip" ]; then
    if limit_q "$per" 40; then
      train_fast s6-xl-fp8 xl "$lim" "${xl[6]}" --set "train.device=$dev" --set train.precision=fp8 --set train.fusion=on
      fargs+=(--fp8-run "$work/s6-xl-fp8" --fp8-log "$logs/s6-xl-fp8.log" --rc-fp8 "$rc")
    else
      fp8skip="time budget: not enough left after the bf16 run"
    fi
  fi
  report fp8 "${fargs[@]}" ${fp8skip:+--fp8-skip "$fp8skip"} --seconds "$(secs_since "$t")"
fi

# ---- stage 7: the ablation on the GPU -----------------------------------------------------
if want 7 && needs 7 "$gt" && limit 7 200 40; then
  t=$(date +%s)
  shard big "$big_tokens" "$big_vocab"
  toml mid "${mid[@]}" 40 "$work/big.bin"
  [ "$dry" = 1 ] || rm -rf "$work/s7-ablate"
  run "$logs/s7-ablate.log" "$lim" "$gt" ablate "$work/mid.toml" --steps 40 --out "$work/s7-ablate" \
    --order "$ablate_order" --set "train.device=$dev"
  [ "$dry" = 1 ] || find "$work/s7-ablate" -name '*.safetensors' -delete 2> /dev/null
  report ablate --dir "$work/s7-ablate" --log "$logs/s7-ablate.log" --rc "$rc" --device "$dev" \
    --model "GPT ${mid[0]} layers, ${mid[2]} wide, context ${mid[3]}, vocabulary ${mid[4]}, batch ${mid[5]}" \
    --seconds "$(secs_since "$t")"
fi

echo
echo "gpu-check.sh: $(($(date +%s) - start)) s of ${budget}; results in $out"
if [ "$dry" = 0 ]; then cat "$out/summary.txt" 2> /dev/null; fi
exit 0
}
