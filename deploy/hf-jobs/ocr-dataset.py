# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "ocrflow",
#     "huggingface_hub>=0.30",
# ]
# ///
"""Convert a dataset of scans or PDFs on the Hugging Face Hub with ocrflow, and push the rows
back with their Markdown, as a Hugging Face Job (docs/deploy.md, "Hugging Face Jobs").

The source dataset's Parquet files are downloaded, converted with ``ocrflow run --format
markdown,jsonl,parquet`` (every input column plus ``markdown`` and ``ocr_status``, one row per
input row, in input order) and uploaded to DEST under ``data/``::

    # CPU, the embedded engine
    hf jobs uv run --secrets HF_TOKEN deploy/hf-jobs/ocr-dataset.py user/scans user/scans-ocr
    # one L4 GPU, olmOCR-2 through a vLLM that ocrflow starts in the job
    hf jobs uv run --flavor l4x1 --with vllm --secrets HF_TOKEN deploy/hf-jobs/ocr-dataset.py \\
        user/scans user/scans-ocr --engine vllm --model allenai/olmOCR-2-7B-1025-FP8

A dataset the Hub stores in another format: ``--revision refs/convert/parquet`` reads the
Parquet copy the Hub makes of it. Locally: ``uv run deploy/hf-jobs/ocr-dataset.py …``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ENGINES = ("embedded", "tesseract", "vllm", "openai")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's options (``argv``: the command line after the script, default sys.argv)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="Hub dataset to read, e.g. user/scans")
    parser.add_argument("dest", help="Hub dataset to write, e.g. user/scans-ocr")
    parser.add_argument("--revision", help="branch, tag or commit of SOURCE")
    parser.add_argument("--files", default="*.parquet", help="SOURCE files to read (pattern)")
    parser.add_argument("--dataset-column", help="the column of images or PDFs")
    parser.add_argument("--dataset-id-column", help="the column of row ids")
    parser.add_argument("--engine", choices=ENGINES, default="embedded")
    parser.add_argument("--model", help="VLM model (--engine vllm or openai)")
    parser.add_argument("--server", action="append", help="--engine openai: base URL")
    parser.add_argument("--pages", help="pages of each document, e.g. 1-5")
    parser.add_argument("--work-dir", type=Path, default=Path("ocrflow-job"))
    parser.add_argument("--private", action="store_true", help="create DEST private")
    args = parser.parse_args(argv)
    if args.engine in ("vllm", "openai") and not args.model:
        parser.error(f"--engine {args.engine} needs --model")
    if args.engine == "openai" and not args.server:
        parser.error("--engine openai needs --server")
    return args


def ocrflow_command(args: argparse.Namespace, inputs: list[Path], out: Path) -> list[str]:
    """The ``ocrflow run`` command line that converts ``inputs`` into ``out``."""
    command = ["ocrflow", "run", *map(str, inputs), "-o", str(out)]
    command += ["--format", "markdown,jsonl,parquet", "--engine", args.engine]
    options = {
        "--dataset-column": args.dataset_column,
        "--dataset-id-column": args.dataset_id_column,
        "--model": args.model,
        "--pages": args.pages,
    }
    for flag, value in options.items():
        if value:
            command += [flag, value]
    for server in args.server or ():
        command += ["--server", server]
    return command


def convert(args: argparse.Namespace, inputs: list[Path]) -> Path:
    """Run ocrflow on ``inputs``; return the folder of converted Parquet files. Some failed
    documents (exit 1) still give a dataset: their rows say so in ``ocr_status``."""
    out = args.work_dir / "out"
    # The job's environment holds the ocrflow (and vllm) commands: find them on PATH.
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(ocrflow_command(args, inputs, out), env=env, check=False)
    if done.returncode > 1:
        raise SystemExit(f"ocrflow run failed (exit {done.returncode})")
    return out / "dataset"


def download(args: argparse.Namespace) -> list[Path]:
    """The source dataset's Parquet files, downloaded under the work folder."""
    from huggingface_hub import snapshot_download

    folder = snapshot_download(
        args.source,
        repo_type="dataset",
        revision=args.revision,
        allow_patterns=args.files,
        local_dir=args.work_dir / "source",
    )
    files = sorted(Path(folder).rglob("*.parquet"))
    if not files:
        raise SystemExit(f"{args.source} has no files matching {args.files!r}")
    return files


def upload(args: argparse.Namespace, dataset: Path) -> None:
    """Push the converted Parquet files to DEST's data/, replacing an earlier upload."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(args.dest, repo_type="dataset", private=args.private, exist_ok=True)
    api.upload_folder(
        repo_id=args.dest,
        repo_type="dataset",
        folder_path=dataset,
        path_in_repo="data",
        delete_patterns="*.parquet",
        commit_message=f"ocrflow: {args.source} with --engine {args.engine}",
    )


def main(argv: list[str] | None = None) -> None:
    """Download, convert, upload."""
    args = parse_args(argv)
    upload(args, convert(args, download(args)))


if __name__ == "__main__":
    main()
