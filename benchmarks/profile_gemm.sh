#!/usr/bin/env bash
# Nsight Compute over the decode-shaped NVFP4 GEMMs (shipped launch configs) and cuBLAS BF16 on the same shapes:
# speed of light, memory, warp states (stall reasons), scheduler, occupancy, and stall samples per SASS instruction.
# Needs a CUDA GPU and ncu on the PATH; run from the repository root.
#   bash benchmarks/profile_gemm.sh [CASE ...]     # CASE = model:layer:m:dir:impl, e.g. 7b:gate_up:1:fwd:qerl
#   (impl ws: the warp-specialized forward kernel; CASE may end in :BM,BN,stages,split,consumers,in_flight,maxnreg)
#   LAYOUT=words bash benchmarks/profile_gemm.sh ...   # the weights in the "words" code layout (default: pairs)
# Writes under $OUT (else benchmarks/out/profile): details.txt (every case's sections), sass.tar.gz (per case: the
# SASS with its stall samples, CSV) and reports.tar.gz (the .ncu-rep files, for the Nsight Compute UI).
set -uo pipefail
out=${OUT:-benchmarks/out/profile}
command -v ncu >/dev/null || PATH=$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
command -v ncu >/dev/null || { echo "ncu (Nsight Compute) not found: install it or put it on the PATH"; exit 1; }
work=$(mktemp -d)
mkdir -p "$out" "$work/rep" "$work/sass"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(7b:gate_up:1:fwd:qerl 7b:gate_up:1:fwd:bf16 7b:o:1:fwd:qerl 7b:down:1:fwd:qerl
  7b:qkv:16:fwd:qerl 7b:gate_up:64:fwd:qerl 7b:gate_up:1:bwd:qerl 7b:gate_up:1:bwd:bf16 32b:gate_up:1:fwd:qerl)
sections=(SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables ComputeWorkloadAnalysis WarpStateStats
  SchedulerStats Occupancy LaunchStats SourceCounters)
sec_args=(); for s in "${sections[@]}"; do sec_args+=(--section "$s"); done
: >"$out/details.txt"
for c in "${cases[@]}"; do
  IFS=: read -r model layer m dir impl wscfg <<<"$c"
  name="${model}_${layer}_m${m}_${dir}_${impl}${wscfg:+_${wscfg//,/-}}_${LAYOUT:-pairs}"
  extra=(); [ -n "${wscfg:-}" ] && extra=(--ws-config "$wscfg")
  echo "=== $name" | tee -a "$out/details.txt"
  timeout 120 ncu --clock-control none --nvtx --nvtx-include "profile/" "${sec_args[@]}" -f -o "$work/rep/$name" \
    python3 benchmarks/profile_gemm.py --model "$model" --layer "$layer" --m "$m" --dir "$dir" --impl "$impl" \
      --layout "${LAYOUT:-pairs}" "${extra[@]}" \
    2>&1 | grep -v "^==PROF==" | tail -3 | tee -a "$out/details.txt"
  if [ -f "$work/rep/$name.ncu-rep" ]; then
    ncu --import "$work/rep/$name.ncu-rep" --page details >>"$out/details.txt" 2>&1
    ncu --import "$work/rep/$name.ncu-rep" --page source --csv --print-source sass >"$work/sass/$name.csv" 2>&1
  else
    echo "no report for $name" | tee -a "$out/details.txt"
  fi
  # archive after every case, so a run stopped by a time limit still leaves what it profiled
  tar -czf "$out/sass.tar.gz" -C "$work" sass
  tar -czf "$out/reports.tar.gz" -C "$work" rep
done
ls -la "$out"
