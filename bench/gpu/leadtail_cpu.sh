#!/usr/bin/env bash
# Issue 21, scope 3 on this machine: idle server time before ocrflow's first request (lead)
# and after its last answer (tail), against the bare client, on the CPU test server
# (tests/fakevllm: 20 pages/s at a full batch of 64, 100 tokens a page; pages 1-60 of
# the corpus's DA-619p). Three clients, alternated ROUNDS times:
#   bare        every page rendered before its clock starts (bench_gpu.py bare)
#   openai      (b) ocrflow run --engine openai against the running test server
#   vllm        (c) ocrflow run --engine vllm: ocrflow starts the test server itself
#               through bench_managed_ramp.py's `serve`, which loads for WARMUP_S (5 s)
#               like a model; its lead is counted from the moment the server answered.
#   bash bench/gpu/leadtail_cpu.sh RESULTS [ROUNDS] [LABEL]
# PYTHONPATH=OTHER/src measures another checkout's ocrflow with the same driver.
set -euo pipefail
RESULTS=${1:?results file}; ROUNDS=${2:-2}; LABEL=${3:-cpu}
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
PDF=../shared/corpus/pdfs/unstructured__DA-619p.pdf
FAKE="--max-num-seqs 64 --pages-per-s 20 --tokens-per-page 100 --reply-format markdown"
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$PY -m tests.fakevllm.server --port "$PORT" --model olmocr $FAKE > /dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.2; done
COMMON=(--label "$LABEL" --results "$RESULTS" --pages 1-60 --max-tokens 100)
for _ in $(seq "$ROUNDS"); do
  $PY bench/gpu/bench_gpu.py bare $PDF "${COMMON[@]}" --server "http://127.0.0.1:$PORT/v1"
  $PY bench/gpu/bench_gpu.py ocrflow $PDF "${COMMON[@]}" --server "http://127.0.0.1:$PORT/v1"
  $PY bench/gpu/bench_gpu.py ocrflow $PDF "${COMMON[@]}" --engine vllm --model-path olmocr \
    --vllm-command "$PY bench/bench_managed_ramp.py serve" --vllm-args "$FAKE --warmup-s ${WARMUP_S:-5}"
done
