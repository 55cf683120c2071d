#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks use (Tesseract, the reference engine),
# when they are missing and we are allowed to: as root, or with passwordless sudo.
set -u
need=()
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
  echo "note: ${need[*]} missing and no root: Tesseract tests will be skipped" >&2; exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null \
  || echo "note: could not install ${need[*]}: Tesseract tests will be skipped" >&2
exit 0
