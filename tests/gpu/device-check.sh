#!/usr/bin/env bash
# One-shot GPU check of kernels/cuda (run from the repository root on a machine with a GPU):
# configure and build only the CUDA kernels, their tests and benchmark for sm_90, run the GPU
# tests, the benchmark, and PyTorch's scaled_dot_product_attention on the same shapes.
# Logs go to $OUT (default: build-device/logs); the tables are printed last.
#
# The build uses the whole project when its dependencies (MPI, CLI11, nlohmann-json,
# GoogleTest) are installed, else the stand-alone project tests/gpu/CMakeLists.txt, which needs
# only CUDA and GoogleTest (installed, or a source tree in $TRIDENT_GTEST_SOURCE, by default
# build-cuda/googletest). If the build fails and build-cuda/prebuilt holds binaries built
# elsewhere (same CUDA major version), those run instead. Then compute-sanitizer checks the
# attention and norm kernels for out-of-bounds accesses and shared-memory races.
# The CUDA backend's pieces follow: the caching allocator's tests (both builds), and — only
# with the whole project, which they need (MPI, JSON, CLI11) — the NCCL communicator tests
# (one rank, then one rank per GPU under mpirun when there are several), `trident profile
# --backend cuda --quick` and `trident simulate` of a one-GPU GPT-2 350M plan with the profile
# it wrote, beside the same plan with the shipped (derived) h200 profile; the CUDA trainer's
# tests (losses against the CPU backend's); and end-to-end one-GPU training with
# `trident run --backend cuda` of GPT-2 350M and GPT-3 1.3B (tokens/s, MFU), each beside
# `trident simulate` of the same plan with the measured profile (measured vs simulated step).
# Where the image lacks the project's build dependencies, carry build-cuda/device-deps.tar.xz
# (made here by tests/gpu/device-deps.sh); where it lacks MPI, the single-process stand-in is
# used, and the multi-rank NCCL run is skipped.
# Environment: JOBS (default: all cores), CUDA_ARCH (default 90).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/build-device/logs}
mkdir -p "$OUT"
BUILD=$ROOT/build-device
JOBS=${JOBS:-$(nproc)}
ARCH=${CUDA_ARCH:-90}
GTEST_SRC=${TRIDENT_GTEST_SOURCE:-$ROOT/build-cuda/googletest}
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
  export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
t0=$(date +%s)
stamp() { echo "[device-check $(( $(date +%s) - t0 ))s] $*"; }

: >"$OUT/configure.log"
{ nvidia-smi; nvcc --version; cmake --version | head -1; } >"$OUT/machine.log" 2>&1
stamp "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"

common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH")
# NCCL: the toolkit's, else the one PyTorch's image carries as a Python package.
if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' \
             2>/dev/null || true)
  nccl_lib=$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)
  if [ -n "$nccl_lib" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
    common+=(-DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$nccl_lib")
    export LD_LIBRARY_PATH=$nccl_dir/lib:${LD_LIBRARY_PATH:-}
    stamp "NCCL from $nccl_dir"
  fi
fi
# The whole project with the image's own packages; else with the packed dependencies
# (tests/gpu/device-deps.sh: JSON, CLI11, GoogleTest, OpenBLAS), with real MPI if the image has
# it, else the single-process MPI stand-in. The last resort is the stand-alone kernel project.
DEPS_TAR=$ROOT/build-cuda/device-deps.tar.xz
whole=(-DTRIDENT_CUDA=ON -DTRIDENT_GUI=OFF -DTRIDENT_TESTS=ON)
configure_whole() {
  rm -rf "$BUILD/full"
  cmake -S "$ROOT" -B "$BUILD/full" "${GEN[@]}" "${common[@]}" "${whole[@]}" "$@" \
    >>"$OUT/configure.log" 2>&1
}
stamp "configure (whole project)"
configured=0
if configure_whole; then
  configured=1
elif [ -f "$DEPS_TAR" ]; then
  mkdir -p "$BUILD" && tar -C "$BUILD" -xJf "$DEPS_TAR"
  export LD_LIBRARY_PATH=$BUILD/device-deps/lib:${LD_LIBRARY_PATH:-}
  stamp "configure with the packed dependencies"
  if configure_whole -DCMAKE_PREFIX_PATH="$BUILD/device-deps"; then
    configured=1
  else
    stamp "configure with the packed dependencies and the single-process MPI stand-in"
    configure_whole -DCMAKE_PREFIX_PATH="$BUILD/device-deps" -DTRIDENT_MPI_SINGLE=ON &&
      configured=1
  fi
fi
if [ "$configured" -eq 1 ]; then
  BDIR=$BUILD/full
  TESTS=$BDIR/tests/gpu/cuda_kernel_tests
  BENCH=$BDIR/bench/cuda_kernels_bench
  ALLOC=$BDIR/tests/gpu/cuda_allocator_tests
  NCCL_TESTS=$BDIR/tests/gpu/nccl_communicator_tests
  TRAINER_TESTS=$BDIR/tests/gpu/cuda_trainer_tests
  TRIDENT=$BDIR/cli/trident
else
  stamp "whole project did not configure (see configure.log); stand-alone tests/gpu project"
  extra=()
  [ -d "$GTEST_SRC" ] && extra=(-DTRIDENT_GTEST_SOURCE="$GTEST_SRC")
  BDIR=$BUILD/standalone
  cmake -S "$ROOT/tests/gpu" -B "$BDIR" "${GEN[@]}" "${common[@]}" "${extra[@]}" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 >>"$OUT/configure.log" 2>&1 || stamp "configure FAILED"
  TESTS=$BDIR/cuda_kernel_tests
  BENCH=$BDIR/cuda_kernels_bench
  ALLOC=$BDIR/cuda_allocator_tests
  NCCL_TESTS=""
  TRAINER_TESTS=""
  TRIDENT=""
fi
stamp "build (-j$JOBS): cuda_kernel_tests cuda_kernels_bench"
if ! cmake --build "$BDIR" -j "$JOBS" --target cuda_kernel_tests cuda_kernels_bench \
     cuda_allocator_tests >"$OUT/build.log" 2>&1; then
  stamp "build FAILED"
  tail -30 "$OUT/configure.log"
  grep -E "error|Error" "$OUT/build.log" | head -40
  if [ -x "$ROOT/build-cuda/prebuilt/cuda_kernel_tests" ]; then
    stamp "running the prebuilt binaries in build-cuda/prebuilt instead"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
    TESTS=$ROOT/build-cuda/prebuilt/cuda_kernel_tests
    BENCH=$ROOT/build-cuda/prebuilt/cuda_kernels_bench
    ALLOC=$ROOT/build-cuda/prebuilt/cuda_allocator_tests
  else
    exit 1
  fi
fi
stamp "built"
if [ -n "$TRIDENT" ]; then
  stamp "build (-j$JOBS): nccl_communicator_tests cuda_trainer_tests trident"
  if ! timeout 300 cmake --build "$BDIR" -j "$JOBS" --target nccl_communicator_tests \
       cuda_trainer_tests trident >"$OUT/build-backend.log" 2>&1; then
    stamp "backend build FAILED (see build-backend.log)"
    grep -E "error|Error" "$OUT/build-backend.log" | head -20
    NCCL_TESTS=""
    TRAINER_TESTS=""
    TRIDENT=""
  fi
fi

stamp "GPU tests"
timeout 120 "$TESTS" --gtest_color=no >"$OUT/tests.log" 2>&1
test_rc=$?
stamp "tests exit $test_rc"

stamp "benchmark"
timeout 120 "$BENCH" --attention-tsv "$OUT/attention.tsv" >"$OUT/bench.log" 2>&1
bench_rc=$?
stamp "bench exit $bench_rc"

stamp "PyTorch SDPA reference"
PYTHONUNBUFFERED=1 timeout 90 python3 "$ROOT/tests/gpu/sdpa_reference.py" "$OUT/attention.tsv" \
  >"$OUT/sdpa.log" 2>&1
sdpa_rc=$?
stamp "sdpa exit $sdpa_rc"

stamp "caching allocator tests"
if [ -x "$ALLOC" ]; then
  timeout 60 "$ALLOC" --gtest_color=no >"$OUT/allocator.log" 2>&1
  alloc_rc=$?
else
  echo "$ALLOC not built" >"$OUT/allocator.log"
  alloc_rc=0 # older prebuilt binaries have none: not a failure of this run
fi
stamp "allocator exit $alloc_rc"

NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nccl_summary="not built (needs the whole project: MPI, nlohmann-json, CLI11)"
profile_summary="not built (needs the whole project)"
if [ -n "$NCCL_TESTS" ]; then
  stamp "NCCL communicator tests: one rank"
  timeout 90 "$NCCL_TESTS" --gtest_color=no >"$OUT/nccl.log" 2>&1
  nccl_rc=$?
  nccl_summary="1 rank: exit $nccl_rc ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/nccl.log" | tr '\n' ' '))"
  if [ "${NGPU:-0}" -ge 2 ] && command -v mpirun >/dev/null &&
     ! grep -q "TRIDENT_MPI_SINGLE:BOOL=ON" "$BDIR/CMakeCache.txt" 2>/dev/null; then
    stamp "NCCL communicator tests: $NGPU ranks"
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$NGPU" "$NCCL_TESTS" \
      --gtest_color=no >"$OUT/nccl-mpi.log" 2>&1
    nccl_summary="$nccl_summary; $NGPU ranks: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/nccl-mpi.log" | tr '\n' ' '))"
  else
    nccl_summary="$nccl_summary; multi-rank run skipped (${NGPU:-0} GPU(s) or no mpirun)"
  fi
fi
if [ -n "$TRIDENT" ]; then
  stamp "trident profile --backend cuda --quick"
  timeout 240 "$TRIDENT" profile --backend cuda --quick --out "$OUT/cuda-quick.json" \
    >"$OUT/profile.log" 2>&1
  prof_rc=$?
  profile_summary="profile exit $prof_rc: $(tail -1 "$OUT/profile.log")"
  plan=(--model gpt2-350m --cluster hgx-h200 --nodes 1 --devices-per-node 1 --tp 1 --pp 1
        --dp 1 --mbs 8 --gbs 64 --seq-length 1024)
  if [ "$prof_rc" -eq 0 ]; then
    stamp "trident simulate (one GPU) with the measured profile"
    timeout 30 "$TRIDENT" simulate "${plan[@]}" --profile "$OUT/cuda-quick.json" \
      >"$OUT/simulate-measured.log" 2>&1
    timeout 30 "$TRIDENT" simulate "${plan[@]}" >"$OUT/simulate-derived.log" 2>&1
  fi
fi

trainer_summary="not built (needs the whole project)"
train_lines=()
if [ -n "$TRAINER_TESTS" ]; then
  stamp "CUDA trainer tests (against the CPU backend)"
  timeout 180 "$TRAINER_TESTS" --gtest_color=no >"$OUT/trainer.log" 2>&1
  trainer_summary="exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/trainer.log" | tr '\n' ' '))"
fi
if [ -n "$TRIDENT" ]; then
  # End-to-end one-GPU training on synthetic data: the last step's log line (tokens/s, MFU
  # against the h200 preset's bf16 peak), then the same plan simulated with the measured
  # profile when there is one (else the shipped one).
  sim_profile=()
  [ -f "$OUT/cuda-quick.json" ] && sim_profile=(--profile "$OUT/cuda-quick.json")
  for model in gpt2-350m gpt3-1.3b; do
    plan=(--model "$model" --cluster hgx-h200 --nodes 1 --devices-per-node 1 --tp 1 --pp 1
          --dp 1 --mbs 8 --gbs 64 --seq-length 1024)
    stamp "trident run --backend cuda: $model"
    timeout 240 "$TRIDENT" run --backend cuda "${plan[@]}" --train-iters 6 \
      --trace "$OUT/run-$model-trace.json" >"$OUT/run-$model.log" 2>&1
    run_rc=$?
    timeout 30 "$TRIDENT" simulate "${plan[@]}" "${sim_profile[@]}" \
      --trace "$OUT/sim-$model-trace.json" >"$OUT/sim-$model.log" 2>&1
    train_lines+=("$model: run exit $run_rc | $(grep '^step ' "$OUT/run-$model.log" | tail -1)")
    train_lines+=("$model: simulated $(grep -m1 '^step time' "$OUT/sim-$model.log")")
    [ "$run_rc" -ne 0 ] && train_lines+=("$(tail -3 "$OUT/run-$model.log")")
  done
fi

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
san_summary="compute-sanitizer not found"
if [ -n "$SAN" ]; then
  stamp "compute-sanitizer memcheck + racecheck (small shapes)"
  echo "### memcheck" >"$OUT/sanitizer.log"
  timeout 60 "$SAN" --tool memcheck "$TESTS" --gtest_color=no \
    --gtest_filter='*FlashAttention*:*Norm*:*CrossEntropy*:*Activation*:*Embedding*' >>"$OUT/sanitizer.log" 2>&1
  mc=$?
  mc_line=$(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)
  echo "### racecheck" >>"$OUT/sanitizer.log"
  timeout 45 "$SAN" --tool racecheck "$TESTS" --gtest_color=no \
    --gtest_filter='*FlashAttention*b1_t64*:*FlashAttention*b1_t256*:*LayerNormBf16WithResidual*' >>"$OUT/sanitizer.log" 2>&1
  rc_=$?
  rc_line=$(sed -n '/### racecheck/,$p' "$OUT/sanitizer.log" | grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' | tail -1)
  san_summary="memcheck exit $mc: ${mc_line:-no summary}; racecheck exit $rc_: ${rc_line:-no summary}"
fi

echo
echo "================ GPU tests (exit $test_rc) ================"
grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) " "$OUT/tests.log" | head -60
grep -E -A5 "Failure$" "$OUT/tests.log" | head -80
[ "$test_rc" -ne 0 ] && tail -5 "$OUT/tests.log"
echo "================ benchmark (exit $bench_rc) ================"
sed -n '/^Trident CUDA kernels/,$p' "$OUT/bench.log"
[ "$bench_rc" -ne 0 ] && tail -20 "$OUT/bench.log"
echo "================ attention vs PyTorch SDPA (exit $sdpa_rc) ================"
tail -8 "$OUT/sdpa.log"
echo "================ sanitizers ================"
echo "$san_summary"
echo "================ CUDA backend ================"
echo "caching allocator: exit $alloc_rc ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/allocator.log" | tr '\n' ' '))"
echo "NCCL communicator: $nccl_summary"
echo "$profile_summary"
echo "CUDA trainer tests: $trainer_summary"
grep -E -A5 "Failure$" "$OUT/trainer.log" 2>/dev/null | head -30
for line in "${train_lines[@]}"; do echo "$line"; done
for f in measured derived; do
  [ -f "$OUT/simulate-$f.log" ] && echo "simulate gpt2-350m, 1 GPU, $f profile: $(grep -m1 '^step time' "$OUT/simulate-$f.log")"
done
stamp "done"
[ "$test_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$alloc_rc" -eq 0 ]
