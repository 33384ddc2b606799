#!/usr/bin/env bash
# "Is AMP safe for my model?" evidence (issue 25) for docs/gpu-runs/: the three examples through
# `envkit verify --model` (JSON + HTML each) and the full `envkit verify` whose fp8 check holds the FP8 figures.
# Run from the repo root on a machine with one GPU whose python3 has torch, click, jinja2, pyyaml, packaging
# and rich (no py-rattler, conda or network needed: envkit runs from this checkout). Writes 8 files to $OUT.
# About 2-3 minutes on an H200; every command is bounded by `timeout`.
set -u
OUT=${OUT:?set OUT to an empty folder}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
STEPS=${STEPS:-200}
FUNC=${FUNC:-make}  # the examples' GPU sizes; FUNC=small STEPS=20 tries the script on a CPU in about a minute
run() {  # log the exact command, run it, log its exit code and wall time
  echo "\$ $*"; local s; s=$(date +%s%N)
  timeout 170 "$@"; echo "rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
}
{
  date -u +%Y-%m-%dT%H:%M:%SZ; git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  for ex in transformer_encoder lstm_lm tiny_eps_norm; do
    extra=(); [ "$ex" = transformer_encoder ] && extra=(--max-batch)  # <= 15 s per precision
    run "$PY" -m envkit verify --python "$PY" --model "examples/$ex.py:$FUNC" --steps "$STEPS" --timeout 150 \
      "${extra[@]}" --report "$OUT/amp-$ex-h200.json" --html "$OUT/amp-$ex-h200.html"
  done
  run "$PY" -m envkit verify --python "$PY" --timeout 150 --report "$OUT/verify-fp8-h200.json"
  "$PY" - "$OUT/verify-fp8-h200.json" <<'PYEOF'
import json, sys
fp8 = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "fp8"]
print("fp8:", json.dumps(fp8[0] if fp8 else "no fp8 check", indent=1))
PYEOF
} 2>&1 | tee "$OUT/amp-evidence.log"
