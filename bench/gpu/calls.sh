#!/usr/bin/env bash
# ON the GPU machine: the measuring steps of bench/gpu/README.md, results kept in /tmp (the
# machine keeps them between calls) and copied to $OUT after every step.
#   calls.sh bare LABEL PAGES TOKENS [N]     bare client against the server on :8000
#   calls.sh flow LABEL PAGES TOKENS [ARGS]  ocrflow --engine openai against it (ARGS: more
#                                            bench_gpu.py ocrflow options, e.g. --pyspy FILE)
#   calls.sh managed LABEL PAGES TOKENS ARGS ocrflow --engine vllm (stops every server first;
#                                            GPUS=0,1: one replica per GPU, `--gpus 0,1`)
#   calls.sh point LABEL PAGES TOKENS ARGS   restart :8000 with ARGS, then bare
#   calls.sh table                           the results so far as a Markdown table
# MODEL_DIR picks the model of a managed run (default /tmp/m); LOGS names the vLLM logs
# (labels) to bring back, at most 5 (the device tool brings back 8 files).
set -uo pipefail
source bench/gpu/device.sh env
PDFS=(/tmp/pdfs/*.pdf)
R=/tmp/results.jsonl
B=(python3 bench/gpu/bench_gpu.py)
SRV=()
for port in ${SERVERS:-8000}; do SRV+=(--server "http://127.0.0.1:$port/v1"); done

save() {
  [ -n "${OUT:-}" ] || return 0
  cp -f $R "$OUT/" 2>/dev/null
  for label in ${LOGS:-}; do
    f=/tmp/vllm-$label.log
    [ -e "$f" ] && tail -c 150000 "$f" > "$OUT/$(basename "$f")"
  done
}

step() {
  local what=$1 label=$2 pages=$3 tokens=$4; shift 4
  case $what in
    bare) "${B[@]}" bare "${PDFS[@]}" --label "$label" --pages "$pages" --max-tokens "$tokens" \
            --results $R "${SRV[@]}" ${1:+--concurrency "$1"} ;;
    flow) "${B[@]}" ocrflow "${PDFS[@]}" --label "$label" --pages "$pages" --max-tokens "$tokens" \
            --results $R --engine openai "${SRV[@]}" "$@" ;;
    managed) bash bench/gpu/device.sh stop
      "${B[@]}" ocrflow "${PDFS[@]}" --label "$label" --pages "$pages" \
        --max-tokens "$tokens" --results $R --engine vllm --model-path "${MODEL_DIR:-/tmp/m}" \
        ${GPUS:+--ocrflow-arg=--gpus "--ocrflow-arg=$GPUS"} \
        --vllm-args "--load-format dummy --no-enable-prefix-caching --mm-processor-cache-gb 0 \
--attention-backend FLASH_ATTN --limit-mm-per-prompt '{\"image\":1,\"video\":0}' $*" ;;
    point) bash bench/gpu/device.sh stop
      bash bench/gpu/device.sh serve "$label" "$@" && step bare "$label" "$pages" "$tokens" ;;
  esac
  local rc=$?
  save
  return $rc
}

if [ "${1:-}" = table ]; then "${B[@]}" table $R; else step "$@"; fi
