#!/usr/bin/env bash
# Trident's one entry point on a fresh Debian 12 machine (run as root, or with sudo):
#   ./trident.sh demo   install what is missing, build Release in build/, run the main job
#   ./trident.sh test   install what is missing, build Release in build/, run every test
#   ./trident.sh build  install what is missing and build only
#   ./trident.sh test also builds the libraries with ASan + UBSan (build-asan) and runs their
#   unit tests, then runs every libFuzzer target for FUZZ_SECONDS (build-fuzz);
#   ./trident.sh sanitize-all  the whole non-GUI, non-CUDA suite under the sanitizers
#   ./trident.sh fuzz   only the fuzzers (FUZZ_SECONDS=300 ./trident.sh fuzz for a longer run)
# Packages are installed only when missing, so a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages Trident builds with. CUDA 13 (toolkit, cuBLAS, NCCL) is not a Debian
# package: the build uses /usr/local/cuda when it is there.
PACKAGES=(cmake make g++ pkg-config libcli11-dev nlohmann-json3-dev libgtest-dev
          libopenmpi-dev openmpi-bin libopenblas-dev qt6-base-dev clang)

missing_packages() {
    local p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            printf '%s\n' "$p"
    done
}

install_missing() {
    local missing
    mapfile -t missing < <(missing_packages)
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "trident.sh: installing ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "trident.sh: need root to install ${missing[*]}" >&2; exit 1; }
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"
}

build() {
    install_missing
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
    cmake --build build -j "$(nproc)"
}

# AddressSanitizer + UndefinedBehaviorSanitizer (gcc) in build-asan: the libraries without the
# GUI and CUDA. Leak checking is off: LeakSanitizer needs ptrace (refused in containers) and
# reports MPI's own allocations. -Wno-maybe-uninitialized: GCC 12 false positives inside
# std::regex and std::function under the sanitizers.
SANITIZE_FLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -Wno-maybe-uninitialized"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

sanitized_build() {
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$SANITIZE_FLAGS" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DTRIDENT_GUI=OFF -DTRIDENT_CUDA=OFF
    cmake --build build-asan -j "$(nproc)" "$@"
}

# The part CI runs (it fits the 30-minute budget on 2 cores): every unit and CLI test of the
# non-GUI, non-CUDA targets, and the 2-rank MPI runs — checkpoints, preemption, the
# distributed timeout, training on real data, the progress bar. `./trident.sh sanitize-all`
# runs the whole suite: the 90 layout comparisons (up to 8 ranks), activation memory and
# plan-then-run too (~18 min here).
sanitize() {
    echo "== AddressSanitizer + UBSan: unit and CLI tests, 2-rank MPI runs"
    sanitized_build --target core_tests data_tests kernel_tests simulator_tests executor_tests \
        planner_tests trident cli_tests mpi_tests
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 300 \
        -L '^(core|data|kernels|simulator|executor|planner|cli)$'
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 300 \
        -R '^(Checkpoint|DistributedTimeout|ProgressBar|Training)\.'
}

sanitize_all() {
    sanitized_build
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 600
}

# libFuzzer (clang) on every reader of untrusted bytes, each for FUZZ_SECONDS (default 10) from
# its checked-in corpus (tests/fuzz/corpus/NAME, copied: new inputs stay in build-fuzz). A
# crash, sanitizer report or exception other than SpecError fails, leaving the input in
# build-fuzz/crash-NAME-*.
FUZZ_TARGETS=(spec_loaders profile_trace indexed_dataset tokenizer checkpoint)
fuzz() {
    echo "== libFuzzer: ${FUZZ_TARGETS[*]}, ${FUZZ_SECONDS:-10} s each"
    cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIDENT_FUZZ=ON -DTRIDENT_TESTS=OFF \
        -DTRIDENT_GUI=OFF -DTRIDENT_CUDA=OFF
    cmake --build build-fuzz -j "$(nproc)" --target fuzz_targets
    local t
    for t in "${FUZZ_TARGETS[@]}"; do
        rm -rf "build-fuzz/corpus-$t" && cp -r "tests/fuzz/corpus/$t" "build-fuzz/corpus-$t"
        "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="${FUZZ_SECONDS:-10}" -timeout=10 \
            -rss_limit_mb=2048 -artifact_prefix="build-fuzz/crash-$t-" \
            "build-fuzz/corpus-$t" 2>"build-fuzz/fuzz-$t.log" ||
            { tail -n 40 "build-fuzz/fuzz-$t.log" >&2; echo "trident.sh: fuzz_$t failed" >&2; return 1; }
        echo "fuzz_$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "build-fuzz/fuzz-$t.log")"
    done
}

demo() {
    local trident=build/cli/trident
    echo "== trident presets"
    "$trident" presets
    echo
    echo "== GPT-3 175B on 128 DGX A100 nodes (1024 GPUs): validate the layout"
    "$trident" validate --model gpt3-175b --cluster dgx-a100-80gb --nodes 128 \
        --tp 8 --pp 16 --dp auto --mbs 1 --gbs 1536 --vpp 2 --sequence-parallel \
        --distributed-optimizer --recompute selective
    echo
    echo "== ... and simulate one step (timeline in build/demo-trace.json, open it in Perfetto)"
    "$trident" simulate --model gpt3-175b --cluster dgx-a100-80gb --nodes 128 \
        --tp 8 --pp 16 --dp auto --mbs 1 --gbs 1536 --vpp 2 --sequence-parallel \
        --distributed-optimizer --recompute selective --trace build/demo-trace.json
    echo
    echo "== Narayanan et al. 2021, Table 1: the 1T-parameter run on 3072 A100s (published: 163 TFLOP/s per GPU)"
    "$trident" simulate --plan megatron-sc21-1t
    echo
    echo "== The fastest layout of GPT-3 175B on 1024 A100s that fits in 90 % of their memory"
    "$trident" plan --model gpt3-175b --cluster dgx-a100-80gb --nodes 128 --gbs 1536 --top 5
    echo
    echo "== Real text, no downloads: the license texts Debian ships (base-files) -> a 1,024-token BPE vocabulary"
    local corpus=() f
    for f in Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0; do
        corpus+=("/usr/share/common-licenses/$f")
    done
    "$trident" tokenizer train --input "${corpus[@]}" --vocab-size 1024 --output-dir build/demo-tokenizer
    echo
    echo "== ... and into Megatron-style indexed data (build/demo-licenses.bin + .idx)"
    "$trident" preprocess --input "${corpus[@]}" --tokenizer build/demo-tokenizer \
        --output-prefix build/demo-licenses
    echo
    echo "== Training for real: gpt-demo over 2 MPI ranks (data-parallel) on that text, validation every 50 steps,"
    echo "   checkpoints in build/demo-checkpoints, the last step's measured timeline in build/demo-run-trace.json"
    echo "== Measuring this machine (sgemm, memory, MPI) for the MFU column: build/cpu-host.json"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$trident" profile --backend cpu --quick \
        --out build/cpu-host.json
    echo
    echo "== ... and the planner on this machine with that profile: the fastest layouts of gpt-demo on 2 cores"
    "$trident" plan --model gpt-demo --cluster localhost --devices-per-node 2 --gbs 16 --seq-length 64 \
        --profile build/cpu-host.json --top 3
    echo
    rm -rf build/demo-checkpoints
    # One BLAS thread per rank (run's --threads 1), each rank on a core of its own, as `trident
    # launch` binds them (--map-by slot:PE=T --bind-to core for T threads); overload-allowed
    # keeps a machine with fewer cores than ranks running.
    mpirun --allow-run-as-root --oversubscribe -np 2 --map-by slot --bind-to core:overload-allowed \
        "$trident" run --threads 1 --model gpt-demo --cluster localhost \
        --devices-per-node 2 --tp 1 --pp 1 --dp 2 --mbs 4 --gbs 16 --seq-length 64 --train-iters 300 \
        --lr 1e-3 --min-lr 1e-4 --lr-warmup-iters 20 --data-path build/demo-licenses --eval-interval 50 \
        --eval-iters 2 --save build/demo-checkpoints --save-interval 100 --trace build/demo-run-trace.json \
        --profile build/cpu-host.json
    "$trident" checkpoint verify --dir build/demo-checkpoints
}

# Steps in sequence, not joined by &&: bash ignores `set -e` inside a function called from an
# && list, so a failing step inside one (the first of sanitize's two ctest runs) went unseen.
case "${1:-}" in
    demo) build; demo ;;
    test) build; ctest --test-dir build --output-on-failure -j "$(nproc)"; sanitize; fuzz ;;
    build) build ;;
    sanitize) install_missing; sanitize ;;
    sanitize-all) install_missing; sanitize_all ;;
    fuzz) install_missing; fuzz ;;
    *) echo "usage: ./trident.sh demo | test | build | sanitize | sanitize-all | fuzz" >&2; exit 2 ;;
esac
