#!/usr/bin/env bash
# ON the GPU machine (no vLLM needed): where ocrflow's start goes there. A test server
# (tests/fakevllm) on :8123, then for each environment, bare (the machine's python and
# ocrflow's src) and vllm (with the carried vLLM site first, as calls.sh runs it, once
# `device.sh setup` has run): the slowest imports of `import ocrflow.cli`, and
# start_trace.py over the benchmark PDFs' first 8 pages each.
#   bash bench/gpu/start_trace.sh [bare|vllm ...]
set -uo pipefail
PDFS=(/tmp/pdfs/*.pdf)
[ -e "${PDFS[0]}" ] || PDFS=(../shared/corpus/pdfs/unstructured__DA-619p.pdf)
SRC=${OCRFLOW_SRC:-$PWD/src}
PYTHONPATH=/tmp/extra:$SRC python3 -m tests.fakevllm.server --port 8123 --model olmocr \
  --max-num-seqs 256 --pages-per-s 200 --tokens-per-page 20 > /tmp/fake.log 2>&1 &
FAKE=$!
trap 'kill $FAKE 2>/dev/null' EXIT
sleep 3
for envname in "${@:-bare}"; do
  case $envname in
    bare) export PYTHONPATH=/tmp/extra:$SRC ;;
    vllm) source bench/gpu/device.sh env ;;
  esac
  echo "== $envname: python3 -X importtime -c 'import ocrflow.cli' (slowest, cumulative us)"
  python3 -X importtime -c 'import ocrflow.cli' 2>&1 | sort -t'|' -k2 -n | tail -12
  for round in 1 2; do
    echo "== $envname: start_trace round $round"
    rm -rf /tmp/trace-out
    T0=$(date +%s.%N); export T0; python3 bench/gpu/start_trace.py run "${PDFS[@]}" --pages 1-8 \
      -o /tmp/trace-out --engine openai --recipe olmocr --text-layer off \
      --recipe-option max_tokens=20 --json --server http://127.0.0.1:8123/v1 --model olmocr \
      2>&1 >/dev/null | grep -E '^ *[0-9]+\.[0-9]{3} ' 
    echo "command done at $(python3 -c "import time; print(round(time.time() - float('$T0'), 3))" 2>/dev/null)"
  done
done
