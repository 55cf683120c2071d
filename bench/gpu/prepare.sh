#!/usr/bin/env bash
# Here, once: fill the git-ignored folders that device calls 1-5 carry, one each (each under
# the 64 MiB a call may carry with the ~8.5 MiB working tree):
#   .vpkg1  vLLM part00 + the benchmark PDFs                                   (~53 MiB)
#   .vpkg2  vLLM part01 + olmOCR-shaped dummy model + pypdfium2/pebble/py-spy  (~53 MiB)
#   .vpkg3  vLLM part02 + its sha256 + the shadow wheels + src of HEAD         (~52 MiB)
#   .vpkg4, .vpkg5  the CPU blob in two halves (cpu.blob.aa/ab): the embedded engine's
#           wheels the machine lacks (rapidocr, pyclipper, shapely, omegaconf, colorlog),
#           Ray 2.60.0 (76 MiB alone) and four small corpus scans               (~53 MiB each)
#   .vpkg6  (only if the machine lacks it) the pyarrow wheel for Ray Data       (~53 MiB)
# Later calls carry nothing: what the calls left in /tmp stays while the machine is held.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${GPU_VLLM:-../shared/tools/gpu-vllm}
CORPUS=${CORPUS:-../shared/corpus}
# The page set: four corpus PDFs of three page shapes (A4, 396x594 pt, 385x526 pt), read with
# --pages 1-130 (507 pages; 1-60 for the flag sweep).
PDFS="unstructured__DA-619p.pdf pdfjs__freeculture.pdf pdf2image__test_241.pdf
pypdf-samples__GeoTopo-komprimiert.pdf"
# The CPU page set's scans (bench/bench_ray_data.py takes the first four of a folder).
SCANS="docling__qr_bill_example.jpg easyocr__chinese.jpg easyocr__thai.jpg ocrmypdf__linn.png"
PIP=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
EXCLUDE=$(git rev-parse --git-common-dir)/info/exclude
grep -qs '^/.vpkg\*/$' "$EXCLUDE" || echo '/.vpkg*/' >> "$EXCLUDE"
rm -rf .vpkg1 .vpkg2 .vpkg3 .vpkg4 .vpkg5 .vpkg6
mkdir -p .vpkg1/pdfs .vpkg2/whl .vpkg3/shadow .vpkg4 .vpkg5 .vpkg6/cpu
cp "$SRC"/parts/site.tar.xz.part00 .vpkg1/
for f in $PDFS; do cp "$CORPUS/pdfs/$f" .vpkg1/pdfs/; done
cp "$SRC"/parts/site.tar.xz.part01 "$SRC"/olmocr-dummy.tar.xz .vpkg2/
"${PIP[@]}" -d .vpkg2/whl pypdfium2==5.15.2 pebble==5.2.3 py-spy==0.4.3
cp "$SRC"/parts/site.tar.xz.part02 "$SRC"/site.tar.xz.sha256 .vpkg3/
cp "$SRC"/shadow/*.whl .vpkg3/shadow/
# A frozen copy of ocrflow: the working tree may change while the calls run.
git archive HEAD src | tar -x -C .vpkg3
blob=$(mktemp -d)
mkdir -p "$blob/scans"
"${PIP[@]}" -d "$blob" rapidocr==3.10.0 pyclipper==1.4.0 shapely==2.2.0 omegaconf==2.4.0 \
  colorlog==6.12.0 ray==2.60.0
for f in $SCANS; do cp "$CORPUS/images/$f" "$blob/scans/"; done
tar -c -C "$blob" . > "$blob.tar"
size=$(stat -c %s "$blob.tar")
split -b $(( (size + 1) / 2 + 1 )) -a 2 "$blob.tar" /tmp/cpu.blob.
mv /tmp/cpu.blob.aa .vpkg4/ && mv /tmp/cpu.blob.ab .vpkg5/
rm -rf "$blob" "$blob.tar"
"${PIP[@]}" -d .vpkg6/cpu pyarrow==26.0.1
du -sb .vpkg1 .vpkg2 .vpkg3 .vpkg4 .vpkg5 .vpkg6 | awk '{printf "%s %.2f MiB\n", $2, $1/1048576}'
