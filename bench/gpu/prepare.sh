#!/usr/bin/env bash
# Here, once: fill the git-ignored folders that device calls 1, 2 and 3 carry, one each
# (each under the 64 MiB a call may carry, with the working tree):
#   .vpkg1  vLLM part00 + the shadow wheels                             (~58 MiB)
#   .vpkg2  vLLM part01 + pypdfium2/pebble wheels + the benchmark PDFs  (~57 MiB)
#   .vpkg3  vLLM part02 + its sha256 + the olmOCR-shaped dummy model     (~40 MiB)
#   .vpkg4  the pyarrow wheel (ocrflow imports it; the GPU machine lacks it) (~53 MiB)
# Later calls carry nothing: what the three left in /tmp stays while the machine is held.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${GPU_VLLM:-../shared/tools/gpu-vllm}
CORPUS=${CORPUS:-../shared/corpus/pdfs}
# The page set: four corpus PDFs of three page shapes (A4, 396x594 pt, 385x526 pt), read with
# --pages 1-130 (507 pages; 1-60 for the flag sweep).
PDFS="unstructured__DA-619p.pdf pdfjs__freeculture.pdf pdf2image__test_241.pdf
pypdf-samples__GeoTopo-komprimiert.pdf"
grep -qs '^/.vpkg\*/$' .git/info/exclude || echo '/.vpkg*/' >> .git/info/exclude
rm -rf .vpkg1 .vpkg2 .vpkg3 .vpkg4 && mkdir -p .vpkg1/shadow .vpkg2/pdfs .vpkg2/whl .vpkg3 .vpkg4/whl
cp "$SRC"/parts/site.tar.xz.part00 .vpkg1/ && cp "$SRC"/shadow/*.whl .vpkg1/shadow/
cp "$SRC"/parts/site.tar.xz.part01 .vpkg2/
for f in $PDFS; do cp "$CORPUS/$f" .vpkg2/pdfs/; done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .vpkg2/whl pypdfium2==5.15.2 pebble==5.2.3
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 -d .vpkg4/whl pyarrow==26.0.1
cp "$SRC"/parts/site.tar.xz.part02 "$SRC"/site.tar.xz.sha256 "$SRC"/olmocr-dummy.tar.xz .vpkg3/
# A frozen copy of ocrflow: the working tree may change while the calls run.
rm -rf .vpkg3/src && git archive HEAD src | tar -x -C .vpkg3
du -sh .vpkg1 .vpkg2 .vpkg3 .vpkg4
