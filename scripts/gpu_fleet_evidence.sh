#!/usr/bin/env bash
# GPU evidence for issue 13 (README "Clusters"): `envkit fleet verify --nccl` across two "nodes" of a
# 2-GPU host, through a real Slurm cluster on that host (Slurm unpacked from carried .deb files, nothing
# installed into /), else through --launcher local. No network and no env needed: every node verifies
# the interpreter in $PYTHON (default python3), which must have torch with CUDA.
#
# Prepare once on a Debian 12 machine with network (the debs are ~3.7 MiB, in the ignored .carry/):
#   mkdir -p .carry/slurm-debs && (cd .carry/slurm-debs && apt-get download slurmctld slurmd slurm-client \
#     slurm-wlm-basic-plugins munge libmunge2 libhwloc15 liblua5.1-0 libjson-c5 libyaml-0-2 libnuma1 libdbus-1-3)
# Run from the repository root on the GPU host (as root, which slurmd needs):
#   scripts/gpu_fleet_evidence.sh
# Writes docs/gpu-runs/fleet-verify-nccl-h200x2.json and .log (and copies both into $OUT when it is set).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p docs/gpu-runs
# GPUS=1 on a one-GPU host: both nodes verify GPU 0, --nccl on one node (files named ...-h200.*)
GPUS=${GPUS:-2}
tag=$([ "$GPUS" = 1 ] && echo h200 || echo h200x2)
json=docs/gpu-runs/fleet-verify-nccl-$tag.json
log=docs/gpu-runs/fleet-verify-nccl-$tag.log
{
  echo "# $(date -u +%FT%TZ) $(uname -n): scripts/gpu_fleet_evidence.sh $*"
  nvidia-smi -L || true
  "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  "$PYTHON" scripts/gpu_fleet_evidence.py --python "$(command -v "$PYTHON")" --out "$json" --gpus "$GPUS" "$@"
  echo "exit code: $?"
} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then cp "$json" "$log" "$OUT"/ 2>/dev/null || true; fi
exit "$rc"
