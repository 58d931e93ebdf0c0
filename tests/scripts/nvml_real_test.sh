#!/usr/bin/env bash
# The GPU monitor against the real NVML (libnvidia-ml.so.1): where a GPU and
# its driver are present, the count Genie reports equals nvidia-smi's.
# Skips (77) with the reason elsewhere.
set -uo pipefail
B="$GENIE_BUILD_DIR"
unset GENIE_NVML_LIBRARY GENIE_MASTER_ADDR
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "skip: no nvidia-smi: no NVIDIA driver on this machine"
  exit 77
fi
want=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$want" -eq 0 ]; then
  echo "skip: nvidia-smi lists no GPU"
  exit 77
fi
got=$("$B/tests/itest_cluster_tool" gpus | sed -n 's/^gpus \([0-9-]*\)$/\1/p')
[ "$got" = "$want" ] || { echo "FAIL: Genie sees '$got' GPUs through NVML, nvidia-smi $want"; exit 1; }
"$B/tests/itest_cluster_tool" state | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
for g in s["node"]["gpus"]:
    assert g["name"] and g["memory_total"] > 0, g
    print("gpu", g["index"], g["name"], "util", g["utilization"], "temp", g["temperature_c"])
' || { echo "FAIL: GPU metrics"; exit 1; }
echo "nvml_real_test: $got GPU(s), as nvidia-smi"
