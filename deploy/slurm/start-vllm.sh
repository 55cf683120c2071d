#!/usr/bin/env bash
# Start vLLM serving olmOCR-2 on this node's GPU(s) in the background and wait until it is
# ready (GET /health answers 200), or give up after VLLM_READY_TIMEOUT seconds.
# Sourced by ocrflow-array.sbatch; runnable alone too:  bash deploy/slurm/start-vllm.sh
#
# Environment: VLLM (the vllm command, default: vllm), VLLM_MODEL, VLLM_SERVED_NAME,
# VLLM_PORT (default 8000), VLLM_READY_TIMEOUT (default 1800 s: the first start downloads the
# model), VLLM_LOG (default: vllm-<job>-<task>.log). Sets VLLM_PID and VLLM_URL.
# The flags are the olmOCR recipe's (src/ocrflow/recipes/olmocr.py) plus the FP8 KV cache.
set -euo pipefail

VLLM="${VLLM:-vllm}"
VLLM_MODEL="${VLLM_MODEL:-allenai/olmOCR-2-7B-1025-FP8}"
VLLM_SERVED_NAME="${VLLM_SERVED_NAME:-olmocr}"
VLLM_PORT="${VLLM_PORT:-8000}"
VLLM_READY_TIMEOUT="${VLLM_READY_TIMEOUT:-1800}"
VLLM_LOG="${VLLM_LOG:-vllm-${SLURM_JOB_ID:-local}-${SLURM_ARRAY_TASK_ID:-0}.log}"

"$VLLM" serve "$VLLM_MODEL" \
  --served-model-name "$VLLM_SERVED_NAME" \
  --max-model-len 16384 \
  --limit-mm-per-prompt '{"video": 0}' \
  --kv-cache-dtype fp8 \
  --host 127.0.0.1 --port "$VLLM_PORT" \
  >"$VLLM_LOG" 2>&1 &
VLLM_PID=$!
VLLM_URL="http://127.0.0.1:${VLLM_PORT}/v1"
export VLLM_PID VLLM_URL

deadline=$((SECONDS + VLLM_READY_TIMEOUT))
until curl -fsS --max-time 5 "http://127.0.0.1:${VLLM_PORT}/health" >/dev/null 2>&1; do
  if ! kill -0 "$VLLM_PID" 2>/dev/null; then
    echo "vLLM exited before it was ready; the end of $VLLM_LOG:" >&2
    tail -n 30 "$VLLM_LOG" >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "vLLM not ready after ${VLLM_READY_TIMEOUT}s (log: $VLLM_LOG)" >&2
    kill "$VLLM_PID" 2>/dev/null || true
    exit 1
  fi
  sleep 5
done
echo "vLLM ready at $VLLM_URL (pid $VLLM_PID)" >&2
