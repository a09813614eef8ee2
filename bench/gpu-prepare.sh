#!/usr/bin/env bash
# bench/gpu-prepare.sh DIR PACKAGE...: what `bench/gpu-check.sh --prepare [DIR]` runs, on a
# Debian 12 machine with the CUDA 13 toolkit (this project's development machines): the build
# that travels to a GPU machine, in DIR (default gpu-prepared, ignored by git; under 64 MiB so
# it travels with the checkout):
#   bin/    greentrain, backend_ops_test, engine_tests, gt_cuda_matmul_peak,
#           gt_gpu_kernel_bench: Release, sm_90 only, without oneDNN, MPI or NCCL (the GPU
#           machines have none of their -dev packages), libstdc++ and libgcc linked statically,
#           stripped, with RUNPATH $ORIGIN/../lib;
#   lib/    the shared libraries they need that a CUDA image may lack (fmt, toml++,
#           SentencePiece, PCRE2, date), copied from this machine;
#   debs/   the Debian packages of the build's dependencies (apt-get download), for a rebuild
#           there when the binaries do not start (another glibc), with MANIFEST.txt;
#   pack.tar.xz  instead of bin/, lib/ and debs/ when they would pass 64 MiB (each binary holds
#           the kernels' fatbin: 69 MiB in all at 9bf731f; 16 MiB packed): gpu-check.sh
#           unpacks it where it runs;
#   BUILD.txt  what was built, when, from which commit, and the folder's size.
# Written to DIR.tmp and renamed, so an interrupted run leaves the last complete folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir="${1:?usage: gpu-prepare.sh DIR PACKAGE...}"
shift
tmp="$dir.tmp"
build="${GT_PREPARE_BUILD_DIR:-build-gpu-prepare}"
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/debs"
(cd "$tmp/debs" && apt-get download "$@" libhowardhinnant-date-dev libdate-tz3 > /dev/null)
{
  echo "# Debian packages for a rebuild on the GPU machine ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  for f in "$tmp"/debs/*.deb; do echo "$(sha256sum "$f" | cut -c1-64)  $(stat -c %s "$f")  $(basename "$f")"; done
} > "$tmp/debs/MANIFEST.txt"

args=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGT_ONEDNN=OFF -DGT_BUILD_PYTHON=OFF
  -DGT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGT_NATIVE=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  -DGT_NCCL=OFF
  "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc"
  '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON)
command -v ninja > /dev/null && [ ! -f "$build/CMakeCache.txt" ] && args+=(-G Ninja)
[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER")
cmake "${args[@]}" > "$tmp/cmake.log"
cmake --build "$build" -j"$(nproc)" --target greentrain backend_ops_test engine_tests \
  gt_cuda_matmul_peak gt_gpu_kernel_bench
for b in src/cli/greentrain tests/backend/backend_ops_test tests/engine/engine_tests \
  bench/gt_cuda_matmul_peak bench/gt_gpu_kernel_bench; do
  cp "$build/$b" "$tmp/bin/"
  strip "$tmp/bin/$(basename "$b")"
done
# the shared libraries outside glibc, the CUDA toolkit and the driver
for b in "$tmp"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so' |
  while read -r l; do cp -L "$l" "$tmp/lib/"; done
rm -f "$tmp/cmake.log"
kb=$(du -sk "$tmp" | cut -f1)
files=$(cd "$tmp" && find bin lib debs -type f -printf '%s\t%p\n' | sort -k2)
pack_note=""
if [ "$kb" -ge 65536 ]; then
  tar -C "$tmp" -cf - bin lib debs | xz -T"$(nproc)" -6 > "$tmp/pack.tar.xz"
  rm -rf "$tmp/bin" "$tmp/lib" "$tmp/debs"
  pack_note="bin/, lib/ and debs/ packed into pack.tar.xz (${kb} KiB unpacked, over the 64 MiB a checkout carries); gpu-check.sh unpacks it"
  kb=$(du -sk "$tmp" | cut -f1)
  echo "gpu-prepare.sh: $pack_note" >&2
fi
{
  echo "greentrain $(git rev-parse --short HEAD 2> /dev/null || echo '?'), built $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME"), $(nvcc --version | tail -1), sm_90"
  echo "size: ${kb} KiB${pack_note:+; $pack_note}"
  echo "$files"
} > "$tmp/BUILD.txt"
[ "$kb" -lt 65536 ] || { echo "gpu-prepare.sh: ${kb} KiB is over the 64 MiB a checkout carries" >&2; exit 1; }
rm -rf "$dir"
mv "$tmp" "$dir"
echo "gpu-prepare.sh: $dir ready: ${kb} KiB ($(ls "$dir" | tr '\n' ' '))"
