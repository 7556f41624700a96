#!/usr/bin/env bash
# On a CUDA machine: the real-model tests on the GPU for both backends, then tokens/s of free vs
# constrained decoding on each (and each mask engine's first-mask cost for new tool sets).
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
LOCALTOOLS_TEST_GPU=1 "$PY" -m pytest -q -m model tests/test_models.py -k "not cli_run"

"$PY" benchmarks/decode_speed.py --model "$MODEL" --backend llama-cpp --backend transformers \
    --n-gpu-layers -1 --device cuda --runs 5 --build-sets 4
