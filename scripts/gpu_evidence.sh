#!/usr/bin/env bash
# Collects the GPU evidence committed under docs/gpu-runs/ (run on the device machine, repo root).
# Needs python3 with torch, nvidia-ml-py, click, jinja2, pyyaml, packaging, rich; writes to $OUT.
set -u
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version --format=csv,noheader,nounits > "$OUT/smi-query.csv" 2>&1
  { cat /proc/driver/nvidia/version; echo "--- /sys/module/nvidia/version"; cat /sys/module/nvidia/version; } > "$OUT/driver-files.txt" 2>&1
  echo "== envkit detect"; python3 -m envkit detect
  python3 -m envkit detect --json > "$OUT/detect-h200.json"; echo "detect rc=$?"
  echo "== verify (full)"; s=$(date +%s%N)
  python3 -m envkit verify --python python3 --report "$OUT/verify-h200.json"; echo "verify rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
  echo "== verify --quick"; s=$(date +%s%N)
  python3 -m envkit verify --python python3 --quick --report "$OUT/verify-quick-h200.json"; echo "quick rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
  echo "== verify with GPUs hidden"
  CUDA_VISIBLE_DEVICES= python3 -m envkit verify --python python3 --report "$OUT/verify-hidden-h200.json"; echo "hidden rc=$?"
} 2>&1 | tee "$OUT/log.txt"
