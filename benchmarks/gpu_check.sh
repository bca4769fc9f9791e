#!/usr/bin/env bash
# The H200 check: kernel tests on the GPU, greedy equality with HF, Llama-3.1-8B-shaped speed.
# Run from the repository root; results (JSON, log, summary) go to $OUT (default /tmp/kvtool-gpu-results).
#   bash benchmarks/gpu_check.sh          # BUDGET_S (default 560) caps the whole run
set -uo pipefail
OUT="${OUT:-/tmp/kvtool-gpu-results}"
BUDGET_S="${BUDGET_S:-560}"
PY="${PYTHON:-python3}"
SCRATCH="$(mktemp -d)"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
exec > >(tee "$OUT/gpu_check.log") 2>&1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c 'import torch, triton, transformers as t; print("torch", torch.__version__, "triton", triton.__version__, "transformers", t.__version__)'
# kvtool itself, without dependencies (the machine has torch, transformers, typer, rich, pyyaml);
# if pip cannot install it, a tree of links gives the same import names.
if ! "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e .; then
    LINKS="$(mktemp -d)"; mkdir "$LINKS/kvtool"
    ln -s "$PWD"/kvtool/* "$LINKS/kvtool/"
    for part in cli engine kernels profiles bench; do ln -s "$PWD/$part" "$LINKS/kvtool/$part"; done
    export PYTHONPATH="$LINKS${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" -c 'import kvtool.kernels, kvtool.engine.runtime.llm' || { echo "kvtool does not import"; exit 1; }

step() {  # step NAME LIMIT_S COMMAND...: run within what is left of the budget; record and go on
    local name=$1 limit=$2; shift 2
    local left=$((BUDGET_S - SECONDS - 15))
    (( left < limit )) && limit=$left
    (( limit < 20 )) && { echo "$name skipped: budget spent" | tee -a "$OUT/steps.txt"; return; }
    echo "=== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@"
    echo "$name rc=$? seconds=$((SECONDS - start))" | tee -a "$OUT/steps.txt"
}

step kernel-tests 150 "$PY" -m pytest tests/kernels -q -p no:cacheprovider --confcutdir=tests/kernels
step equality 120 "$PY" benchmarks/gpu_bench.py equality --out "$OUT" --scratch "$SCRATCH"
step speed-bf16-kv 150 "$PY" benchmarks/gpu_bench.py speed --out "$OUT" --scratch "$SCRATCH"
step kernel-bench 60 "$PY" benchmarks/kernel_bench.py --out "$OUT"
step hf-generate 150 "$PY" benchmarks/gpu_bench.py hf --out "$OUT" --scratch "$SCRATCH"
step speed-fp8-kv 150 "$PY" benchmarks/gpu_bench.py speed --kv-cache-dtype fp8 --out "$OUT" --scratch "$SCRATCH"
"$PY" benchmarks/gpu_summary.py "$OUT" | tee "$OUT/summary.txt"
