#!/usr/bin/env bash
# Measured against simulated activation memory on this machine: gpt-demo (4 layers, hidden
# 128, sequence 128, fp32; micro-batch 8, global batch 32) under each recomputation at one and
# two pipeline stages, with flash attention and with stored scores, and ZB-H1. Prints a
# Markdown table (docs/measurements/2026-12-01-activation-memory.md). Run after ./trident.sh build; the memory model does not
# depend on the profile, so the test fixture serves.
set -euo pipefail
cd "$(dirname "$0")/.."
trident=build/cli/trident
profile=tests/fixtures/profiles/cpu-host-2-ranks.json
echo "| stages | attention | recomputation | simulated MiB | measured MiB | measured / simulated |"
echo "|---|---|---|---|---|---|"
row() { # ranks attention-flag policy...
    local pp=$1 attention=$2
    shift 2
    local job="--model gpt-demo --cluster localhost --devices-per-node $pp --pp $pp --mbs 8 --gbs 32 --seq-length 128 $* $attention"
    local measured
    measured=$(mpirun --allow-run-as-root --oversubscribe -np "$pp" $trident run $job --steps 1 |
        sed -n 's/^peak activation memory (largest rank): .* (\([0-9]*\) bytes)$/\1/p')
    $trident simulate $job --profile $profile --json build/memory-report.json >/dev/null
    python3 - "$pp" "${attention:-flash}" "$*" "$measured" <<'PY'
import json, sys
r = json.load(open("build/memory-report.json"))
sim = max(s["memory"]["activations_bytes"] + s["memory"]["backward_working_bytes"] for s in r["stages"])
measured = float(sys.argv[4])
mib = 1024 * 1024
print(f"| {sys.argv[1]} | {sys.argv[2].replace('--no-flash-attention', 'stored scores')} | {sys.argv[3]} | "
      f"{sim / mib:.2f} | {measured / mib:.2f} | {measured / sim:.3f} |")
PY
}
for pp in 1 2; do
    for attention in "" "--no-flash-attention"; do
        for policy in "--recompute none" "--recompute selective" "--recompute full" \
                      "--recompute full --recompute-num-layers 2"; do
            row "$pp" "$attention" $policy
        done
    done
done
row 2 "" --schedule zero-bubble-h1 --recompute none
row 2 "" --schedule zero-bubble-h1 --recompute full
row 2 "" --vpp 2 --recompute none
row 2 "" --vpp 2 --recompute full
