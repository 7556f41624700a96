#!/usr/bin/env bash
# On a CUDA machine: the real-model tests on the GPU for both backends, then tokens/s of free vs
# constrained decoding on each (each mask engine, full mask vs lazy check, and each engine's
# first-mask cost for new tool sets), a call's wall time with fast-forward, and prefix reuse.
#
#   bash scripts/gpu_check.sh            # uses .venv/bin/python; PY=python3 to use another
#
# Needs llama-cpp-python built with CUDA (CMAKE_ARGS="-DGGML_CUDA=on" pip install
# llama-cpp-python==0.3.36) and a CUDA build of torch. Models come from the catalog cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
MODEL=${MODEL:-qwen2.5-coder-0.5b}

"$PY" - <<'CHECK'
import sys
import llama_cpp
import torch
problems = []
if not llama_cpp.llama_supports_gpu_offload():
    problems.append("llama-cpp-python was built without GPU offload (rebuild with CMAKE_ARGS=-DGGML_CUDA=on)")
if not torch.cuda.is_available():
    problems.append("torch sees no CUDA device (is this the CPU build of torch?)")
if problems:
    sys.exit("gpu_check: " + "; ".join(problems))
print(f"GPU: {torch.cuda.get_device_name(0)}; llama.cpp offload: yes")
CHECK

# The integration subset, every model on the GPU (conftest reads LOCALTOOLS_TEST_GPU).
LOCALTOOLS_TEST_GPU=1 "$PY" -m pytest -q -m model tests/test_models.py tests/test_fast_forward.py \
    tests/test_lazy_mask.py tests/test_masks.py tests/test_prefix_reuse.py -k "not cli_run"

# Per token: free vs each engine, full mask vs lazy check; then fast-forward and prefix reuse.
"$PY" benchmarks/decode_speed.py --model "$MODEL" --backend llama-cpp --backend transformers \
    --n-gpu-layers -1 --device cuda --runs 5 --build-sets 4
"$PY" benchmarks/fast_forward.py --model "$MODEL" --n-gpu-layers -1 --device cuda --runs 5
"$PY" benchmarks/prefix_reuse.py --model "$MODEL" --n-gpu-layers -1 --device cuda --runs 5

# vLLM as an engine behind localtools (VLLM=0 skips it). Installs vLLM if it is missing (needs
# the network), serves VLLM_MODEL (a Hugging Face id or directory of the same model as $MODEL),
# then runs the seed scenario and a bench sample through --backend vllm; the catalog GGUF of
# $MODEL gives localtools the tokenizer (the same vocabulary).
if [ "${VLLM:-1}" != "0" ]; then
    VLLM_MODEL=${VLLM_MODEL:-Qwen/Qwen2.5-Coder-0.5B-Instruct}
    VLLM_PORT=${VLLM_PORT:-8011}
    "$PY" -c "import vllm" 2>/dev/null || "$PY" -m pip install --quiet vllm
    VLLM_BIN=${VLLM_BIN:-$(dirname "$PY")/vllm}
    "$VLLM_BIN" serve "$VLLM_MODEL" --host 127.0.0.1 --port "$VLLM_PORT" \
        --max-model-len 8192 --gpu-memory-utilization 0.5 >/tmp/localtools-vllm.log 2>&1 &
    VLLM_PID=$!
    trap 'kill $VLLM_PID 2>/dev/null || true' EXIT
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$VLLM_PORT/health" >/dev/null && break
        kill -0 $VLLM_PID 2>/dev/null || { tail -40 /tmp/localtools-vllm.log; exit 1; }
        sleep 1
    done
    ENGINE=(--backend vllm --engine-url "http://127.0.0.1:$VLLM_PORT" --model "$MODEL")
    ANSWER=$("$PY" -m localtools run "What subscription plan is customer cust-1001 using?" \
        --tools localtools.examples:get_customer "${ENGINE[@]}")
    echo "$ANSWER"
    grep -q pro <<<"$ANSWER" || { echo "gpu_check: the seed scenario over vLLM did not answer 'pro'"; exit 1; }
    "$PY" -m localtools bench --bfcl --sample 4 --mode constrained --mode free "${ENGINE[@]}"
fi
