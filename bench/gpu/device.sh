#!/usr/bin/env bash
# ON the GPU machine, from the repository root. Sub-commands:
#   stage             copy what this call carried (.vpkg1 .. .vpkg6) into /tmp; join the CPU
#                     blob (cpu.blob.*) once all its parts are there
#   setup             assemble and unpack vLLM 0.24.0 and the dummy models; install wheels
#   bgsetup LABEL ARGS  setup, then start vLLM, all in its own session: returns at once
#   bgsetup2 LABEL ARGS setup, then one vLLM per GPU: LABEL-g0 on GPU 0 :8000, LABEL-g1 on
#                     GPU 1 :8001 (two GPUs, issue 22)
#   serve LABEL ARGS  start vLLM in its own session on :$PORT with the common flags + ARGS
#   bgserve LABEL ARGS  start it and return at once (`wait LABEL` blocks until it answers)
#   wait LABEL        block until the server answers (or died); print its start figures
#   cpuwheels         install the CPU-engine and Ray wheels of the blob into /tmp/cpusite
#   stop              stop every server started here; wait until the GPU memory is free
# MODEL_DIR (default /tmp/m, olmOCR-2's shape; /tmp/m3 is the Qwen2.5-VL-3B shape) picks the
# model; PORT (default 8000) the port; GPUS (e.g. 1, or 0,1 for --data-parallel-size 2) sets
# CUDA_VISIBLE_DEVICES. `source bench/gpu/device.sh env` sets PYTHONPATH and the environment vLLM needs.
set -uo pipefail
export HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1
# ocrflow from the frozen copy of HEAD that .vpkg3 carried (else from the working tree).
[ -d /tmp/pk/src/ocrflow ] && export OCRFLOW_SRC=${OCRFLOW_SRC:-/tmp/pk/src}
export PYTHONPATH=/tmp/extra:$([ -e /tmp/use_shadow ] && echo /tmp/shadow:)/tmp/site:${OCRFLOW_SRC:-$PWD/src}
MODEL_DIR=${MODEL_DIR:-/tmp/m}
# The olmOCR recipe's own flags, then what every run here needs: random weights of the real
# shapes, one image a prompt, no cache shared between pages, FlashAttention 3 (flashinfer is
# not carried).
PORT=${PORT:-8000}
PIDS=/tmp/vllm-pids
COMMON=("$MODEL_DIR" --served-model-name olmocr --host 127.0.0.1
  --max-model-len 16384 --limit-mm-per-prompt '{"image": 1, "video": 0}'
  --load-format dummy --no-enable-prefix-caching --mm-processor-cache-gb 0
  --attention-backend FLASH_ATTN)

stage() {
  mkdir -p /tmp/pk /tmp/pdfs /tmp/whl
  # Each call carries one of .vpkg1..6 (bench/gpu/prepare.sh); a folder of an earlier call
  # may still be there, so copy only what /tmp lacks.
  for d in .vpkg*/; do cp -rn "$d". /tmp/pk/; done 2>/dev/null
  [ -d /tmp/pk/pdfs ] && cp -n /tmp/pk/pdfs/* /tmp/pdfs/
  [ -d /tmp/pk/whl ] && cp -n /tmp/pk/whl/*.whl /tmp/whl/
  if [ -e /tmp/pk/cpu.blob.aa ] && [ -e /tmp/pk/cpu.blob.ab ] && [ ! -d /tmp/cpu ]; then
    mkdir -p /tmp/cpu && cat /tmp/pk/cpu.blob.a? | tar -x -C /tmp/cpu && rm -f /tmp/pk/cpu.blob.a?
  fi
  du -sh /tmp/pk; ls /tmp/pk /tmp/cpu 2>/dev/null | tr '\n' ' '; echo
}

probe() {
  nvidia-smi -L; nproc; free -g | head -2; lscpu | grep -E 'Model name|Thread|Core|Socket|NUMA node'
  lscpu -e=CPU,CORE,SOCKET | head -20 | tr '\n' ';'; echo
  command -v tesseract || echo "no tesseract"; df -h /dev/shm | tail -1
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)'
  python3 -m pip list 2>/dev/null | grep -iE '^(typing.extensions|anyio|httpx|aiohttp|protobuf|pydantic|pillow|numpy|typer|rich|fsspec|psutil|prometheus.client|pyyaml|onnxruntime|rapidocr|pypdfium2|pebble|pyarrow|pandas|opencv.python.headless|jsonschema|click|msgpack|markdown.it.py|openvino|shapely|pyclipper) '
}

setup() {
  local t0=$SECONDS
  cat /tmp/pk/site.tar.xz.part0{0,1,2} > /tmp/site.tar.xz || return 1
  (cd /tmp && cp /tmp/pk/site.tar.xz.sha256 . && sha256sum -c site.tar.xz.sha256) || return 1
  mkdir -p /tmp/site /tmp/m /tmp/m3 /tmp/extra /tmp/shadow
  python3 -c "import tarfile,sys; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')" < /tmp/site.tar.xz || return 1
  rm -f /tmp/site.tar.xz
  tar -xJf /tmp/pk/olmocr-dummy.tar.xz -C /tmp/m --strip-components=1 || return 1
  # The small model: the same processor, tokenizer and template, Qwen2.5-VL-3B's shape.
  cp /tmp/m/* /tmp/m3/ && cp bench/gpu/qwen25vl-3b-config.json /tmp/m3/config.json
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra /tmp/whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/shadow /tmp/pk/shadow/*.whl
  if ! PYTHONPATH=$PYTHONPATH python3 -c 'import vllm.entrypoints.openai.api_server' 2>/tmp/imp.err; then
    tail -3 /tmp/imp.err; echo "vLLM import failed: putting the shadow wheels first"
    touch /tmp/use_shadow
  fi
  echo "setup done in $((SECONDS - t0)) s"
}

cpuwheels() {
  # Apart from /tmp/extra: vLLM must not find Ray (it would import it) in its own runs.
  [ -e /tmp/cpu.done ] && return 0
  local t0=$SECONDS
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cpusite /tmp/cpu/*.whl \
    $(ls /tmp/pk/cpu/*.whl 2>/dev/null) && touch /tmp/cpu.done
  echo "CPU wheels installed in $((SECONDS - t0)) s"
}

bgserve() {
  local label=$1; shift
  [ -e /tmp/use_shadow ] && export PYTHONPATH=/tmp/extra:/tmp/shadow:/tmp/site:${OCRFLOW_SRC:-$PWD/src}
  date +%s > "/tmp/vllm-$label.t0"
  echo "$PORT" > "/tmp/vllm-$label.port"
  mkdir -p $PIDS
  # Servers started side by side (OWN_CACHE) compile into caches of their own: no race on
  # one folder.
  ( [ -n "${GPUS:-}" ] && export CUDA_VISIBLE_DEVICES=$GPUS
    [ -n "${OWN_CACHE:-}" ] && export VLLM_CACHE_ROOT=/tmp/vllm-cache-$PORT
    setsid nohup python3 -m vllm.entrypoints.cli.main serve "${COMMON[@]}" --port "$PORT" "$@" \
      >"/tmp/vllm-$label.log" 2>&1 < /dev/null &
    echo $! > "$PIDS/$label.pid" )
}

wait_ready() {
  local label=$1 log=/tmp/vllm-$1.log pidf=$PIDS/$1.pid t0 port
  # A background setup (bgsetup) writes the pid file only once vLLM is unpacked and started.
  for _ in $(seq 300); do
    [ -e "$pidf" ] && break
    grep -qE 'failed|FAILED|rror' /tmp/bgsetup.log 2>/dev/null && { cat /tmp/bgsetup.log; return 1; }
    sleep 1
  done
  t0=$(cat "/tmp/vllm-$label.t0" 2>/dev/null || date +%s)
  port=$(cat "/tmp/vllm-$label.port" 2>/dev/null || echo 8000)
  until python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; do
    if [ ! -e "$pidf" ] || ! kill -0 "$(cat "$pidf")" 2>/dev/null || (( $(date +%s) - t0 > ${READY_S:-480} )); then
      echo "vLLM $label did not start:"; grep -E 'Error|error|Traceback' "$log" | tail -15; tail -20 "$log"
      return 1
    fi
    sleep 1
  done
  echo "vLLM $label ready $(( $(date +%s) - t0 )) s after its start"
  grep -E 'KV cache|Maximum concurrency|Graph capturing finished|torch.compile takes|Model loading took' "$log" | sed 's/^.*\] //' | head -8
  return 0
}

stop() {
  local f pid pids=()
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f"); rm -f "$f"; pids+=("$pid")
    kill -TERM -- "-$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pid" 2>/dev/null
  done
  for _ in $(seq 30); do
    [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" = 0 ] && break; sleep 1
  done
}

case "${1:-}" in
  stage|setup|stop|probe|cpuwheels) "$1" ;;
  serve) shift; bgserve "$@" && wait_ready "$1" ;;
  bgserve) shift; bgserve "$@" ;;
  bgsetup) shift
    setsid nohup bash "$0" _setup_serve "$@" > /tmp/bgsetup.log 2>&1 < /dev/null & ;;
  _setup_serve) shift; setup && bgserve "$@" ;;
  bgsetup2) shift
    setsid nohup bash "$0" _setup_serve2 "$@" > /tmp/bgsetup.log 2>&1 < /dev/null & ;;
  _setup_serve2) shift; label=$1; shift
    export OWN_CACHE=1
    setup && GPUS=0 PORT=8000 bgserve "$label-g0" "$@" && GPUS=1 PORT=8001 bgserve "$label-g1" "$@" ;;
  wait) wait_ready "$2" ;;
  env) ;;
  *) echo "usage: device.sh stage|probe|setup|bgsetup|bgsetup2|serve|bgserve|wait|cpuwheels|stop|env" >&2 ;;
esac
