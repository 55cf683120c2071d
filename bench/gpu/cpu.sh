#!/usr/bin/env bash
# ON the GPU machine, vLLM stopped: issue 18's thread layouts and issue 19's Ray Data row
# on the machine's 16 cores, the embedded engine (ONNX Runtime), results in /tmp/cpu.jsonl.
#   cpu.sh scaling "2=0,1;4=0-3" [LAYOUTS]    bench/gpu/cpu_scaling.py (CPU lists by count)
#   cpu.sh ray [CPUS]                         bench/bench_ray_data.py --cpus CPUS (16)
set -uo pipefail
source bench/gpu/device.sh env
export PYTHONPATH=/tmp/cpusite:$PYTHONPATH PATH=/tmp/cpusite/bin:$PATH
bash bench/gpu/device.sh cpuwheels || exit 1
R=/tmp/cpu.jsonl
case "${1:-}" in
  scaling) python3 bench/gpu/cpu_scaling.py --images /tmp/cpu/scans --copies 2 --results $R \
    --cpus "${2:-}" ${3:+--layouts "$3"} ;;
  ray) python3 bench/bench_ray_data.py --cpus "${2:-16}" --copies 2 --repeat 1 \
    --images /tmp/cpu/scans --results $R ;;
esac
rc=$?
[ -n "${OUT:-}" ] && cp -f $R "$OUT/" 2>/dev/null
exit $rc
