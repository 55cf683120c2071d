# Two commands a newcomer needs:  make demo   and   make test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint bench bench-engines bench-textlayer bench-geometry bench-vlm bench-scale bench-parquet bench-describe bench-serve bench-quality bench-sinks bench-ray-data bench-ocrmypdf bench-ocrmypdf-tools bench-ocrmypdf-aside bench-layer-columns clean

$(BIN)/ocrflow: pyproject.toml constraints/test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints/test.txt -e '.[test]'
	touch $@

## make demo: set up, then convert the bundled sample documents with the embedded CPU engine
demo: $(BIN)/ocrflow
	$(BIN)/ocrflow run examples/ -o out/; test $$? -le 1
	$(BIN)/ocrflow status out/

## make test: set up (Tesseract too, when we may install it), then run the whole test suite in
## three pytest-xdist workers, one test file each at a time: most integration tests wait on
## servers and subprocesses, so even three workers keep 2 cores only 1.4 busy on average
## (a slow day on 2 cores: 27.7 min of tests with two workers, 20.1 with three)
test: $(BIN)/ocrflow
	bash scripts/system-deps.sh
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --durations=15

## make test-fast: the unit tests alone, no system installs and nothing marked slow (~2-3 min
## on 2 cores); a test group whose tools are missing here skips instead of failing
test-fast: $(BIN)/ocrflow
	OCRFLOW_ALLOW_SKIP=$${OCRFLOW_ALLOW_SKIP:-all} $(BIN)/python -m pytest -q tests/unit \
		-n 2 --dist loadfile -m "not slow and not vllm and not s3" --durations=15

lint: $(BIN)/ocrflow
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/lint-imports
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

bench: bench-engines bench-textlayer bench-geometry bench-vlm bench-scale bench-parquet bench-describe bench-serve bench-quality

bench-sinks: $(BIN)/ocrflow
	$(BIN)/python bench/bench_sinks.py
	$(BIN)/python bench/bench_pdf_sink.py

bench-ray-data: $(BIN)/ocrflow
	$(BIN)/python bench/bench_ray_data.py

bench-engines: $(BIN)/ocrflow
	$(BIN)/python bench/bench_engines.py

bench-quality: $(BIN)/ocrflow
	$(BIN)/python bench/bench_quality.py

bench-textlayer: $(BIN)/ocrflow
	$(BIN)/python bench/bench_text_route.py
	$(BIN)/python bench/bench_textlayer.py
	$(BIN)/python bench/bench_blank.py

## make bench-layer-columns: does pdftotext read our searchable PDFs' two columns as the
## Markdown does, gutter by gutter (docs/searchable-pdf.md)? Needs poppler's pdftotext.
bench-layer-columns: $(BIN)/ocrflow
	$(BIN)/python bench/bench_layer_columns.py
	$(BIN)/python bench/bench_layer_columns.py --engine tesseract

bench-geometry: $(BIN)/ocrflow
	$(BIN)/python bench/bench_geometry.py

bench-vlm: $(BIN)/ocrflow
	$(BIN)/python bench/bench_vlm.py

bench-scale: $(BIN)/ocrflow
	$(BIN)/python bench/bench_scale.py

bench-parquet: $(BIN)/ocrflow
	$(BIN)/python bench/bench_parquet.py
	$(BIN)/python bench/bench_dataset_run.py

bench-serve: $(BIN)/ocrflow
	$(BIN)/python bench/bench_serve.py

bench-describe: $(BIN)/ocrflow
	$(BIN)/python bench/bench_describe.py

## make bench-ocrmypdf: ocrflow against OCRmyPDF on the corpus scans, back to back (wall time,
## CER, output size; docs/benchmarks.md). Debian's Tesseract, Ghostscript, qpdf and poppler
## are installed when missing (as root, or with sudo -n); OCRmyPDF from PyPI goes into a venv
## of its own, $(OCRMYPDF_VENV), so that its dependencies never mix with ours.
OCRMYPDF_VENV := .venv-ocrmypdf
## Rounds of each set: the README's table is their median (make bench-ocrmypdf OCRMYPDF_BENCH_ARGS=...).
OCRMYPDF_BENCH_ARGS ?= --repeat 3

$(OCRMYPDF_VENV)/bin/ocrmypdf:
	$(PYTHON) -m venv $(OCRMYPDF_VENV)
	$(OCRMYPDF_VENV)/bin/pip install -q 'ocrmypdf>=17'

bench-ocrmypdf: bench-ocrmypdf-tools
	$(BIN)/python bench/bench_ocrmypdf.py --ocrmypdf $(OCRMYPDF_VENV)/bin/ocrmypdf $(OCRMYPDF_BENCH_ARGS)

bench-ocrmypdf-tools: $(BIN)/ocrflow $(OCRMYPDF_VENV)/bin/ocrmypdf
	@missing=""; \
	for need in tesseract:tesseract-ocr gs:ghostscript qpdf:qpdf pdftotext:poppler-utils; do \
		command -v $${need%%:*} >/dev/null 2>&1 || missing="$$missing $${need#*:}"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "missing:$$missing (no root to install them)" >&2; exit 1; fi; \
		echo "installing$$missing"; export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get update -qq >/dev/null && $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

## make bench-ocrmypdf-aside: the same on scans that are not in those sets (born-digital corpus
## pages printed to noisy, tilted scans by bench/scans_aside.py; one round).
bench-ocrmypdf-aside: bench-ocrmypdf-tools
	rm -rf build/scans-aside && $(BIN)/python bench/scans_aside.py build/scans-aside
	$(BIN)/python bench/bench_ocrmypdf.py --ocrmypdf $(OCRMYPDF_VENV)/bin/ocrmypdf --set "" \
		--files build/scans-aside/*.pdf --truth build/scans-aside/truth --repeat 1 --no-single \
		--json bench/results/ocrmypdf-aside.json

clean:
	rm -rf out $(VENV) build *.egg-info
