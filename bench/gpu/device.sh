#!/usr/bin/env bash
# ON the GPU machine, from the repository root. Sub-commands:
#   stage             copy what this call carried (.vpkg1, .vpkg2 or .vpkg3) into /tmp
#   setup             assemble and unpack vLLM 0.24.0 and the dummy model; install wheels
#   serve LABEL ARGS  start vLLM in its own session on :8000 with the common flags + ARGS
#   stop              stop it and wait until the GPU memory is free again
# `source bench/gpu/device.sh env` sets PYTHONPATH and the environment vLLM needs.
set -uo pipefail
export HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1
export PYTHONPATH=/tmp/extra:$([ -e /tmp/use_shadow ] && echo /tmp/shadow:)/tmp/site:${OCRFLOW_SRC:-$PWD/src}
# The olmOCR recipe's own flags, then what every run here needs: random weights of the real
# shapes, one image a prompt, no cache shared between pages, FlashAttention 3 (flashinfer is
# not carried).
COMMON=(/tmp/m --served-model-name olmocr --host 127.0.0.1 --port 8000
  --max-model-len 16384 --limit-mm-per-prompt '{"image": 1, "video": 0}'
  --load-format dummy --no-enable-prefix-caching --mm-processor-cache-gb 0
  --attention-backend FLASH_ATTN)

stage() {
  mkdir -p /tmp/pk /tmp/pdfs /tmp/whl
  # Each call carries one of .vpkg1..3 (bench/gpu/prepare.sh); a folder of an earlier call
  # may still be there, so copy only what /tmp lacks.
  for d in .vpkg*/; do cp -rn "$d". /tmp/pk/; done 2>/dev/null
  [ -d /tmp/pk/pdfs ] && cp -n /tmp/pk/pdfs/* /tmp/pdfs/
  [ -d /tmp/pk/whl ] && cp -n /tmp/pk/whl/*.whl /tmp/whl/
  ls -la /tmp/pk /tmp/pdfs /tmp/whl | grep -v '^total'
  nvidia-smi -L; nproc; free -g | head -2
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)'
  python3 -m pip list 2>/dev/null | grep -iE '^(typing.extensions|anyio|httpx|aiohttp|protobuf|pydantic|pillow|numpy|typer|rich|fsspec|psutil|prometheus.client|pyyaml|onnxruntime|rapidocr|pypdfium2|pebble) '
}

setup() {
  local t0=$SECONDS
  cat /tmp/pk/site.tar.xz.part0{0,1,2} > /tmp/site.tar.xz || return 1
  (cd /tmp && cp /tmp/pk/site.tar.xz.sha256 . && sha256sum -c site.tar.xz.sha256) || return 1
  mkdir -p /tmp/site /tmp/m /tmp/extra /tmp/shadow
  python3 -c "import tarfile,sys; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')" < /tmp/site.tar.xz || return 1
  rm -f /tmp/site.tar.xz
  tar -xJf /tmp/pk/olmocr-dummy.tar.xz -C /tmp/m --strip-components=1 || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra /tmp/whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/shadow /tmp/pk/shadow/*.whl
  if ! PYTHONPATH=$PYTHONPATH python3 -c 'import vllm.entrypoints.openai.api_server' 2>/tmp/imp.err; then
    tail -3 /tmp/imp.err; echo "vLLM import failed: putting the shadow wheels first"
    touch /tmp/use_shadow
  fi
  echo "setup done in $((SECONDS - t0)) s"
}

serve() {
  local label=$1; shift
  local log=/tmp/vllm-$label.log t0=$SECONDS
  [ -e /tmp/use_shadow ] && export PYTHONPATH=/tmp/extra:/tmp/shadow:/tmp/site:${OCRFLOW_SRC:-$PWD/src}
  setsid nohup python3 -m vllm.entrypoints.cli.main serve "${COMMON[@]}" "$@" >"$log" 2>&1 < /dev/null &
  echo $! > /tmp/vllm.pid
  until python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8000/v1/models", timeout=2)' 2>/dev/null; do
    if ! kill -0 "$(cat /tmp/vllm.pid)" 2>/dev/null || (( SECONDS - t0 > ${READY_S:-420} )); then
      echo "vLLM $label did not start:"; grep -E 'Error|error|Traceback' "$log" | tail -15; tail -20 "$log"
      return 1
    fi
    sleep 2
  done
  echo "vLLM $label ready in $((SECONDS - t0)) s: $*"
  grep -E 'KV cache|Maximum concurrency|Graph capturing finished|torch.compile takes|Model loading took' "$log" | sed 's/^.*\] //' | head -8
}

stop() {
  [ -e /tmp/vllm.pid ] || return 0
  local pid; pid=$(cat /tmp/vllm.pid); rm -f /tmp/vllm.pid
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null
  for _ in $(seq 30); do
    [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" = 0 ] && break; sleep 1
  done
}

case "${1:-}" in
  stage|setup|stop) "$1" ;;
  serve) shift; serve "$@" ;;
  env) ;;
  *) echo "usage: device.sh stage|setup|serve LABEL ARGS|stop|env" >&2 ;;
esac
