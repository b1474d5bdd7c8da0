#!/usr/bin/env bash
# Simulated versus measured step time and peak activation memory on this machine, for a GPT
# small enough for two ranks (bench/models/gpt-bench.json) and an MoE one (moe-bench.json). Run after
# ./trident.sh build; prints a Markdown table (docs/measurements/2026-12-01-simulator-vs-executor.md).
set -euo pipefail
cd "$(dirname "$0")/.."
trident=build/cli/trident
mpi="mpirun --allow-run-as-root --oversubscribe -np 2"
# Not build/cpu-host.json: the tests run in build/ and would take that as the machine's profile.
profile=build/bench-cpu-host.json
$mpi $trident profile --backend cpu --quick --out $profile >/dev/null
echo "| model | layout | simulated step s | measured step s | error | simulated activation MiB | measured activation MiB | error |"
echo "|---|---|---|---|---|---|---|---|"
compare() { # model, layout [replay: simulate with the run's own routing, per pass]
    local common="--model bench/models/$1.json --cluster localhost --devices-per-node 2 --mbs 4 --gbs 32"
    local label="$2"
    # Both with the plan's default flash attention (the CPU executor's tiled kernels).
    if [ "${3:-}" = replay ]; then
        $mpi $trident run $common $2 --steps 8 --moe-routing-out build/routing.json > build/run.log
        $trident simulate $common $2 --profile $profile --json build/sim.json \
            --moe-load-balance build/routing.json >/dev/null
        label="$2, the run's routing"
    else
        $trident simulate $common $2 --profile $profile --json build/sim.json >/dev/null
        $mpi $trident run $common $2 --steps 8 > build/run.log
    fi
    python3 - "$1" "$label" <<'PY'
import json, re, statistics, sys
r = json.load(open("build/sim.json"))
sim_s = r["step_time_s"]
sim_act = max(s["memory"]["activations_bytes"] + s["memory"]["backward_working_bytes"] for s in r["stages"])
log = open("build/run.log").read()
steps = [float(x) for x in re.findall(r"\| ([0-9.]+) s \|", log)][2:]  # skip warm-up steps
measured_s = statistics.median(steps)
measured_act = float(re.search(r"peak activation memory \(largest rank\): .* \(([0-9]+) bytes\)", log).group(1))
mib = 1024 * 1024
print(f"| {sys.argv[1]} | {sys.argv[2]} | {sim_s:.4f} | {measured_s:.4f} | {100 * (sim_s / measured_s - 1):+.0f} % | "
      f"{sim_act / mib:.1f} | {measured_act / mib:.1f} | {100 * (sim_act / measured_act - 1):+.0f} % |")
PY
}
for layout in "--tp 1 --pp 2 --dp 1 --schedule 1f1b" "--tp 2 --pp 1 --dp 1" "--tp 1 --pp 1 --dp 2" \
              "--tp 1 --pp 2 --dp 1 --schedule dualpipev" \
              "--tp 1 --pp 1 --dp 2 --zero-stage 2" "--tp 1 --pp 1 --dp 2 --zero-stage 3"; do
    compare gpt-bench "$layout"
done
# Mixture of experts (8 experts top-2): expert parallelism, experts replicated, and tensor
# parallelism with sequence parallelism (each rank routes its own rows).
for layout in "--tp 1 --pp 1 --dp 2 --ep 2" "--tp 1 --pp 1 --dp 2 --ep 1" \
              "--tp 2 --pp 1 --dp 1 --sequence-parallel" \
              "--tp 1 --pp 1 --dp 2 --zero-stage 3"; do
    compare moe-bench "$layout"
done
# Dropless expert parallelism with the routing the run measured (each pass's busiest rank).
compare moe-bench "--tp 1 --pp 1 --dp 2 --ep 2" replay
