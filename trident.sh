#!/usr/bin/env bash
# Trident's one entry point on a fresh Debian 12 machine (run as root, or with sudo):
#   ./trident.sh demo   install what is missing, build Release in build/, run the main job
#   ./trident.sh test   install what is missing, build Release in build/, run every test
#   ./trident.sh build  install what is missing and build only
# Packages are installed only when missing, so a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages Trident builds with. CUDA 13 (toolkit, cuBLAS, NCCL) is not a Debian
# package: the build uses /usr/local/cuda when it is there.
PACKAGES=(cmake make g++ pkg-config libcli11-dev nlohmann-json3-dev libgtest-dev
          libopenmpi-dev openmpi-bin libopenblas-dev qt6-base-dev)

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

case "${1:-}" in
    demo) build && demo ;;
    test) build && ctest --test-dir build --output-on-failure -j "$(nproc)" ;;
    build) build ;;
    *) echo "usage: ./trident.sh demo | test | build" >&2; exit 2 ;;
esac
