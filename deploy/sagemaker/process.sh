#!/usr/bin/env bash
# What the SageMaker Processing job of processing-job.json runs on each instance: convert the
# documents SageMaker copied to /opt/ml/processing/input/documents with a vLLM that ocrflow
# starts on the instance's GPU, into /opt/ml/processing/output/<host>/, which SageMaker uploads
# to S3 when the job ends (docs/deploy.md, "SageMaker"). With InstanceCount > 1 and
# ShardedByS3Key, each instance gets its own share of the files and writes its own folder.
#
# Environment (the job's Environment): OCRFLOW_MODEL, OCRFLOW_WORKERS (render processes).
# Extra arguments go to `ocrflow run` as they are.
set -euo pipefail

INPUT=/opt/ml/processing/input/documents
OUTPUT=/opt/ml/processing/output
# SageMaker names each instance (algo-1, algo-2, …) in its resource configuration.
HOST=$(python3 -c 'import json; print(json.load(open("/opt/ml/config/resourceconfig.json"))["current_host"])' 2>/dev/null || hostname)

rc=0
ocrflow run "$INPUT" -o "$OUTPUT/$HOST" --engine vllm \
  --model "${OCRFLOW_MODEL:-allenai/olmOCR-2-7B-1025-FP8}" \
  --workers "${OCRFLOW_WORKERS:-4}" --progress-interval 60 "$@" || rc=$?
ocrflow status "$OUTPUT/$HOST" || true
# 1: some documents failed; the outputs still upload and `ocrflow status` lists the failures.
if [ "$rc" -eq 1 ]; then rc=0; fi
exit "$rc"
