#!/usr/bin/env bash
# The GPU runs behind benchmarks/RESULTS.md and the vLLM checks, in phases (run from the repository root on a GPU
# machine without network access; vLLM 0.26 and its dependencies come as an archive in three parts under
# .device/vllm/c1..c3, unpacked to /tmp/site by the first three phases).
#   phase 1: GPU tests + Triton GEMM benchmark (no vLLM yet)     phase 2: vLLM bundle part 2 only
#   phase 3: vLLM: NVFP4/Marlin + LoRA + AQN check, GEMM with Marlin in the same run
#   phase 4: vLLM rollout throughput NVFP4 vs BF16 with LoRA
# Phases 5a-5i and 6a-6e are two back-to-back chains (run 3, one machine each: a machine is held 30 minutes at most);
# their payloads come from scripts/device_payload.sh (see the comments at 5a and 6a).
set -uo pipefail
phase=${1:?phase}
out=${OUT:-/tmp/qerl-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
vllm_env() {  # the environment vllm_unpack.sh sets, for calls after the bundle is unpacked (no part carried)
  [ -f /tmp/site/.vllm_done ] || echo "vllm bundle not unpacked on this machine"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
  export DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
}
bundle_part1_and_checkpoint() {  # bundle part 1, the device's name, a random NVFP4 checkpoint of shape $1 (limit $2 s)
  bash .device/vllm/c1/vllm_unpack.sh .device/vllm
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
  timeout "$2" python3 benchmarks/rollout_vllm.py checkpoint --shape "$1" --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
}
gpu_name_and_tests() {  # the device's name, then the GPU tests (limit $1 s)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
  timeout "$1" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
    tests/test_kernels_ws_gpu.py 2>&1 \
    | tail -4 | tee "$out/gpu_tests.txt"
}
gemm_old_and_new() {  # benchmarks/gemm_nvfp4.py ARGS on the carried previous code (.device/old), then on this code
  local limit=$1; shift
  for v in old new; do
    script=benchmarks/gemm_nvfp4.py; [ $v = old ] && script=.device/old/benchmarks/gemm_nvfp4.py
    timeout "$limit" python3 $script "$@" --out "$out/gemm_$v" 2>&1 | tail -3
  done
}
gemm_old_new_json() {  # as gemm_old_and_new (limit $1, work dir $2, then ARGS), returning only the JSONs and the
                       # new table's markdown (a device call returns at most 8 files)
  local limit=$1 w=$2; shift 2
  for v in old new; do
    script=benchmarks/gemm_nvfp4.py; [ $v = old ] && script=.device/old/benchmarks/gemm_nvfp4.py
    timeout "$limit" python3 $script "$@" --out $w/$v 2>&1 | tail -12
    cp $w/$v/gemm_nvfp4.json "$out/gemm_$v.json"
  done
  cp $w/new/gemm_nvfp4.md "$out/gemm_new.md"
}
# Run 31's stream-K candidates with whole tiles stored by TMA (WsConfig fields): 128 x 128 pure / whole waves,
# 256 x 128 of 2 stages and 128 x 256 of 3 stages with whole waves.
SK_CANDIDATES="128,128,4,1,2,False,None,False,1,False;128,128,4,1,2,False,None,False,1,True;\
256,128,2,1,2,False,None,False,1,True;128,256,3,1,2,False,None,False,1,True"
SK_RING="256,128,3,1,2,False,None,False,1,False;256,128,3,1,2,False,None,False,1,True"  # pure / whole waves
SK_IDS="(Falsex1xFalse or Falsex2xFalse or Falsex3xFalse or Falsex4xFalse or Falsex1xTrue)"  # stream-K configs' ids
sk_gpu_tests() {  # the forward's stream-K GPU tests (limit $1 s), in parallel processes; summary in $out/gpu_tests.txt
  local t="timeout $1 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
  $t -k "matches_fp32_reference and $SK_IDS and (128x256x3 or 128x128x4)" > /tmp/t_fp32a.txt 2>&1 &
  $t -k "matches_fp32_reference and $SK_IDS and not (128x256x3 or 128x128x4)" > /tmp/t_fp32b.txt 2>&1 &
  for c in 128x128x4 256x128x2 128x256x3 "256x128x3 and x1xFalse" "256x128x3 and x1xTrue"; do
    $t -k "tma_store and $SK_IDS and $c" > "/tmp/t_tma_${c%% *}_${#c}.txt" 2>&1 &
  done
  $t -k "stream_k_completes or stream_k_leaves or dp_waves" > /tmp/t_sk.txt 2>&1 &
  $t -k "(last_tile or rows_past) and not input_gradient and $SK_IDS" > /tmp/t_lasta.txt 2>&1 &
  $t -k "(small_boxes or epilogues_on_boxes or words_layout_gives) and not input_gradient and $SK_IDS" \
    > /tmp/t_lastb.txt 2>&1 &
  wait
  for f in /tmp/t_*.txt; do echo "$f: $(grep -v "^  \|Warning" $f | tail -1)"; grep "^FAILED\|^ERROR" $f; done \
    | tee "$out/gpu_tests.txt"
}
# The input gradient's stream-K configs' ids (WsBwdConfig: ...x<fused>x<stream_k>x<consumers>x...)
SK_BWD_IDS="(xFalsex1x2x or xFalsex2x2x)"
gpu_test_summary() {  # each test log /tmp/$1_*.txt: its last line and its failures, also into $out/gpu_tests.txt
  for f in /tmp/"$1"_*.txt; do echo "$f: $(grep -v "^  \|Warning" "$f" | tail -1)"; grep "^FAILED\|^ERROR" "$f"; done \
    | tee "$out/gpu_tests.txt"
}
sk_bwd_gpu_tests() {  # the input gradient's stream-K GPU tests (limit $1 s), in parallel processes, as sk_gpu_tests
  local t="timeout $1 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
  $t -k "input_gradient_matches_fp32 and $SK_BWD_IDS and 256x4" > /tmp/b_fp32a.txt 2>&1 &
  $t -k "input_gradient_matches_fp32 and $SK_BWD_IDS and not 256x4" > /tmp/b_fp32b.txt 2>&1 &
  $t -k "rows_layout_input_gradient and $SK_BWD_IDS" > /tmp/b_rows.txt 2>&1 &
  $t -k "input_gradient and (last_tile or rows_past) and $SK_BWD_IDS" > /tmp/b_last.txt 2>&1 &
  $t -k "stream_k_completes or stream_k_leaves or dp_waves or seeded" > /tmp/b_sk.txt 2>&1 &
  wait
  for f in /tmp/b_*.txt; do echo "$f: $(grep -v "^  \|Warning" $f | tail -1)"; grep "^FAILED\|^ERROR" $f; done \
    | tee "$out/gpu_tests.txt"
}
timed_search() {  # after a warm-up (warm_then_search / warm_shards_then_search): its failures, then
                  # benchmarks/gemm_ws.py ARGS in one process (limit $1 s) into $out/$2 (its log in $out/log_$2.txt)
  local limit=$1 dir=$2; shift 2
  grep -h "warm-up" /tmp/warm_*.txt | head -5
  timeout "$limit" python3 benchmarks/gemm_ws.py "$@" --out "$out/$dir" 2>&1 | grep -v Warning \
    | tee "$out/log_$dir.txt" | tail -3
}
warm_then_search() {  # benchmarks/gemm_ws.py ARGS for models $2 and layers $3 (limit $1 s): first --warm-only in one
                      # process per model and layer (compiling the candidates in parallel), then timed_search into $4
  local limit=$1 models=$2 layers=$3 dir=$4; shift 4
  rm -f /tmp/warm_*.txt  # (a machine kept warm still holds the logs of an earlier call)
  for mo in ${models//,/ }; do for la in ${layers//,/ }; do
    timeout "$limit" python3 benchmarks/gemm_ws.py --warm-only --models "$mo" --layers "$la" "$@" \
      > "/tmp/warm_${mo}_$la.txt" 2>&1 &
  done; done
  wait
  timed_search "$limit" "$dir" --models "$models" --layers "$layers" "$@"
}
vllm_parts() {  # the vLLM bundle (vllm_bundle.sh's archive) in $2 parts, .device/vllmN/p1..pN (split -n N; one per
                # call, as the carry limit next to the tracked tree allows): each call stores the part it carried
                # under /tmp/vllm_chunks, the call that completes the set checks the sha256 and unpacks into
                # /tmp/site; then vLLM's environment
  local b=$1 n=$2
  mkdir -p /tmp/vllm_chunks
  cp -n "$b"/p*/part_* "$b"/p*/bundle.sha256 /tmp/vllm_chunks/ 2>/dev/null
  if [ ! -f /tmp/site/.vllm_done ] && [ "$(ls /tmp/vllm_chunks/part_* | wc -l)" = "$n" ] \
      && [ -f /tmp/vllm_chunks/bundle.sha256 ]; then
    if [ "$(cat /tmp/vllm_chunks/part_* | sha256sum | cut -c1-64)" = "$(cat /tmp/vllm_chunks/bundle.sha256)" ]; then
      mkdir -p /tmp/site && cat /tmp/vllm_chunks/part_* | xz -d -T0 | tar -x -C /tmp/site && touch /tmp/site/.vllm_done
    else
      echo "vllm bundle sha256 mismatch"
    fi
  fi
  echo "vllm parts here: $(ls /tmp/vllm_chunks | tr '\n' ' ')"
  if [ -f /tmp/site/.vllm_done ]; then vllm_env; fi
}
warm_shards_then_search() {  # benchmarks/gemm_ws.py ARGS (limit $1 s): --warm-only in $2 processes, one shard of the
                             # search's configs each (--warm-shard), then timed_search into $3
  local limit=$1 n=$2 dir=$3; shift 3
  rm -f /tmp/warm_*.txt
  for i in $(seq 0 $((n - 1))); do
    timeout "$limit" python3 benchmarks/gemm_ws.py --warm-only --warm-shard "$i/$n" "$@" > "/tmp/warm_$i.txt" 2>&1 &
  done
  wait
  timed_search "$limit" "$dir" "$@"
}
entries_tests_then_verify() {  # new table entries: the dispatch's and the epilogues' GPU tests, then the rollout forward
                               # ("words") against the tables in JSON $1 (routes.py --verify) on models $2, layers $3
                               # at M = $4
  rm -f /tmp/t_*.txt  # (a machine kept warm still holds the logs of an earlier call)
  local t="timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short"
  $t tests/test_kernels_ws_gpu.py -k "default_dispatch or swiglu_dispatch or swiglu_after or row_norm_epilogue" \
    > /tmp/t_dispatch.txt 2>&1 &
  $t tests/test_fused_norm.py tests/test_kernels_gpu.py -k "norm or fused or packed_linear" > /tmp/t_norm.txt 2>&1 &
  wait
  gpu_test_summary t
  timeout 300 python3 benchmarks/routes.py --verify --layout words --dirs fwd --models "$2" --layers "$3" \
    --previous-tables "$1" --ms "$4" --out "$out/verify_words" 2>&1 | grep -v Warning \
    | tee "$out/log_verify.txt" | tail -2
}
gpu_tests_parallel() {  # GPU test runs in parallel processes (limit $1 s each), one per NAME:PYTEST-ARGS argument
                       # (quoted as in a shell), logged to /tmp/t_NAME.txt; their summary into $out/gpu_tests.txt
  local limit=$1 spec; shift
  rm -f /tmp/t_*.txt  # (a machine kept warm still holds the logs of an earlier call)
  for spec in "$@"; do
    eval "timeout $limit python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short ${spec#*:}" \
      > "/tmp/t_${spec%%:*}.txt" 2>&1 &
  done
  wait
  gpu_test_summary t
}
rollout_point() {  # rollout_vllm.py rollout, rank 32, batch 1 / 8 / 32 / 64: shape $1, format $2, fp4 kernel $3 (NVFP4
                  # only), limit $4 s, engine memory share $5; JSON and log into $out as rollout_$1_$2[_$3]
  local name=rollout_$1_$2; [ "$2" = nvfp4 ] && name=${name}_$3
  timeout "$4" python3 benchmarks/rollout_vllm.py rollout --shape "$1" --formats "$2" --ranks 32 --batches 1,8,32,64 \
    --fp4-kernel "$3" --gpu-memory-utilization "$5" --workdir /tmp/qb --json "$out/$name.json" 2>&1 \
    | grep -v Warning > "$out/log_$name.txt"
  tail -12 "$out/log_$name.txt"
}
words_3b_entries_check() {  # run 41's 3B "words" entries: the dispatch's GPU tests, the rollout forward against the
                            # tables before run 41 (routes.py --verify, limit $1 s, $2 s of replays a cell) at M = $3,
                            # then the issue's benchmark on the 3B forward
  gpu_tests_parallel 200 \
    "dispatch:tests/test_kernels_ws_gpu.py -k 'default_dispatch and not puts_bias or swiglu_dispatch or swiglu_after'" \
    "words:tests/test_kernels_gpu.py -k 'words or packed_linear'"
  timeout "$1" python3 benchmarks/routes.py --verify --layout words --dirs fwd --models 3b \
    --previous-tables benchmarks/results/run41_2026-11-29/previous_tables.json --ms "$3" --budget "$2" \
    --out "$out/verify_words" 2>&1 | grep -v Warning | tee "$out/log_verify.txt" | tail -2
  timeout 120 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 3b --ms 128,256,1024,4096 --dirs fwd \
    --out "$out/gemm" 2>&1 | grep -v Warning > "$out/log_gemm.txt"
  tail -6 "$out/log_gemm.txt"
}
every_gpu_test() {  # every GPU test of the suite (-m gpu) in 8 processes (conftest's --shard I/8), limit 540 s: the
                    # files that hold them (the others import trl / datasets, which the GPU machine lacks)
  local files="tests/test_decode_attention.py tests/test_fused_norm.py tests/test_fused_qkv.py tests/test_nvfp4.py"
  files="$files tests/test_kernels_gpu.py tests/test_kernels_pdl_gpu.py tests/test_kernels_ws_gpu.py"
  files="$files tests/test_rollout_hf.py"
  gpu_tests_parallel 540 "s0:$files --shard 0/8" "s1:$files --shard 1/8" "s2:$files --shard 2/8" \
    "s3:$files --shard 3/8" "s4:$files --shard 4/8" "s5:$files --shard 5/8" "s6:$files --shard 6/8" \
    "s7:$files --shard 7/8"
}
device_name() {  # the device's name, memory and driver into $out/device.txt
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
}
gemm_alternating() {  # benchmarks/gemm_nvfp4.py ARGS on the previous code (.device/old) and this code in turn, twice
                      # (old1 new1 old2 new2; limit $1 s each, work dir prefix $2), the SM clock and temperature logged
                      # around each pass; returns the four JSONs and clocks.txt
  local limit=$1 w=$2; shift 2
  local q="--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader"
  for pass in old1 new1 old2 new2; do
    script=benchmarks/gemm_nvfp4.py; [ "${pass#old}" != "$pass" ] && script=.device/old/benchmarks/gemm_nvfp4.py
    echo "$pass before: $(nvidia-smi $q)" >> "$out/clocks.txt"
    timeout "$limit" python3 $script "$@" --out ${w}_$pass 2>&1 | tail -1
    echo "$pass after: $(nvidia-smi $q)" >> "$out/clocks.txt"
    cp ${w}_$pass/gemm_nvfp4.json "$out/gemm_$pass.json"
  done
}
decode_steps_compared() {  # the decode harness on the Triton step (with the profile) and on the torch step, three
                           # passes each (work dir prefix $1); the JSONs and logs in one tar
  local w=$1 att prof
  mkdir -p "$w"
  for att in triton sdpa; do
    prof=""; [ $att = triton ] && prof=--profile
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --attention $att --repeats 3 $prof \
      --out ${w}_$att 2>&1 | tail -12 | tee "$w/log_decode_$att.txt"
    cp ${w}_$att/decode_nvfp4.json "$w/decode_$att.json"
  done
  tar -cf "$out/decode.tar" -C "$w" .
}
decode_epilogue_variants() {  # the decode harness with SiLU x up in gate_up's kernel (swiglu), with the RMSNorms
                              # folded into the projections too (norm), and with qkv's RoPE epilogue too (rope), three
                              # passes each (work dir prefix $1, limit $2 s each, $3: extra flags of the rope run)
  local w=$1 limit=$2 extra=$3 v flag
  mkdir -p ${w}_dec
  for v in swiglu norm rope; do
    flag=""; [ $v = norm ] && flag="--fused-norm"; [ $v = rope ] && flag="--fused-norm --rope-epilogue $extra"
    timeout "$limit" python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      $flag --out ${w}_$v 2>&1 | tail -12 | tee "${w}_dec/log_decode_$v.txt"
    cp ${w}_$v/decode_nvfp4.json "${w}_dec/decode_$v.json"
  done
  tar -cf "$out/decode.tar" -C ${w}_dec .
}
dispatch_alternating() {  # benchmarks/gemm_ws.py --dispatch-only ARGS (nvfp4_matmul's default dispatch and BF16) on
                          # the previous code (.device/old, the script copied in) and this code in turn, twice (limit
                          # $1 s each, work dir prefix $2), the SM clock logged around each pass
  local limit=$1 w=$2; shift 2
  local q="--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader"
  cp benchmarks/gemm_ws.py benchmarks/gemm_nvfp4.py .device/old/benchmarks/  # this run's harness, the old kernels
  for pass in old1 new1 old2 new2; do
    script=benchmarks/gemm_ws.py; [ "${pass#old}" != "$pass" ] && script=.device/old/benchmarks/gemm_ws.py
    echo "$pass before: $(nvidia-smi $q)" >> "$out/clocks.txt"
    timeout "$limit" python3 $script --dispatch-only "$@" --out ${w}_$pass 2>&1 | tail -7
    echo "$pass after: $(nvidia-smi $q)" >> "$out/clocks.txt"
    cp ${w}_$pass/gemm_ws.json "$out/dispatch_$pass.json"
  done
}
dispatch_layouts() {  # dispatch_alternating on the input gradient, on "pairs" then on "rows" (work dir prefix $1),
                      # M = 1 / 8 / 16 / 32, every layer; each layout's files in one tar under $out
  local w=$1 top=$out lay
  for lay in pairs rows; do
    out=/tmp/${w}_$lay; mkdir -p $out
    dispatch_alternating 60 /tmp/${w}_${lay}_p --dirs bwd --shipped-bwd-layout $lay --models 7b,14b,32b --ms 1,8,16,32
    out=$top; tar -cf "$out/dispatch_$lay.tar" -C /tmp/${w}_$lay .
  done
}
large_m_verify() {  # the dispatch's GPU tests (limit 240 s), then benchmarks/slab_plans.py --verify at M = $1 (every
                    # layer: the default dispatch against the slab path and the plan before run 25), log under $out
  timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
    -k "rows_layout_default or module_backward or default_dispatch or slab or large_m or packed_linear" -rf \
    --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
  timeout 340 python3 benchmarks/slab_plans.py --verify --ms "$1" --out "$out" 2>&1 \
    | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | cut -c1-60,150-260 | tail -96
}
words_verify() {  # the dispatch's GPU tests -k "$1" (limit 150 s), then the forward on "words" against run 25's
                  # tables (benchmarks/routes.py --verify --previous-tables) at M = $2, log under $out
  timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "$1" -rf --tb=short 2>&1 \
    | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
  timeout 400 python3 benchmarks/routes.py --verify --layout words --dirs fwd \
    --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json --ms "$2" --out "$out" 2>&1 \
    | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /; s/best.*repeat/repeat/' "$out/log.txt" | cut -c1-150 | tail -50
}
pairs_verify() {  # the forward and the input gradient on "pairs" against run 27's tables before (routes.py --verify
                  # --previous-tables), limit $1 s each, at M = $2; logs under $out, their last $3 lines shown
  for d in fwd bwd; do
    timeout "$1" python3 benchmarks/routes.py --verify --dirs $d \
      --previous-tables benchmarks/results/run27_2026-11-27/previous_tables.json --ms "$2" --out "$out/$d" 2>&1 \
      | grep -v Warning > "$out/log_$d.txt"
  done
  cat "$out"/log_*.txt | sed 's/ | .* | / /; s/best.*repeat/repeat/' | cut -c1-170 | tail -"$3"
}
dispatch_groups() {  # dispatch_alternating for each GROUP:MS:LIMIT after the models ($1) and a work name ($2): group
                     # bwd the input gradient, words / pairs the forward on that layout, at M = MS (comma-separated),
                     # LIMIT s a pass; each group's files in one tar under $out (a call returns at most 8 files)
  local models=$1 w=$2 top=$out spec g ms limit; shift 2
  for spec in "$@"; do
    IFS=: read -r g ms limit <<< "$spec"
    out=/tmp/${w}_$g; mkdir -p "$out"
    case $g in
      bwd) dispatch_alternating "$limit" /tmp/${w}_${g}_pass --models "$models" --ms "$ms" --dirs bwd ;;
      words) dispatch_alternating "$limit" /tmp/${w}_${g}_pass --models "$models" --ms "$ms" --shipped-layout words ;;
      pairs) dispatch_alternating "$limit" /tmp/${w}_${g}_pass --models "$models" --ms "$ms" ;;
    esac
    tar -cf "$top/dispatch_$g.tar" -C "$out" .
  done
  out=$top
}
dispatch_alternating_words() {  # as dispatch_alternating, the new passes on the weights' "words" layout
  local limit=$1 w=$2; shift 2
  local q="--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader"
  cp benchmarks/gemm_ws.py .device/old/benchmarks/gemm_ws.py
  for pass in old1 new1 old2 new2; do
    script=benchmarks/gemm_ws.py; layout="--shipped-layout words"
    [ "${pass#old}" != "$pass" ] && script=.device/old/benchmarks/gemm_ws.py && layout=""
    echo "$pass before: $(nvidia-smi $q)" >> "$out/clocks.txt"
    timeout "$limit" python3 $script --dispatch-only $layout "$@" --out ${w}_$pass 2>&1 | tail -9
    echo "$pass after: $(nvidia-smi $q)" >> "$out/clocks.txt"
    cp ${w}_$pass/gemm_ws.json "$out/dispatch_$pass.json"
  done
}
dispatch_bwd_layouts() {  # benchmarks/gemm_ws.py --dispatch-only --dirs bwd ARGS on this code, the weights in the
                          # "pairs" then the "rows" layout, twice (limit $1 s each, work dir prefix $2)
  local limit=$1 w=$2; shift 2
  local q="--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader"
  for pass in pairs1 rows1 pairs2 rows2; do
    echo "$pass before: $(nvidia-smi $q)" >> "$out/clocks.txt"
    timeout "$limit" python3 benchmarks/gemm_ws.py --dispatch-only --dirs bwd --shipped-bwd-layout "${pass%?}" "$@" \
      --out ${w}_$pass 2>&1 | tail -7
    echo "$pass after: $(nvidia-smi $q)" >> "$out/clocks.txt"
    cp ${w}_$pass/gemm_ws.json "$out/dispatch_$pass.json"
  done
}
marlin_vs_dispatch() {  # vLLM's Marlin against the default dispatch on words (the rollout layout), forward, every
                        # layer at M = 1-128, in the same run (vLLM unpacked; work dir $1)
  timeout 400 python3 benchmarks/gemm_ws.py --dispatch-only --shipped-layout words --marlin --models 7b,14b,32b \
    --ms 1,4,8,16,32,64,128 --out "$1" 2>&1 | tee "$out/log_marlin.txt" | tail -10
  cp "$1/gemm_ws.json" "$out/gemm_ws_marlin.json"
}
ws_tests_and_fill_search() {  # the warp-specialized kernels' GPU tests (limit $1 s; -k $3 if given), then the
                              # whole-wave search (gemm_ws.py --tile-set fill) on every layer at M = 1 / 8 / 16 into
                              # work dir $2
  local filter=()
  [ -n "${3:-}" ] && filter=(-k "$3")
  timeout "$1" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py "${filter[@]}" 2>&1 \
    | tail -3 | tee "$out/gpu_tests_ws.txt"
  timeout 360 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16 --tile-set fill --layouts words \
    --shipped-layout words --out "$2" 2>&1 | tee "$out/log_search.txt" | tail -4
  cp "$2/gemm_ws.json" "$out/gemm_ws_fill.json"
}
rollout_14b_r32() {  # bundle part 3, then the 14B rank-32 rollouts, NVFP4 on our kernels and BF16, into $out/$1
  source .device/vllm/c3/vllm_unpack.sh .device/vllm
  timeout 540 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 --batches 1,8,64 \
    --fp4-kernel qerl --workdir /tmp/qb --json "$out/$1" 2>&1 | grep "\[bench\]\|rror"
}
pt_boxes() {  # NAME LIMIT ARGS: benchmarks/partial_tiles.py on this dispatch, whole boxes, spare rows (run 29's phases)
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 benchmarks/partial_tiles.py --variants "plain,whole boxes,spare" \
    --budget 0.25 "$@" --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"
  tail -1 "$out/log_$name.txt" | cut -c1-160
}

acc_env() {  # the wheels of .device/acc/p0 (installed by 77a) and this tree on the path, no hub
  export PYTHONPATH=/tmp/extra:.${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  export TOKENIZERS_PARALLELISM=false
}
acc_train() {  # NAME LOAD MODEL [ARGS]: GRPO with configs/smollm2_arith_gpu.yaml into /tmp/acc/run_NAME, continued
               # from its last checkpoint when one exists (limit $ACC_LIMIT s)
  local name=$1 load=$2 model=$3; shift 3
  timeout "$ACC_LIMIT" python3 -m qerl.train --config configs/smollm2_arith_gpu.yaml --model_name_or_path "$model" \
    --load "$load" --output_dir "/tmp/acc/run_$name" --report_to none --disable_tqdm true --resume "$@" \
    >> "/tmp/acc/logs/train_$name.log" 2>&1
  echo "train $name: exit $? at $(date +%T)"
}
acc_eval() {  # NAME MODEL LOAD [ARGS]: greedy pass@1 on 500 held-out two-digit +/- problems (64 new tokens)
  local name=$1 model=$2 load=$3; shift 3
  timeout 300 python3 -m eval.arith --model "$model" --load "$load" --backend hf --difficulty 1 --limit 500 \
    --n-samples 1 --temperature 0 --max-tokens 64 --batch-size 250 --output "/tmp/acc/eval/$name.json" \
    --overwrite --no-progress "$@" > "/tmp/acc/logs/eval_$name.log" 2>&1
  echo "eval $name: exit $? $(grep -o '"accuracy": [0-9.]*' "/tmp/acc/eval/$name.json" 2>/dev/null)"
}
acc_start() {  # CONFIG SEED: one of the three runs (nvfp4_aqn | nvfp4 | bf16) with this seed, in the background;
               # runs are named CONFIG (seed 0) or CONFIG_sSEED
  local cfg=$1 seed=$2 name=$1
  [ "$seed" = 0 ] || name=${cfg}_s$seed
  case $cfg in
    nvfp4_aqn) acc_train "$name" nvfp4 /tmp/acc/nvfp4 --seed "$seed" & ;;
    nvfp4) acc_train "$name" nvfp4 /tmp/acc/nvfp4 --aqn_mode off --seed "$seed" & ;;
    bf16) acc_train "$name" bf16 /tmp/acc/dense --aqn_mode off --seed "$seed" & ;;
  esac
}
acc_models() {  # the GGUF file from its pieces, the dense model from it, the NVFP4 checkpoint rebuilt from that and
                # checked against the manifest of llmcompressor's (once per machine)
  [ -f /tmp/acc/nvfp4/config.json ] && return
  cp .device/acc/p6/gguf_6 /tmp/acc/ && cat /tmp/acc/gguf_[0-6] > /tmp/acc/smol.gguf
  [ "$(sha256sum < /tmp/acc/smol.gguf | cut -c1-64)" = "$(cat .device/acc/p6/gguf.sha256)" ] || echo "gguf sha256 mismatch"
  python3 -c "from qerl.fixtures import convert_gguf; convert_gguf('/tmp/acc/smol.gguf', '/tmp/acc/dense')" 2>&1 | tail -2
  python3 scripts/nvfp4_rebuild.py rebuild --dense /tmp/acc/dense --manifest .device/acc/p6/manifest \
    --out /tmp/acc/nvfp4 2>&1 | tail -2 | tee "$out/rebuild.txt"
}
acc_finish() {  # the evaluations of the finished runs' adapters, then everything into $out/acc.tar
  local pids=() r load model
  for d in /tmp/acc/run_*; do
    r=${d#/tmp/acc/run_}
    [ -d "$d/final" ] && [ ! -f "/tmp/acc/eval/trained_$r.json" ] || continue
    load=nvfp4 model=/tmp/acc/nvfp4
    case $r in bf16_dequant*) load=bf16 model=/tmp/acc/dequant ;; bf16*) load=bf16 model=/tmp/acc/dense ;; esac
    acc_eval "trained_$r" $model $load --adapter "$d/final" & pids+=($!)
  done
  wait "${pids[@]}" 2>/dev/null
  for d in /tmp/acc/run_*; do
    cp "$d"/checkpoint-*/trainer_state.json "/tmp/acc/logs/state_${d#/tmp/acc/run_}.json" 2>/dev/null
  done
  tar -cf "$out/acc.tar" -C /tmp/acc logs eval
}

case "$phase" in
  1)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --target /tmp/pt .whl/*.whl
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    PYTHONPATH=/tmp/pt:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/gemm_nvfp4.py --models 32b --ms 1,16,64,128,1024,4096 --no-marlin \
      --out "$out/gemm32" 2>&1 | tail -45
    ;;
  1q)  # part 1 of the bundle + the GPU tests only
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --target /tmp/pt .whl/*.whl
    PYTHONPATH=/tmp/pt:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    ;;
  2)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  3c)  # the vLLM NVFP4/Marlin + LoRA + AQN check only
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -3
    timeout 300 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --json "$out/vllm_check.json" 2>&1 | tail -40
    ;;
  3)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -3
    timeout 240 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --json "$out/vllm_check.json" 2>&1 | tail -30
    timeout 150 python3 benchmarks/gemm_nvfp4.py --models 7b,32b --ms 1,16,64,128 --dirs fwd \
      --out "$out/gemm_marlin" 2>&1 | tail -40
    ;;
  4)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 540 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 16 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_7b.json" 2>&1 | tail -30
    ;;
  # Run 3 (a back-to-back chain on one machine; payloads from scripts/device_payload.sh). 5a-5c ferry the vLLM
  # bundle (5a also .whl, 5c also .device/smol/a); 5d carries .device/smol/b and .device/tok.
  5a)  # bundle part 1, extra wheels, GPU tests, the random 7B NVFP4 checkpoint
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .whl/*.whl
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|transformers|peft|accelerate|pyarrow|huggingface.hub) " \
      | tee -a "$out/device.txt"
    PYTHONPATH=/tmp/extra:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -2
    ;;
  5b)  # bundle part 2, the random 32B NVFP4 checkpoint, large-M GEMMs (training shapes) on the current slabs
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    timeout 240 python3 benchmarks/rollout_vllm.py checkpoint --shape 32b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -2
    PYTHONPATH=. timeout 200 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out "$out" 2>&1 | tail -40
    df -h /tmp | tail -1
    ;;
  5c)  # bundle part 3; vLLM NVFP4/Marlin + LoRA + AQN + sleep-mode check on the 7B shape
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    mkdir -p /tmp/smolparts && cp .device/smol/a/* /tmp/smolparts/
    PYTHONPATH=/tmp/extra:$PYTHONPATH python3 -c "import trl, datasets, math_verify, vllm; print('trl', trl.__version__, \
      'datasets', datasets.__version__, 'vllm', vllm.__version__)" 2>&1 | tail -1 | tee -a "$out/versions.txt"
    timeout 420 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --sleep-mode --json "$out/vllm_check.json" 2>&1 | grep -v "^ " | tail -25
    ;;
  5d)  # RL steps with trl + vLLM on the real SmolLM2 (NVFP4) and vLLM evaluation of the base and the trained adapter
    vllm_env
    cp .device/smol/b/* /tmp/smolparts/
    if [ "$(cat /tmp/smolparts/part_0* | sha256sum | cut -c1-64)" = "$(cat /tmp/smolparts/smol.sha256)" ]; then
      cat /tmp/smolparts/part_0* | xz -d | tar -x -C /tmp; else echo "smol checkpoint sha256 mismatch"; fi
    mkdir -p /tmp/tok && cp .device/tok/* /tmp/tok/
    smol=/tmp/smollm2-135m-instruct-nvfp4
    PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 240 python3 scripts/device_rl_e2e.py --config configs/smollm2_arith_nvfp4.yaml \
      --model $smol --steps 8 --json "$out/rl_e2e_smollm2.json" --output-dir /tmp/e2esmol \
      --vllm_max_model_length 512 --vllm_gpu_memory_utilization 0.15 --disable_tqdm true 2>&1 \
      | grep "check\]\|Error\|error" | tail -12
    for a in base trained; do
      extra=(); [ $a = trained ] && extra=(--adapter /tmp/e2esmol/final)
      PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 150 python3 -m eval.arith --model $smol --load nvfp4 --backend vllm \
        --difficulty 0 --limit 64 --n-samples 2 --temperature 1.0 --top-p 1.0 --max-tokens 48 --enforce-eager \
        --gpu-memory-utilization 0.15 --max-model-len 1024 --output "$out/eval_smollm2_vllm_$a.json" --overwrite \
        --no-progress "${extra[@]}" 2>&1 | tail -2
    done
    ;;
  5e)  # RL steps with trl + vLLM on the 7B-shaped NVFP4 checkpoint (SmolLM2 tokenizer; a token-dependent reward, so
       # GRPO has signal on random weights)
    vllm_env
    cp /tmp/tok/* /tmp/qb/qwen2.5-7b-nvfp4-random/
    PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 420 python3 scripts/device_rl_e2e.py --config configs/smollm2_arith_nvfp4.yaml \
      --model /tmp/qb/qwen2.5-7b-nvfp4-random --steps 4 --token-reward --json "$out/rl_e2e_7b.json" \
      --output-dir /tmp/e2e7b --max_completion_length 32 --gradient_checkpointing true --vllm_max_model_length 512 \
      --vllm_gpu_memory_utilization 0.25 --disable_tqdm true 2>&1 | grep "check\]\|Error\|error" | tail -12
    ;;
  5f)  # 32B rollouts with a rank-32 adapter, NVFP4 and BF16
    vllm_env
    timeout 570 python3 benchmarks/rollout_vllm.py rollout --shape 32b --formats nvfp4,bf16 --ranks 32 \
      --batches 1,8,64 --gpu-memory-utilization 0.9 --workdir /tmp/qb --json "$out/rollout_32b.json" 2>&1 | tail -3
    ;;
  5g|5h)  # one RL step on the 32B-shaped NVFP4 model: rank 32, 16 x 256 = 4096 completion tokens; 5g without,
          # 5h with sleep mode. The engine gets 0.2 of an H200 (28 GiB), what the configs' 0.35 gives it on 80 GB.
    vllm_env
    sleep=(); name=rl_step_32b_no_sleep; [ "$phase" = 5h ] && { sleep=(--sleep-mode); name=rl_step_32b_sleep; }
    timeout 560 python3 benchmarks/rollout_vllm.py rl-step --shape 32b --rank 32 --batch 16 --prompt-len 256 \
      --gen-len 256 --steps 2 --gpu-memory-utilization 0.2 "${sleep[@]}" --workdir /tmp/qb --json "$out/$name.json" \
      2>&1 | grep "\[bench\]\|Error\|error" | tail -12
    ;;
  5i)  # 14B: NVFP4 vs BF16, without an adapter and with rank 32
    vllm_env
    timeout 570 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 0,32 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_14b.json" 2>&1 | tail -3
    ;;
  # Second machine (what did not fit in the first one's 30 minutes): the bundle again (6a-6c; 6a also .whl, 6c also
  # .device/bnb), the NF4 (QLoRA) engine check, the 14B rank sweep, 7B rollouts.
  6a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .whl/*.whl
    for shape in 14b 7b; do
      timeout 200 python3 benchmarks/rollout_vllm.py checkpoint --shape $shape --format nvfp4 --workdir /tmp/qb 2>&1 | tail -2
    done
    timeout 60 python3 benchmarks/rollout_vllm.py checkpoint --shape tiny --format bf16 --weights random --workdir /tmp/qb \
      2>&1 | tail -2
    ;;
  6b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  6c)  # the NF4 (bitsandbytes) engine + trainer check on a tiny random BF16 checkpoint
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .device/bnb/*.whl
    PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 250 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-tiny-bf16-random \
      --load nf4 --rank 16 --json "$out/vllm_check_nf4.json" 2>&1 | grep "check\]\|Error\|error" | tail -12
    ;;
  6d)  # 14B rank sweep: 16 and 64, NVFP4 and BF16
    vllm_env
    timeout 580 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 16,64 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_14b_ranks.json" 2>&1 | tail -3
    ;;
  6e)  # 7B: NVFP4 vs BF16, without an adapter and with rank 16
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 0,16 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_7b.json" 2>&1 | tail -3
    ;;
  # Run 4 (one machine, back to back): does vLLM's VLLM_LORA_ENABLE_DUAL_STREAM (adapter kernels on a second stream
  # beside the base GEMM) lift the 14B rollouts with an active adapter? 7a-7c ferry the bundle (7a also makes the
  # random 14B NVFP4 checkpoint); 7c measures with the second stream, 7d without it on the same machine.
  7a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 400 python3 benchmarks/rollout_vllm.py checkpoint --shape 14b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -2
    ;;
  7b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  7c|7d)  # 14B, rank-32 adapter, NVFP4 and BF16: 7c with the second LoRA stream, 7d without
    if [ "$phase" = 7c ]; then source .device/vllm/c3/vllm_unpack.sh .device/vllm; else vllm_env; fi
    dual=(); name=rollout_14b_r32; [ "$phase" = 7c ] && { dual=(--lora-dual-stream); name=rollout_14b_r32_dual_stream; }
    timeout 570 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 \
      --batches 1,8,64 "${dual[@]}" --workdir /tmp/qb --json "$out/$name.json" 2>&1 | tail -4
    ;;
  # Run 4, kernels (a fresh machine, no vLLM): 8a GPU tests, then the small-M launch search (fused split reduction,
  # the separate reduce kernel for comparison, wider tiles, W as the left mma operand) on the 7B shapes; 8b the decode
  # harness with the configs 8a picked, eager and with the elementwise steps compiled; 8c the search on 32B shapes.
  8a)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py 2>&1 \
      | tail -15 | tee "$out/gpu_tests.txt"
    timeout 360 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b --ms 1,8,16,64,128 \
      --out "$out/gemm_tune_7b" 2>&1 | tail -24
    mkdir -p /tmp/run4 && cp "$out/gemm_tune_7b/tuned_configs.json" /tmp/run4/ 2>/dev/null
    ;;
  8b)
    for c in "" --compile; do
      name=decode${c:+_compiled}
      timeout 280 python3 benchmarks/decode_nvfp4.py --configs /tmp/run4/tuned_configs.json $c --out "$out/$name" \
        2>&1 | tail -6
    done
    ;;
  8c)
    timeout 560 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 32b --ms 1,8,16,64,128 \
      --out "$out/gemm_tune_32b" 2>&1 | tail -24
    ;;
  8d)  # large M: slab dequantization overlapped with the products on a second stream vs one stream; GPU kernel tests;
       # the decode harness (compiled) on the shipped launch configs
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tail -8 \
      | tee "$out/gpu_tests.txt"
    PYTHONPATH=. timeout 330 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out "$out" 2>&1 | tail -40
    timeout 100 python3 benchmarks/decode_nvfp4.py --compile --out "$out/decode_compiled_shipped" 2>&1 | tail -5
    ;;
  8e)  # register caps in the small-M forward search (7B and 32B, M = 1 / 8 / 16), then the decode harness on the picks
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py -k "match_reference" 2>&1 \
      | tail -4 | tee "$out/gpu_tests.txt"
    for m in 7b 32b; do
      timeout 200 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models $m --ms 1,8,16 --dirs fwd \
        --out "$out/gemm_tune_fwd_$m" 2>&1 | tail -9
    done
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --configs "$out/gemm_tune_fwd_7b/tuned_configs.json" \
      --out "$out/decode_compiled" 2>&1 | tail -5
    ;;
  8f)  # the input gradient at small M with MODE 3 in the search (7B and 32B, M = 1 / 8 / 16); GPU kernel tests
       # (MODE 3, measured slower, was removed after this run: commit 2787a7f has it)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tail -4 \
      | tee "$out/gpu_tests.txt"
    for m in 7b 32b; do
      timeout 200 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models $m --ms 1,8,16 --dirs bwd \
        --out "$out/gemm_tune_bwd_$m" 2>&1 | tail -9
    done
    ;;
  # Run 4, Marlin in the same process as the current kernels: 9a-9b ferry the vLLM bundle, 9c runs the forward GEMMs.
  9a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    ;;
  9b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  9c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 500 python3 benchmarks/gemm_nvfp4.py --models 7b,32b --ms 1,8,16,64,128 --dirs fwd \
      --out "$out/gemm_marlin" 2>&1 | tail -12
    ;;
  9d)  # the down projections (K = 18944 / 27648) at M = 1 / 8 with finer K splits in the search, Marlin alongside
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for m in 7b 32b; do
      timeout 250 python3 benchmarks/gemm_nvfp4.py --tune --models $m --layers down --ms 1,8 --dirs fwd \
        --out "$out/gemm_down_$m" 2>&1 | tail -6
    done
    ;;
  9e)  # M = 16 with finer K splits in the search (7B and 32B, forward), GPU tests of the shipped code
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py 2>&1 \
      | tail -4 | tee "$out/gpu_tests.txt"
    for m in 7b 32b; do
      timeout 150 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models $m --ms 16 --dirs fwd \
        --out "$out/gemm_m16_$m" 2>&1 | tail -5
    done
    ;;
  9f)  # the shipped state: default dispatch at small M (forward and input gradient), and the compiled decode harness
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 240 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,8,16,64,128 --out "$out/gemm" \
      2>&1 | tail -14
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --out "$out/decode_compiled" 2>&1 | tail -5
    ;;
  9g)  # M = 64 / 128 with finer K (forward) and N (input gradient) splits in the search, 7B and 32B
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    for m in 7b 32b; do
      timeout 270 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models $m --ms 64,128 \
        --out "$out/gemm_m64_$m" 2>&1 | tail -7
    done
    ;;
  9h)  # the slab dequantization kernel alone: GB/s for rows per program x warps, 7B and 32B weights
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    PYTHONPATH=. timeout 300 python3 benchmarks/gemm_large_m.py --dequant --out "$out" 2>&1 | tail -100
    ;;
  # Run 4: the NVFP4 checkpoint served in vLLM by this project's Triton kernels (--fp4-kernel qerl) instead of Marlin.
  10a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    for shape in 7b 14b; do
      timeout 250 python3 benchmarks/rollout_vllm.py checkpoint --shape $shape --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    done
    ;;
  10b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  10c)  # 7B without an adapter: qerl kernels vs Marlin, same checkpoint (speed and the greedy check tokens)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for k in qerl marlin; do
      timeout 280 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4 --ranks 0 --batches 1,8,64 \
        --fp4-kernel $k --workdir /tmp/qb --json "$out/rollout_7b_$k.json" 2>&1 | tail -12
    done
    ;;
  10d)  # 14B NVFP4 on the qerl kernels, without and with a rank-32 adapter
    vllm_env
    timeout 580 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 0,32 --batches 1,8,64 \
      --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_14b_qerl.json" 2>&1 | tail -25
    ;;
  10e)  # 14B rank 32 on Marlin and on BF16, same machine as 10d
    vllm_env
    timeout 580 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 --batches 1,8,64 \
      --workdir /tmp/qb --json "$out/rollout_14b_marlin_bf16.json" 2>&1 | tail -25
    ;;
  # The vLLM check (adapter sync, generation, log-probs vs the trainer, AQN in the engine) with --fp4-kernel qerl
  # (not run on a GPU yet).
  11a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    timeout 200 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    ;;
  11b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  11c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 420 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --fp4-kernel qerl --rank 16 --json "$out/vllm_check_qerl.json" 2>&1 | grep "check\]\|Error\|error" | tail -14
    ;;
  # Run 5 (one machine, back to back): launch configs for the 14B rollouts with an adapter. 12a-12c ferry the bundle;
  # 12a also makes the random 14B NVFP4 checkpoint and searches this project's forward kernels on the two 14B layer
  # shapes the tables lack (gate_up 27648 x 5120, down 5120 x 13824), 12b their input gradient, 12c searches vLLM's
  # LoRA shrink / expand kernels on the 14B shapes (rank 32); 12d-12f time the rollouts with and without those tables.
  12a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    mkdir -p /tmp/run5
    timeout 300 python3 benchmarks/rollout_vllm.py checkpoint --shape 14b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    timeout 240 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 14b --layers gate_up,down --dirs fwd \
      --ms 1,8,16,64 --out "$out/gemm_tune_14b_fwd" 2>&1 | tail -12
    cp "$out/gemm_tune_14b_fwd/tuned_configs.json" /tmp/run5/tuned_14b_fwd.json
    ;;
  12b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    timeout 240 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 14b --layers gate_up,down --dirs bwd \
      --ms 1,8,16,64 --out "$out/gemm_tune_14b_bwd" 2>&1 | tail -12
    cp "$out/gemm_tune_14b_bwd/tuned_configs.json" /tmp/run5/tuned_14b_bwd.json
    ;;
  12c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 560 python3 benchmarks/tune_vllm_lora.py --shapes 14b --rank 32 --ms 8,1,16,64 --out "$out/lora_tune_14b" \
      2>&1 | grep -v "^ *$" | tail -30
    mkdir -p /tmp/run5/lora && cp "$out"/lora_tune_14b/*.json /tmp/run5/lora/
    ;;
  12d|12e)  # 14B rank 32, NVFP4 on this project's kernels (with the 12a-12b tables) and BF16: 12d with the tuned LoRA
            # tables, 12e with vLLM's default LoRA configs (same machine)
    vllm_env
    export QERL_TUNED_CONFIGS=/tmp/run5/tuned_14b_fwd.json:/tmp/run5/tuned_14b_bwd.json
    lora=/tmp/run5/lora; name=rollout_14b_r32_tuned_lora; [ "$phase" = 12e ] && { lora=vllm; name=rollout_14b_r32_vllm_lora; }
    timeout 580 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 --batches 1,8,64 \
      --fp4-kernel qerl --lora-kernel-configs $lora --workdir /tmp/qb --json "$out/$name.json" 2>&1 | grep "\[bench\]\|rror"
    ;;
  12f)  # the same machine: 14B without an adapter on this project's kernels, and Marlin with the tuned LoRA tables
    vllm_env
    export QERL_TUNED_CONFIGS=/tmp/run5/tuned_14b_fwd.json:/tmp/run5/tuned_14b_bwd.json
    timeout 280 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 0 --batches 1,8,64 \
      --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_14b_r0_qerl.json" 2>&1 | grep "\[bench\]\|rror"
    timeout 290 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 32 --batches 1,8,64 \
      --lora-kernel-configs /tmp/run5/lora --workdir /tmp/qb --json "$out/rollout_14b_r32_marlin_tuned_lora.json" \
      2>&1 | grep "\[bench\]\|rror"
    ;;
  12g)  # as 12d, with vLLM's specialize_active_lora (LoRA kernel grids for 1 active adapter instead of max_loras + 1)
    vllm_env
    export QERL_TUNED_CONFIGS=/tmp/run5/tuned_14b_fwd.json:/tmp/run5/tuned_14b_bwd.json
    timeout 330 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 --batches 1,8,64 \
      --fp4-kernel qerl --lora-kernel-configs /tmp/run5/lora --specialize-active-lora --workdir /tmp/qb \
      --json "$out/rollout_14b_r32_tuned_lora_specialized.json" 2>&1 | grep "\[bench\]\|rror"
    ;;
  # Run 5, second machine: the vLLM check on this project's kernels (11a-11c's command) and the shipped LoRA tables
  # (tuned on the 14B shape) on the 7B shape they were not tuned for: 13d with them (auto), 13e with vLLM's defaults.
  13a)
    bundle_part1_and_checkpoint 7b 200
    ;;
  13b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  13c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 560 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --fp4-kernel qerl --rank 16 --json "$out/vllm_check_qerl.json" 2>&1 | grep "check\]\|Error\|error\|LoRA kernel" | tail -20
    ;;
  13d|13e)
    vllm_env
    lora=auto; [ "$phase" = 13e ] && lora=vllm
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 16 --batches 1,8,64 \
      --lora-kernel-configs $lora --workdir /tmp/qb --json "$out/rollout_7b_r16_lora_$lora.json" 2>&1 | grep "\[bench\]\|rror"
    ;;
  # Run 5, third machine: the shipped state (the 14B GEMM entries in TUNED, the LoRA tables picked by auto, nothing
  # from the environment): GPU tests, then the 14B rank-32 rollouts on this project's kernels and on BF16.
  14a|16a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py 2>&1 \
      | tail -8 | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/rollout_vllm.py checkpoint --shape 14b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    ;;
  14b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  14c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    unset QERL_TUNED_CONFIGS VLLM_TUNED_CONFIG_FOLDER
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 --batches 1,8,64 \
      --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_14b_r32_shipped.json" 2>&1 | grep "\[bench\]\|rror"
    ;;
  14d)  # 32B rank 32 with the shipped LoRA tables (auto; tuned on the 14B shape), Marlin and BF16, batch 1 / 8
    vllm_env
    timeout 200 python3 benchmarks/rollout_vllm.py checkpoint --shape 32b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    timeout 390 python3 benchmarks/rollout_vllm.py rollout --shape 32b --formats nvfp4,bf16 --ranks 32 --batches 1,8 \
      --gpu-memory-utilization 0.9 --workdir /tmp/qb --json "$out/rollout_32b_r32_shipped_lora.json" 2>&1 \
      | grep "\[bench\]\|rror"
    ;;
  # Run 5, H100: LoRA launch tables for the H100 (the grid around the H200 picks), 15a-15c on one machine.
  15a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    ;;
  15b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  15c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 540 python3 benchmarks/tune_vllm_lora.py --shapes 14b --rank 32 --ms 8,1,16,64 --space near \
      --out "$out/lora_tune_14b_h100" 2>&1 | grep -v "^ *$" | tail -40
    ;;
  # Run 6: the LoRA expand in the NVFP4 GEMM's epilogue inside vLLM (qerl/rollout/vllm_lora_fusion.py), 16a-16e on
  # one machine: GPU tests, the vLLM check on the fused path with CUDA graphs, 14B rank-32 rollouts fused / not fused.
  # 16a: the same as 14a (bundle part 1, GPU tests, the 14B checkpoint).
  16b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    timeout 200 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    ;;
  16c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 560 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --fp4-kernel qerl --fuse-lora-expand --rank 16 --cuda-graphs --json "$out/vllm_check_qerl_fused.json" 2>&1 \
      | grep "check\]\|Error\|error\|fused" | tail -20
    ;;
  16d|16e)  # 16d: 14B rank 32, NVFP4 (fused expand) and BF16; 16e: NVFP4 with vLLM's expand kernels (same machine)
    vllm_env
    if [ "$phase" = 16d ]; then
      timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 32 \
        --batches 1,8,64 --fp4-kernel qerl --fuse-lora-expand --workdir /tmp/qb \
        --json "$out/rollout_14b_r32_fused.json" 2>&1 | grep "\[bench\]\|rror"
    else
      timeout 400 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 32 --batches 1,8,64 \
        --fp4-kernel qerl --no-fuse-lora-expand --workdir /tmp/qb --json "$out/rollout_14b_r32_unfused.json" 2>&1 \
        | grep "\[bench\]\|rror"
    fi
    ;;
  # Run 6, second machine (no vLLM): Nsight Compute over the decode-shaped GEMMs, stall reasons per instruction.
  17a)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    ncu --version | tail -1 | tee -a "$out/device.txt"
    OUT="$out" timeout 560 bash benchmarks/profile_gemm.sh 2>&1 | grep -v "^ " | tail -40
    ;;
  17b)  # third machine: the chunk-half-major scale layout: GPU tests, then the small-M GEMMs on it and on the
        # previous layout (the committed code before it, carried as .device/old: git archive cda91ca qerl
        # benchmarks/gemm_nvfp4.py) in the same run, then ncu on two cases of the new layout
    gpu_name_and_tests 150
    gemm_old_and_new 220 --no-marlin --models 7b,32b --ms 1,8,16,64,128
    mkdir -p /tmp/p17 && OUT=/tmp/p17 timeout 100 bash benchmarks/profile_gemm.sh 7b:gate_up:1:fwd:qerl \
      7b:gate_up:1:bwd:qerl 2>&1 | grep -v "^ " | tail -8
    cp /tmp/p17/sass.tar.gz "$out/sass_new.tar.gz"
    ;;
  # Run 6, fourth machine: 14B rollouts after 17b (the new scale layout, the expand fusion on by default with
  # --fp4-kernel qerl): 14B rank-32 rollouts, NVFP4 on our kernels and BF16. 18a-18c ferry the bundle.
  18a|20b|31a)  # 31a: 29a without its search (30b ran it); then 29b and 29c
    bundle_part1_and_checkpoint 14b 300
    ;;
  18b|20c|29b|34b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  18c|20d)
    rollout_14b_r32 rollout_14b_r32_shipped.json
    ;;
  # Run 6, fifth machine: the input gradient with its dY column blocks on whole BN steps (16-byte dY loads): GPU
  # tests, then the small-M input gradient on it and on the commit before it (.device/old: git archive 238f6a8 qerl
  # benchmarks/gemm_nvfp4.py) in the same run.
  19a)
    gpu_name_and_tests 150
    gemm_old_and_new 150 --no-marlin --models 7b,32b --ms 1,8,16,64,128 --dirs bwd
    ;;
  # Run 6, sixth machine: the chunk-major scale layout (8 bytes per W row and chunk, one load for both halves)
  # against the chunk-half-major one (.device/old: git archive a7a55fd qerl benchmarks/gemm_nvfp4.py), same run.
  19b)
    gpu_name_and_tests 100
    gemm_old_and_new 60 --no-marlin --models 7b,32b --ms 1,8,16,64,128
    ;;
  # Prepared after run 6 and not run as such (run 7's phases 21-24 did this work): 20a the input gradient's launch
  # search at M = 64 / 128 on the chunk-major scales and the compiled decode harness; 20b-20d (= 18a-18c) the 14B
  # rank-32 rollouts.
  20a)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 300 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,32b --ms 64,128 --dirs bwd \
      --out "$out/gemm_tune_bwd" 2>&1 | tail -8
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --out "$out/decode_compiled" 2>&1 | tail -5
    ;;
  # Run 7: W as the register operand of wgmma with the 2-byte dequantization (asm=2) at M = 64 / 128. 21a: GPU tests
  # and the forward launch search; 21b (same machine, right after): the input gradient's search, then the previous
  # commit's kernels (.device/old) and this code with both searches' picks, in one run; the compiled decode harness.
  21a)
    gpu_name_and_tests 230
    timeout 330 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,32b --ms 64,128 --dirs fwd \
      --out "$out/gemm_tune_fwd" 2>&1 | tail -6
    mkdir -p /tmp/q21 && cp "$out/gemm_tune_fwd/tuned_configs.json" /tmp/q21/fwd.json
    ;;
  21b)
    cp /tmp/q21/fwd.json "$out/" 2>/dev/null || echo "no forward picks from 21a on this machine"
    timeout 200 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,32b --ms 64,128 --dirs bwd \
      --out "$out/gemm_tune_bwd" 2>&1 | tail -6
    python3 -c "import json, sys; t = {}; [t.update(json.load(open(f))) for f in sys.argv[2:]]; \
json.dump(t, open(sys.argv[1], 'w'), indent=1)" "$out/tuned.json" /tmp/q21/fwd.json "$out/gemm_tune_bwd/tuned_configs.json"
    timeout 120 python3 .device/old/benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 64,128 \
      --out "$out/gemm_old" 2>&1 | tail -8
    timeout 120 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 64,128 --configs "$out/tuned.json" \
      --out "$out/gemm_new" 2>&1 | tail -8
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --out "$out/decode_compiled" 2>&1 | tail -5
    ;;
  # 22a/22b (one machine, back to back): the launch search with more candidates (one-warp 32-row tiles at M <= 8,
  # 8 K splits on the wgmma tiles, 2-stage input-gradient tiles) on the 7B, 14B and 32B shapes; then the previous
  # commit's kernels and this code with the picks, M = 1-128, in one run, and the decode harness on the picks.
  22a)
    w=/tmp/q22; mkdir -p $w
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 480 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 --dirs fwd \
      --out $w/tune_fwd 2>&1 | tail -12
    cp $w/tune_fwd/gemm_nvfp4.json "$out/gemm_tune_fwd.json"; cp $w/tune_fwd/tuned_configs.json "$out/tuned_fwd.json"
    ;;
  22b)  # (the device returns at most 8 files: the JSONs, and the new table as markdown)
    w=/tmp/q22
    timeout 150 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 64,128 --dirs bwd \
      --out $w/tune_bwd 2>&1 | tail -6
    python3 -c "import json, sys; t = {}; [t.update(json.load(open(f))) for f in sys.argv[2:]]; \
json.dump(t, open(sys.argv[1], 'w'), indent=1)" "$out/tuned.json" $w/tune_fwd/tuned_configs.json $w/tune_bwd/tuned_configs.json
    timeout 130 python3 .device/old/benchmarks/gemm_nvfp4.py --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 \
      --out $w/old 2>&1 | tail -12
    timeout 130 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 \
      --configs "$out/tuned.json" --out $w/new 2>&1 | tail -12
    QERL_TUNED_CONFIGS="$out/tuned.json" timeout 150 python3 benchmarks/decode_nvfp4.py --compile --out $w/decode \
      2>&1 | tail -5
    cp $w/tune_bwd/gemm_nvfp4.json "$out/gemm_tune_bwd.json"; cp $w/old/gemm_nvfp4.json "$out/gemm_old.json"
    cp $w/new/gemm_nvfp4.json "$out/gemm_new.json"; cp $w/new/gemm_nvfp4.md "$out/gemm_new.md"
    cp $w/decode/decode_nvfp4.json "$out/decode_compiled.json"
    ;;
  # 23a: large M: the register-operand wgmma tiles in the forward launch search at M = 256 / 1024 / 4096, and the
  # shipped slab path (gemm_large_m.py) in the same run.
  23a)
    w=/tmp/q23; mkdir -p $w
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    timeout 330 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,32b --ms 256,1024,4096 --dirs fwd \
      --out $w/tune_large 2>&1 | tail -8
    PYTHONPATH=. timeout 200 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out $w/large_m 2>&1 | tail -20
    cp $w/tune_large/gemm_nvfp4.json "$out/gemm_tune_large.json"; cp $w/tune_large/tuned_configs.json "$out/tuned_large.json"
    cp $w/large_m/gemm_large_m.json "$out/"
    ;;
  # 24a-24c (one machine, back to back): GPU tests of the shipped code and the vLLM bundle with the 14B checkpoint;
  # Nsight Compute on the new M = 64 picks; 14B rank-32 rollouts on the shipped kernels (batch 64 runs the M = 64
  # configs), NVFP4 on our kernels with the expand fused, and BF16.
  24a)
    bundle_part1_and_checkpoint 14b 240
    gpu_name_and_tests 260
    ;;
  24b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    mkdir -p /tmp/p24 && OUT=/tmp/p24 timeout 200 bash benchmarks/profile_gemm.sh 7b:qkv:64:fwd:qerl \
      7b:gate_up:64:fwd:qerl 7b:qkv:64:fwd:bf16 2>&1 | grep -v "^ " | tail -6
    cp /tmp/p24/sass.tar.gz /tmp/p24/details.txt "$out/"
    ;;
  # 25a/25b (one machine, back to back): the fused split sum loading 8 partials at a time (an experiment, not
  # shipped: benchmarks/RESULTS.md, run 7). 25a: GPU tests, then the
  # previous commit's kernels (.device/old: git archive 092b3ee) and this code, same tables, M = 1-128, in one run;
  # 25b: the launch search again on this code (forward and input gradient, M = 1-128), this code with its picks, the
  # decode harness with them, and the large-M paths (the tile loop now on the register-operand picks).
  25a)
    gpu_name_and_tests 260
    w=/tmp/q25; mkdir -p $w
    gemm_old_new_json 130 $w --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128
    ;;
  25b)
    w=/tmp/q25; mkdir -p $w
    timeout 200 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 \
      --out $w/tune 2>&1 | tail -12
    cp $w/tune/tuned_configs.json "$out/tuned.json"; cp $w/tune/gemm_nvfp4.json "$out/gemm_tune.json"
    timeout 100 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 \
      --configs "$out/tuned.json" --out $w/picks 2>&1 | tail -12
    cp $w/picks/gemm_nvfp4.json "$out/gemm_picks.json"
    QERL_TUNED_CONFIGS="$out/tuned.json" timeout 100 python3 benchmarks/decode_nvfp4.py --compile --out $w/decode \
      2>&1 | tail -5
    cp $w/decode/decode_nvfp4.json "$out/decode_compiled.json"
    PYTHONPATH=. timeout 120 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out $w/large_m 2>&1 | tail -6
    cp $w/large_m/gemm_large_m.json "$out/"
    ;;
  # 26a (not shipped): the split sum capped at 4 partials and 32 loaded registers a thread (8 at a time raised the
  # 128 x 64 input-gradient tile's registers), `TUNED` from 25b; 28a: the scales converted two per instruction in the
  # register-operand and 8-16-row tiles (shipped: the forward's 8-16-row tiles only, RESULTS run 7). Each: GPU tests,
  # then the previous commit's kernels (.device/old: git archive 092b3ee for 26a, 5e8d034 for 28a) and that code in
  # one run, and the decode harness.
  26a|28a)
    gpu_name_and_tests 240
    w=/tmp/q$phase; mkdir -p $w
    gemm_old_new_json 110 $w --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128
    timeout 100 python3 benchmarks/decode_nvfp4.py --compile --out $w/decode 2>&1 | tail -5
    cp $w/decode/decode_nvfp4.json "$out/decode_compiled.json"
    ;;
  # 27a: the shipped state (092b3ee's kernels and tables; the split-sum experiment of 25-26 not shipped) with small
  # large-M products kept on the tile loop (SLAB_MIN_FLOP): GPU tests, then the large-M paths.
  27a)
    gpu_name_and_tests 240
    w=/tmp/q27; mkdir -p $w
    PYTHONPATH=. timeout 200 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out $w/large_m 2>&1 | tail -6
    cp $w/large_m/gemm_large_m.json "$out/"
    ;;
  # Next (not run yet), one machine: 29a the vLLM bundle's part 1 with the 14B checkpoint, and the input gradient's
  # launch search at M <= 16 on the shipped kernels (last searched in runs 4-5, before the chunk-major scales); 29b
  # (= 18b) the bundle's part 2; 29c (= 24c) the 14B rank-32 rollouts on the shipped decode tiles.
  29a)
    bundle_part1_and_checkpoint 14b 240
    timeout 240 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 1,8,16 --dirs bwd \
      --out /tmp/q29 2>&1 | tail -6
    cp /tmp/q29/tuned_configs.json "$out/tuned_bwd_small_m.json"; cp /tmp/q29/gemm_nvfp4.md "$out/"
    ;;
  # One-warpgroup register-operand tiles (4 warps, 64 W rows; `_one_warpgroup` in gemm_nvfp4.py) in the launch
  # search at M = 64-4096, and the slab path in the same run (its own harness) for M >= 1024.
  32a)
    device_name
    timeout 300 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 64,128,256,1024 --dirs fwd \
      --out /tmp/q32 2>&1 | tail -5
    timeout 150 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,32b --ms 4096 --dirs fwd \
      --out /tmp/q32b 2>&1 | tail -2
    PYTHONPATH=. timeout 120 python3 benchmarks/gemm_large_m.py --ms 1024,4096 --out /tmp/q32c 2>&1 | tail -4
    for d in q32 q32b; do cp /tmp/$d/gemm_nvfp4.json "$out/$d.json"; cp /tmp/$d/tuned_configs.json "$out/tuned_$d.json"; done
    cp /tmp/q32c/gemm_large_m.json "$out/"
    ;;
  # The picks of 32a in TUNED: the previous commit and this code alternately (as 30e), forward M = 64-1024.
  33a)
    device_name
    gemm_alternating 120 /tmp/q33 --no-marlin --models 7b,14b,32b --ms 64,128,256,1024 --dirs fwd
    ;;
  # vLLM's Marlin NVFP4 GEMM against ours in the same process (last measured in run 5): 34a / 34b the bundle's parts 1
  # and 2, 34c part 3 and the forward at M = 1-128 on the 7B / 14B / 32B shapes.
  34a)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    device_name
    ;;
  34c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 400 python3 benchmarks/gemm_nvfp4.py --models 7b,14b,32b --ms 1,4,8,16,64,128 --dirs fwd \
      --out /tmp/q34 2>&1 | tail -14
    cp /tmp/q34/gemm_nvfp4.json /tmp/q34/gemm_nvfp4.md "$out/"
    ;;
  # The decode tiles' one-dot variants (fewer registers on the 2-chunk tiles: 158 -> 124 for 8 x 128) in the forward
  # search at M <= 16.
  35a)
    device_name
    timeout 400 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 1,8,16 --dirs fwd \
      --out /tmp/q35 2>&1 | tail -5
    cp /tmp/q35/gemm_nvfp4.json "$out/q35.json"; cp /tmp/q35/tuned_configs.json "$out/tuned_q35.json"
    ;;
  # The picks of 35a in TUNED: the previous commit and this code alternately at M <= 16 (forward), then the decode
  # harness on this code.
  35b)
    device_name
    gemm_alternating 100 /tmp/q35 --no-marlin --models 7b,14b,32b --ms 1,8,16 --dirs fwd
    timeout 100 python3 benchmarks/decode_nvfp4.py --compile --out /tmp/q35d 2>&1 | tail -4
    cp /tmp/q35d/decode_nvfp4.json "$out/decode.json"
    ;;
  24c|29c)
    rollout_14b_r32 rollout_14b_r32.json
    ;;
  # After run 7: a chunk's two halves in one dot (``one_dot``; the register-operand wgmma tiles by default). 30a the GPU
  # tests, then the forward at M = 64-1024 on the commit before (.device/old: git archive 774583f qerl
  # benchmarks/gemm_nvfp4.py) and on this code with the same tables, and the decode harness; 30b the launch search
  # with one- and two-dot candidates (forward M = 64 / 128 / 1024, input gradient M = 1-128).
  30a)
    gpu_name_and_tests 200
    gemm_old_new_json 150 /tmp/q30 --no-marlin --models 7b,14b,32b --ms 64,128,256,1024 --dirs fwd
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --out /tmp/q30d 2>&1 | tail -4
    cp /tmp/q30d/decode_nvfp4.json "$out/decode.json"
    ;;
  30b)
    device_name
    timeout 330 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 64,128,1024 --dirs fwd \
      --out /tmp/q30f 2>&1 | tail -3
    timeout 240 python3 benchmarks/gemm_nvfp4.py --tune --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128 --dirs bwd \
      --out /tmp/q30b 2>&1 | tail -3
    for d in q30f q30b; do cp /tmp/$d/tuned_configs.json "$out/tuned_$d.json"; cp /tmp/$d/gemm_nvfp4.json "$out/$d.json"; done
    ;;
  # With the picks of 30b in TUNED: 30c the GPU tests (more configs than 30a's time limit allowed), 30d the commit
  # before (.device/old, 774583f) and this code, each with its own tables, forward and input gradient at M = 1-1024 in
  # one run, then the decode harness.
  30c)
    gpu_name_and_tests 540
    ;;
  30d)
    device_name
    gemm_old_new_json 240 /tmp/q30d --no-marlin --models 7b,14b,32b --ms 1,8,16,64,128,256,1024 --dirs fwd,bwd
    timeout 100 python3 benchmarks/decode_nvfp4.py --compile --out /tmp/q30e 2>&1 | tail -4
    cp /tmp/q30e/decode_nvfp4.json "$out/decode.json"
    ;;
  # 30d timed a few kernels 6-14% slower in the second (new) pass though their SASS is identical to the first's; 30e
  # alternates the two versions (old, new, old, new) at M = 64-1024 and logs the SM clock and temperature around each.
  30e)
    device_name
    gemm_alternating 120 /tmp/q30e --no-marlin --models 7b,14b,32b --ms 64,128,256,1024 --dirs fwd,bwd
    cat "$out/clocks.txt"
    ;;
  # Run 9: the warp-specialized forward kernel (Gluon, nvfp4_gemm_ws) in nvfp4_matmul's dispatch. 36a: the GPU tests
  # (with the new kernel's), the default dispatch of the previous commit (.device/old: git archive 2d0c582 qerl
  # benchmarks/gemm_nvfp4.py benchmarks/decode_nvfp4.py) and of this code in turn, twice, at M = 32-1024; 36b the
  # compiled decode harness on both.
  36a)
    gpu_name_and_tests 240
    dispatch_alternating 100 /tmp/q36 --models 7b,14b,32b --ms 32,64,128,256,512,1024
    cat "$out/clocks.txt"
    ;;
  36b)
    device_name
    for v in old new; do
      script=benchmarks/decode_nvfp4.py; [ $v = old ] && script=.device/old/benchmarks/decode_nvfp4.py
      timeout 150 python3 $script --compile --out /tmp/q36dec_$v 2>&1 | tail -4
      cp /tmp/q36dec_$v/decode_nvfp4.json "$out/decode_$v.json"
    done
    ;;
  # With the input-gradient kernel in the dispatch as well: 37a the GPU tests, 37b the default dispatch of the previous
  # commit (.device/old, as in 36a) and of this code in turn, twice, forward and input gradient at M = 32-1024.
  37a)
    gpu_name_and_tests 400
    ;;
  37b)
    device_name
    dispatch_alternating 130 /tmp/q37 --dirs fwd,bwd --models 7b,14b,32b --ms 32,64,128,256,512,1024
    cat "$out/clocks.txt"
    ;;
  # 37c: after the input-gradient table gained M = 1 / 8 / 16 (searched on machine BH: bwd at M = 1-16, forward at
  # M = 16), the same comparison at M = 1-1024 in both directions on the final tables.
  37c)
    device_name
    dispatch_alternating 150 /tmp/q37c --dirs fwd,bwd --models 7b,14b,32b --ms 1,8,16,32,64,128,256,512,1024
    cat "$out/clocks.txt"
    ;;
  # 37d: the down projections' forward entries at M = 64 / 128 from the search with split-K 2-4 on every tile
  # (machine BJ), against the previous commit alternately.
  37d)
    device_name
    dispatch_alternating 60 /tmp/q37d --dirs fwd --models 14b,32b --layers down --ms 64,128
    cat "$out/clocks.txt"
    ;;
  # 37e: the entries from the second search with wider splits (machine BK: forward M = 32, input gradient M = 32-128).
  37e)
    device_name
    dispatch_alternating 90 /tmp/q37e --dirs fwd,bwd --models 7b,14b,32b --layers o,gate_up,down --ms 32,128
    cat "$out/clocks.txt"
    ;;
  # 38a-38c: vLLM 0.26 serving the 14B NVFP4 checkpoint on this project's kernels without an adapter (rank 0), where
  # batch 8 / 64 decode runs the warp-specialized forward kernel from M = 17 on: with it, with it turned off
  # (QERL_WS_KERNELS=0, the Triton kernels as before), and BF16. 38a = 31a (bundle part 1, the checkpoint), 38b = 29b.
  38a|41a)
    bundle_part1_and_checkpoint 14b 300
    ;;
  38b|41b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  38c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for v in ws triton; do
      [ $v = triton ] && export QERL_WS_KERNELS=0
      timeout 200 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 0 --batches 8,64 \
        --repeats 1 --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_14b_r0_$v.json" 2>&1 | grep "\[bench\]\|rror"
    done
    unset QERL_WS_KERNELS
    timeout 180 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 0 --batches 8,64 \
      --repeats 1 --workdir /tmp/qb --json "$out/rollout_14b_r0_bf16.json" 2>&1 | grep "\[bench\]\|rror"
    ;;
  # Run 10: the forward kernel's decode tiles (X^T 8 or 16 wide) and three / four CTAs per SM, split partials summed
  # in the kernel. 40a: the kernel's GPU tests, then the search at M = 1 / 8 / 16 against the shipped path (the
  # Triton decode kernels). 40b: the occupancy tiles at M = 32-128 (wider splits) against the shipped tables.
  40a)
    device_name
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16 --out /tmp/q40a 2>&1 | tail -45
    cp /tmp/q40a/gemm_ws.json /tmp/q40a/gemm_ws.md /tmp/q40a/tuned_ws.json "$out/"
    ;;
  40b)
    device_name
    timeout 560 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 32,64,128 --tile-set occupancy \
      --wide-splits --out /tmp/q40b 2>&1 | tail -40
    cp /tmp/q40b/gemm_ws.json /tmp/q40b/gemm_ws.md /tmp/q40b/tuned_ws.json "$out/"
    ;;
  # 40c: the GPU tests on the new tables, then the default dispatch of the previous commit (.device/old: git archive
  # f26bf60 qerl benchmarks/gemm_nvfp4.py benchmarks/decode_nvfp4.py) and of this code in turn, twice, at M = 1-32
  # (M = 1 / 8 unchanged: the control).
  40c)
    gpu_name_and_tests 330
    dispatch_alternating 100 /tmp/q40c --dirs fwd --models 7b,14b,32b --ms 1,8,16,32
    cat "$out/clocks.txt"
    ;;
  # 40d: the input gradient with 8-32 rows of dY per CTA on 64 / 80 registers (its GPU tests first), searched at
  # M = 1-32 against the shipped tables.
  40d)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k input_gradient 2>&1 \
      | tail -3 | tee "$out/gpu_tests.txt"
    timeout 360 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16,32 --dirs bwd --tile-set occupancy \
      --out /tmp/q40d 2>&1 | tail -40
    cp /tmp/q40d/gemm_ws.json /tmp/q40d/gemm_ws.md /tmp/q40d/tuned_ws.json "$out/"
    ;;
  # 40e: the GPU tests on the final tables, then the default dispatch of the previous commit (.device/old, as in 40c)
  # and of this code in turn, twice, forward and input gradient at M = 1-32.
  40e)
    gpu_name_and_tests 330
    dispatch_alternating 120 /tmp/q40e --dirs fwd,bwd --models 7b,14b,32b --ms 1,8,16,32
    cat "$out/clocks.txt"
    ;;
  # 40f: the input gradient's 32-row tiles at M = 64 / 128 (two to four M tiles per chunk, three CTAs per SM).
  40f)
    device_name
    timeout 300 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 64,128 --dirs bwd --tile-set occupancy \
      --out /tmp/q40f 2>&1 | tail -30
    cp /tmp/q40f/gemm_ws.json /tmp/q40f/gemm_ws.md /tmp/q40f/tuned_ws.json "$out/"
    ;;
  # 40g: the input gradient's split partials summed in the kernel (its GPU tests first), searched at M = 1-32 with
  # the 8- to 32-row tiles against the tables of 40d.
  40g)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "input_gradient or fused" \
      2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    timeout 360 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16,32 --dirs bwd --tile-set occupancy \
      --out /tmp/q40g 2>&1 | tail -40
    cp /tmp/q40g/gemm_ws.json /tmp/q40g/gemm_ws.md /tmp/q40g/tuned_ws.json "$out/"
    ;;
  # 40h: as 40e on the final tables (with the input gradient's split sums in the kernel from 40g).
  40h)
    gpu_name_and_tests 330
    dispatch_alternating 120 /tmp/q40h --dirs fwd,bwd --models 7b,14b,32b --ms 1,8,16,32
    cat "$out/clocks.txt"
    ;;
  # 41a-41c: 14B rollouts with a rank-32 adapter on this project's kernels, the adapter's expand fused into the Triton
  # GEMM's epilogue (the default; that path never takes the warp-specialized kernel) against vLLM's own LoRA kernels
  # (--no-fuse-lora-expand: the projections run the warp-specialized kernel where its tables say), and BF16, at batch
  # 8 / 32 / 64: 41a = 38a (bundle part 1, the checkpoint), 41b = 38b, 41c = 42c (below).
  # 42a-42c: as 41a-41c after nvfp4_matmul runs the warp-specialized kernel from M = 17 also with an adapter (the
  # expand added after it; below, the Triton kernel's fused epilogue as before). 42a also runs that dispatch's test.
  # 43a-43c: the same after that expand casts u once for all slices.
  42a|43a)
    bundle_part1_and_checkpoint 14b 300
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k adapter_expand 2>&1 \
      | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  42b|43b)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  41c|42c|43c)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for v in fused unfused; do
      flag=--fuse-lora-expand; [ $v = unfused ] && flag=--no-fuse-lora-expand
      timeout 200 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 32 --batches 8,32,64 \
        --repeats 1 --fp4-kernel qerl $flag --workdir /tmp/qb --json "$out/rollout_14b_r32_$v.json" 2>&1 | tail -2
    done
    timeout 170 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 32 --batches 8,32,64 \
      --repeats 1 --workdir /tmp/qb --json "$out/rollout_14b_r32_bf16.json" 2>&1 | tail -2
    ;;
  # 44a: the GPU tests on the final code of run 10.
  # Run 11: the "words" code layout (prepare_weight(layout="words"): one 32-bit word per thread's mma fragment, decoded
  # in 12 instructions per 8 weights) in the warp-specialized forward, against the "pairs" layout on the same configs.
  # 45a: the kernels' GPU tests (both layouts agree bit for bit), then the shipped table configs at M = 32-1024 on
  # both layouts.
  45a)
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k words 2>&1 | tail -4 | tee "$out/gpu_tests.txt"
    timeout 270 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 32,64,128,256,1024 --tile-set table \
      --layouts words,pairs --out /tmp/q45a 2>&1 | tail -16
    cp /tmp/q45a/gemm_ws.json "$out/"
    ;;
  # 45b / 45c: the decode tiles (M = 1 / 8 / 16) on both layouts against the shipped path (Triton decode kernels).
  45b)
    device_name
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py -k words -x --tb=short \
      2>&1 | grep -v "^  File\|^    " | tail -25 > "$out/words_triton_test.txt"
    timeout 480 python3 benchmarks/gemm_ws.py --models 7b,14b --ms 1,8,16 --layouts words,pairs --out /tmp/q45b \
      2>&1 | tail -30
    cp /tmp/q45b/gemm_ws.json /tmp/q45b/gemm_ws.md "$out/"
    ;;
  # 45c: the same on 32B, then the search on the words layout alone at M = 32-1024 (tables for TUNED_WORDS).
  45c)
    device_name
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py -k words 2>&1 | tail -2 \
      | tee "$out/gpu_tests.txt"
    timeout 150 python3 benchmarks/gemm_ws.py --models 32b --ms 1,8,16 --layouts words,pairs --out /tmp/q45c \
      2>&1 | tail -4
    timeout 400 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 32,64,128,256,512,1024 --layouts words \
      --tile-set all --out /tmp/q45c2 2>&1 | tail -7
    cp /tmp/q45c/gemm_ws.json "$out/small_32b.json"
    cp /tmp/q45c2/gemm_ws.json "$out/words_search.json"
    cp /tmp/q45c2/tuned_ws.json "$out/tuned_words.json"
    ;;
  # 45d: large M on the words layout: the search at M = 1024-4096, the slab path on both layouts.
  45d)
    device_name
    timeout 540 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1024,2048,4096 --layouts words \
      --out /tmp/q45d 2>&1 | tail -5
    cp /tmp/q45d/gemm_ws.json "$out/words_large_m.json"
    cp /tmp/q45d/tuned_ws.json "$out/tuned_words_large_m.json"
    ;;
  # 45e-45g: one machine, three calls (the vLLM bundle's parts). 45e: part 1, the 14B checkpoint, then the default
  # dispatch on the words layout against the previous commit's (pairs), alternating passes, forward at M = 1-1024.
  45e)
    bundle_part1_and_checkpoint 14b 300
    dispatch_alternating_words 100 /tmp/d45e --models 7b,14b,32b --ms 1,8,16,32,64,128,256,1024 --dirs fwd
    ;;
  # 45f: part 2, the GPU tests on this code, the decode harness on both layouts.
  45f)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
      tests/test_kernels_ws_gpu.py 2>&1 | tail -4 | tee "$out/gpu_tests.txt"
    for lay in pairs words; do
      timeout 120 python3 benchmarks/decode_nvfp4.py --compile --layout $lay --out /tmp/dec_$lay 2>&1 | tail -4
      cp /tmp/dec_$lay/decode_nvfp4.json "$out/decode_$lay.json"
    done
    ;;
  # 45g: part 3, 14B rank-32 rollouts: NVFP4 on the words layout (the engine's default on a Hopper GPU), on the pairs
  # layout (QERL_CODE_LAYOUT=pairs), and BF16.
  45g)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for lay in words pairs; do
      QERL_CODE_LAYOUT=$lay timeout 190 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 \
        --ranks 32 --batches 8,32,64 --repeats 1 --fp4-kernel qerl --workdir /tmp/qb \
        --json "$out/rollout_14b_r32_$lay.json" 2>&1 | tail -2
    done
    timeout 170 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 32 --batches 8,32,64 \
      --repeats 1 --workdir /tmp/qb --json "$out/rollout_14b_r32_bf16.json" 2>&1 | tail -2
    ;;
  # 45h-45j: the adapter's expand after the warp-specialized kernel in one launch (add_bias_and_lora_'s kernel), 14B
  # rank-32 rollouts again. 45h: part 1, the checkpoint, the GPU tests of the epilogue and the words layout.
  45h)
    bundle_part1_and_checkpoint 14b 300
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py tests/test_kernels_ws_gpu.py \
      -k "lora or words" 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  45h2)  # 45h without the tests (the 45j chain again on a fresh machine)
    bundle_part1_and_checkpoint 14b 300
    ;;
  45i)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  # 45j: words layout with the fused expand (the default) and with vLLM's LoRA kernels (their engines start slower: the
  # warp-specialized kernel compiles one variant per config vLLM's graph capture meets, 116 s against 68 s in 45g).
  45j)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    for v in fused unfused; do
      flag=--fuse-lora-expand; [ $v = unfused ] && flag=--no-fuse-lora-expand
      timeout 280 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 32 --batches 8,32,64 \
        --repeats 1 --fp4-kernel qerl $flag --workdir /tmp/qb --json "$out/rollout_14b_r32_words_$v.json" 2>&1 | tail -1
    done
    ;;
  # 45k: the same machine: BF16 and the pairs layout.
  45k)
    vllm_env
    timeout 250 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 32 --batches 8,32,64 \
      --repeats 1 --workdir /tmp/qb --json "$out/rollout_14b_r32_bf16.json" 2>&1 | tail -1
    QERL_CODE_LAYOUT=pairs timeout 250 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 \
      --ranks 32 --batches 8,32,64 --repeats 1 --fp4-kernel qerl --workdir /tmp/qb \
      --json "$out/rollout_14b_r32_pairs_fused.json" 2>&1 | tail -1
    ;;
  # 45l: the GPU tests on the final code of run 11.
  45l)
    gpu_name_and_tests 420
    ;;
  44a)
    gpu_name_and_tests 330
    ;;
  # Run 12. 46a: the two consumers of the large-M forward in ping-pong (WsConfig.pingpong 0 / 1 / 2, commit ddbb569)
  # on the words table's configs, and 256-row tiles of X, at M = 1024 / 2048.
  46a)
    device_name
    timeout 560 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1024,2048 --tile-set table+wide \
      --layouts words --shipped-layout words --pingpong 0,1,2 --out /tmp/q46a 2>&1 | tee "$out/log.txt" | tail -8
    cp /tmp/q46a/gemm_ws.json /tmp/q46a/gemm_ws.md "$out/"
    ;;
  # 46b: the stream-K forward (WsConfig.stream_k): its GPU tests, then the words table's configs, the 256-row tiles and
  # their stream-K variants at M = 256-4096.
  46b)
    device_name
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -x 2>&1 | tail -15 \
      | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024,2048,4096 --tile-set table+wide \
      --layouts words --shipped-layout words --stream-k --out /tmp/q46b 2>&1 | tee "$out/log.txt" | tail -8
    cp /tmp/q46b/gemm_ws.json /tmp/q46b/gemm_ws.md "$out/"
    ;;
  # 46c: the default dispatch on words weights, the previous commit (.device/old: ddbb569) against this code with the
  # run-12 entries of TUNED_WORDS, alternating; then the GPU tests of the kernels.
  46c)
    device_name
    dispatch_alternating 130 /tmp/q46c --models 7b,14b,32b --ms 256,512,1024,2048,4096 --shipped-layout words
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "words or stream or dispatch" 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  # 46d: sustained load (seconds per variant, clocks sampled) on the words dispatch; then the stream-K search on the
  # pairs layout (the training forward's) at M = 256-1024.
  46d)
    device_name
    timeout 150 python3 benchmarks/sustained.py --cells 7b:gate_up:4096,32b:gate_up:1024,14b:down:1024,7b:o:2048,14b:o:1024 \
      --seconds 2.5 --out /tmp/q46d 2>&1 | grep "sustained\|pass 2" | tee "$out/sustained.txt"
    cp /tmp/q46d/sustained.json "$out/"
    timeout 300 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024 --tile-set table+wide \
      --layouts pairs --stream-k --out /tmp/q46d2 2>&1 | tee "$out/log.txt" | tail -4
    cp /tmp/q46d2/gemm_ws.json "$out/"
    ;;
  # 46e: the default dispatch on pairs weights (the training forward), the previous commit against the run-12 TUNED
  # entries, alternating; the same with the sustained-load timing on four cells.
  46e)
    device_name
    dispatch_alternating 100 /tmp/q46e --models 7b,14b,32b --ms 256,512,1024
    timeout 120 python3 benchmarks/sustained.py --cells 7b:gate_up:1024,14b:down:256,32b:down:512,7b:down:1024 \
      --seconds 2.5 --layout pairs --out /tmp/q46e_s 2>&1 | grep "sustained\|samples" | tee "$out/sustained.txt"
    cp /tmp/q46e_s/sustained.json "$out/"
    ;;
  # 46f: the stream-K input gradient: the kernels' GPU tests, then the input gradient's search with stream-K at M =
  # 256-1024.
  46f)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -x 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    timeout 370 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024 --dirs bwd --stream-k \
      --out /tmp/q46f 2>&1 | tee "$out/log.txt" | tail -4
    cp /tmp/q46f/gemm_ws.json "$out/"
    ;;
  # 46g: the input gradient with two consumers (one per half of the chunk; WsBwdConfig.consumers): its GPU tests, then
  # the search with those tiles (and stream-K) at M = 512-4096.
  46g)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -x -k "input_gradient or stream" \
      2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    timeout 400 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 512,1024,2048,4096 --dirs bwd --stream-k \
      --bwd-two-consumers --out /tmp/q46g 2>&1 | tee "$out/log.txt" | tail -5
    cp /tmp/q46g/gemm_ws.json "$out/"
    ;;
  # 46h: the two-consumer input gradient as stream-K too: GPU tests, then the search at M = 256-2048.
  46h)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -x -k "input_gradient or stream" \
      2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    timeout 400 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024,2048 --dirs bwd --stream-k \
      --bwd-two-consumers --out /tmp/q46h 2>&1 | tee "$out/log.txt" | tail -5
    cp /tmp/q46h/gemm_ws.json "$out/"
    ;;
  # 46i: the input gradient's default dispatch, the previous commit against the run-12 TUNED_BWD entries, alternating;
  # then the GPU tests on the final code.
  46i)
    dispatch_alternating 100 /tmp/q46i --models 7b,14b,32b --ms 256,512,1024 --dirs bwd
    gpu_name_and_tests 400
    ;;
  # 46j: the GPU tests on the review commit (the kernels' stage setup in two helpers).
  46j)
    gpu_name_and_tests 400
    ;;
  # 46k: sustained load on every layer at M = 1024 / 4096, forward and input gradient, pairs (the training layout).
  46k)
    device_name
    timeout 560 python3 benchmarks/sustained.py --cells "" --models 7b,14b,32b --ms 1024,4096 --dirs fwd,bwd \
      --layout pairs --seconds 1.0 --out /tmp/q46k 2>&1 | grep "sustained\|samples" > "$out/sustained.txt"
    cp /tmp/q46k/sustained.json "$out/"
    ;;
  # Run 13. 47a: the GPU tests, then Nsight Compute on the input gradient at M = 1024 (the shipped two-consumer tiles)
  # and cuBLAS on the same shapes: which pipe bounds it. (It ran on an intermediate tree, the two-consumer step already
  # loading its code bytes by ldmatrix; the tests hit their time limit.)
  47a)
    gpu_name_and_tests 330
    mkdir -p /tmp/p47 && OUT=/tmp/p47 timeout 200 bash benchmarks/profile_gemm.sh 7b:o:1024:bwd:qerl 7b:o:1024:bwd:bf16 \
      32b:gate_up:1024:bwd:qerl 2>&1 | grep -v "^ " | tail -8
    cp /tmp/p47/details.txt /tmp/p47/sass.tar.gz "$out/"
    ;;
  # 47b: the input gradient's code bytes by ldmatrix.trans (two per thread and step against 32 byte loads; the
  # accumulator's rows in a column order the store undoes): the kernels' GPU tests, then the input gradient's
  # default dispatch, the previous commit (.device/old: b064e5c) against this code, alternating.
  47b)
    device_name
    timeout 280 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 75 /tmp/q47b --models 7b,14b,32b --ms 1,16,256,1024 --dirs bwd
    ;;
  # 47c: the input gradient's scale bytes rearranged by a scale warp (one 16-byte load per consumer thread and half
  # against 16 byte loads): the kernels' GPU tests, then the input gradient's default dispatch, the ldmatrix commit
  # (.device/old: 8b60a3e) against this code, alternating.
  47c)
    device_name
    timeout 280 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 75 /tmp/q47c --models 7b,14b,32b --ms 1,16,256,1024 --dirs bwd
    ;;
  # 47d: the input gradient's search (stream-K and two-consumer tiles included) on this code at M = 256-2048, for
  # TUNED_BWD.
  47d)
    device_name
    timeout 520 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024,2048 --dirs bwd --stream-k \
      --bwd-two-consumers --out /tmp/q47d 2>&1 | tee "$out/log.txt" | tail -5
    cp /tmp/q47d/gemm_ws.json "$out/"
    ;;
  # 47e: the two-consumer input gradient's step in two 32-row halves, the second dequantized under the first's wgmma:
  # its GPU tests, then the input gradient's default dispatch, the previous commit (.device/old: c7ee1ec) against this
  # code, alternating.
  47e)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "input_gradient or stream" \
      2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    dispatch_alternating 70 /tmp/q47e --models 7b,14b,32b --ms 256,512,1024 --dirs bwd
    ;;
  # 47f: the input gradient's search on this code (the split step) at M = 256-2048, for TUNED_BWD.
  47f)
    device_name
    timeout 400 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024,2048 --dirs bwd --stream-k \
      --bwd-two-consumers --out /tmp/q47f 2>&1 | tee "$out/log.txt" | tail -5
    cp /tmp/q47f/gemm_ws.json "$out/"
    ;;
  # 47g: the input gradient's run-13 TUNED_BWD entries against the previous commit (.device/old: the split step),
  # alternating; then the input gradient's GPU tests.
  47g)
    device_name
    dispatch_alternating 60 /tmp/q47g --models 7b,32b --ms 256,512,1024 --dirs bwd
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "input_gradient or dispatch" \
      2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  # 47h: the input gradient's default dispatch, run 12's last commit (.device/old: b064e5c) against this code,
  # alternating, on every layer at M = 1-1024.
  47h)
    device_name
    dispatch_alternating 100 /tmp/q47h --models 7b,14b,32b --ms 1,16,64,256,512,1024 --dirs bwd
    ;;
  # 47i: the GPU tests on the final code of run 13; then sustained load on the input gradient, every layer, M = 1024.
  47i)
    gpu_name_and_tests 330
    timeout 200 python3 benchmarks/sustained.py --cells "" --models 7b,14b,32b --ms 1024 --dirs bwd \
      --layout pairs --seconds 1.0 --out /tmp/q47i 2>&1 | grep "sustained\|samples" > "$out/sustained.txt"
    cp /tmp/q47i/sustained.json "$out/"
    ;;
  # 47j: the GPU tests on the final code (47i's limit was too short for the three files on a cold cache).
  47j)
    gpu_name_and_tests 560
    ;;
  # 47k: the forward's chunk halves decoded in turn (the low half's wgmmas issued before the high half decodes; configs
  # without in_flight; a variant not kept, so not in the tree: benchmarks/RESULTS.md, run 13): the kernels' GPU tests,
  # then the forward's default dispatch on words and on pairs weights, the previous commit (.device/old: 7ec5ce8)
  # against that variant, alternating.
  47k)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 45 /tmp/q47k_w --models 7b,14b,32b --ms 256,1024 --shipped-layout words
    mkdir -p "$out/words" && mv "$out"/dispatch_*.json "$out/clocks.txt" "$out/words/"
    dispatch_alternating 45 /tmp/q47k_p --models 7b,14b,32b --ms 256,1024
    ;;
  # 47l: the input gradient's stores in the chunk's column order (a thread's two adjacent columns in one store, full
  # sectors again; the ldmatrix order had left every store at stride 2): the kernels' GPU tests, then the input
  # gradient's default dispatch, the previous commit (.device/old: 808dac3) against this code, alternating.
  47l)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 60 /tmp/q47l --models 7b,14b,32b --ms 1,16,256,512,1024 --dirs bwd
    ;;
  # 48a: stream-K with whole waves of tiles one per CTA and the leftover tiles split in aligned runs (dp_waves): the
  # kernels' stream-K and input-gradient GPU tests, then the input gradient's search at M = 512-2048 and the forward's
  # (the table's tiles and the stream-K ones, on pairs, then on words) at M = 1024-2048, each with dp_waves candidates.
  48a)
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient or stream or dp_waves" 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 512,1024,2048 --dirs bwd --stream-k \
      --bwd-two-consumers --dp-waves --out /tmp/q48a_b 2>&1 | tee "$out/log_bwd.txt" | tail -4
    cp /tmp/q48a_b/gemm_ws.json "$out/gemm_ws_bwd.json"
    for lay in pairs words; do
      timeout 90 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1024,2048 --tile-set table --stream-k \
        --dp-waves --layouts $lay --shipped-layout $lay --out /tmp/q48a_$lay 2>&1 | tee "$out/log_fwd_$lay.txt" | tail -3
      cp /tmp/q48a_$lay/gemm_ws.json "$out/gemm_ws_fwd_$lay.json"
    done
    ;;
  # 48b: the run-14 table entries (dp_waves where the search found them faster; 14B / 32B o forward on words and the
  # 32B gate_up input gradient at M = 512 on the kernel instead of the slab path) against the previous commit
  # (.device/old: 5001520), alternating: input gradient at M = 512 / 1024, forward on words and on pairs at M = 1024,
  # the 14B and 32B layers (each group's files in one tar: a call returns at most 8 files); first the GPU tests of
  # the dispatch and stream-K paths.
  48b)
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "dispatch or stream or dp_waves" 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    dispatch_groups 14b,32b q48b bwd:512,1024:60 words:1024:45 pairs:1024:45
    ;;
  # 48c: where a dp_waves launch's time goes (benchmarks/stream_k_phases.py: the same kernel on plans that run only
  # the split leftover tiles, one wave of whole tiles, every tile whole, or plain stream-K).
  48c)
    device_name
    timeout 300 python3 benchmarks/stream_k_phases.py --out "$out" 2>&1 | tail -8
    ;;
  # 48d: a split tile's parts summed in slices (stored in the output's order, 16-byte loads, four parts' loads of a
  # slice in flight together) instead of in the accumulator's layout: the kernels' GPU tests, the phases of the
  # dp_waves launches again, then the input gradient's default dispatch against the previous commit (.device/old:
  # ba4b414), alternating, every layer at M = 256-1024.
  48d)
    device_name
    timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    timeout 120 python3 benchmarks/stream_k_phases.py --out "$out" 2>&1 | tail -7
    dispatch_alternating 50 /tmp/q48d --models 7b,14b,32b --ms 256,512,1024 --dirs bwd
    ;;
  # 48e: the same change, forward: default dispatch on words and on pairs weights against the previous commit
  # (.device/old: ba4b414), alternating, every layer at M = 256-1024 (each group's files in one tar); then the input
  # gradient's search at M = 256-1024 on this code.
  48e)
    device_name
    dispatch_groups 7b,14b,32b q48e words:256,512,1024:60 pairs:256,512,1024:60
    timeout 150 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024 --dirs bwd --stream-k \
      --bwd-two-consumers --dp-waves --out /tmp/q48e_b 2>&1 | tee "$out/log_bwd.txt" | tail -4
    cp /tmp/q48e_b/gemm_ws.json "$out/gemm_ws_bwd.json"
    ;;
  # 48f: the input-gradient entries of 48e's search (where a config was at least 8% faster than the shipped one, and
  # the 14B / 32B qkv at M = 1024 on stream-K instead of the slab path) against the previous commit (.device/old:
  # 9de6d02), alternating, every layer at M = 256-1024; then the GPU tests (three files).
  48f)
    device_name
    dispatch_alternating 50 /tmp/q48f --models 7b,14b,32b --ms 256,512,1024 --dirs bwd
    gpu_name_and_tests 330
    ;;
  # 48g: the forward's search on the parts' sum (the table's tiles, the wide ones, stream-K and dp_waves) on words,
  # then on pairs, at M = 256-1024.
  48g)
    device_name
    for lay in words pairs; do
      timeout 270 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 256,512,1024 --tile-set table+wide \
        --stream-k --dp-waves --layouts $lay --shipped-layout $lay --out /tmp/q48g_$lay 2>&1 \
        | tee "$out/log_fwd_$lay.txt" | tail -4
      cp /tmp/q48g_$lay/gemm_ws.json "$out/gemm_ws_fwd_$lay.json"
    done
    ;;
  # 48h: the forward entries of 48g's search (words and pairs tables, M = 256-1024, where a different config was at
  # least 8% faster than the shipped one) against the previous commit (.device/old: 2eccd27), alternating, every layer
  # (each group's files in one tar).
  48h)
    device_name
    dispatch_groups 7b,14b,32b q48h words:256,512,1024:60 pairs:256,512,1024:60
    ;;
  # 48i: the GPU tests on the final code of run 14 (three files, a cold cache).
  48i)
    gpu_name_and_tests 560
    ;;
  # 48j: sustained load at M = 1024 on the final code, every layer: the input gradient and the forward on pairs (the
  # training layout), then the forward on words.
  48j)
    device_name
    timeout 220 python3 benchmarks/sustained.py --cells "" --models 7b,14b,32b --ms 1024 --dirs fwd,bwd \
      --layout pairs --seconds 1.0 --out /tmp/q48j_p 2>&1 | grep "sustained\|samples" > "$out/sustained_pairs.txt"
    cp /tmp/q48j_p/sustained.json "$out/sustained_pairs.json"
    timeout 150 python3 benchmarks/sustained.py --cells "" --models 7b,14b,32b --ms 1024 --dirs fwd \
      --layout words --seconds 1.0 --out /tmp/q48j_w 2>&1 | grep "sustained\|samples" > "$out/sustained_words.txt"
    cp /tmp/q48j_w/sustained.json "$out/sustained_words.json"
    ;;
  # 48k: run 13's last commit (.device/old: 34a1c0f) against run 14's final code, alternating, every layer at M = 256-
  # 1024: the input gradient, the forward on words and on pairs (each group's files in one tar).
  48k)
    device_name
    dispatch_groups 7b,14b,32b q48k bwd:256,512,1024:50 words:256,512,1024:50 pairs:256,512,1024:50
    ;;
  # 48l: a split tile's sum on tiles of fewer rows of X than one of its slices (BM = 32, a new config of the tests):
  # the warp-specialized kernels' GPU tests.
  48l)
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    ;;
  # Run 15: the vLLM bundle in four parts (.device/vllm4/c1..c4, one per call, unpacked by the fourth), so that
  # each call's payload stays within the carry limit next to the tracked tree. 49a (part 1): the decode harness with
  # the project's Triton decode attention against SDPA's length-masked attention (words layout, fused elementwise
  # steps), each with a per-step profile of the kernels, attention timed alone and the SDPA backends that accept the
  # call; first the decode attention's GPU tests.
  49a)
    bash .device/vllm4/c1/vllm_unpack.sh .device/vllm4
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    for att in sdpa triton; do
      timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --attention $att --profile \
        --out /tmp/q49a_$att 2>&1 | tail -16 | tee "$out/log_decode_$att.txt"
      cp /tmp/q49a_$att/decode_nvfp4.json "$out/decode_$att.json"
    done
    ;;
  # 49b (part 2): the forward's search at M = 64 / 128 on words (the table's tiles, stream-K and dp_waves; not
  # searched since stream-K came in run 12).
  49b)
    bash .device/vllm4/c2/vllm_unpack.sh .device/vllm4
    device_name
    timeout 330 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 64,128 --tile-set table --stream-k \
      --dp-waves --layouts words --shipped-layout words --out /tmp/q49b 2>&1 | tee "$out/log_fwd_words.txt" | tail -4
    cp /tmp/q49b/gemm_ws.json "$out/gemm_ws_fwd_words.json"
    ;;
  # 49c (part 3): the decode harness on the Triton attention at batch 1-64 (words layout).
  49c)
    bash .device/vllm4/c3/vllm_unpack.sh .device/vllm4
    device_name
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --batches 1,4,8,16,32,64 \
      --out /tmp/q49c 2>&1 | tail -9 | tee "$out/log_decode.txt"
    cp /tmp/q49c/decode_nvfp4.json "$out/decode_batches.json"
    ;;
  # 49d (part 4, vLLM unpacked): vLLM's Marlin against the default dispatch on words (the rollout layout), forward,
  # every layer at M = 1-128, in the same run.
  49d)
    source .device/vllm4/c4/vllm_unpack.sh .device/vllm4
    device_name
    marlin_vs_dispatch /tmp/q49d
    ;;
  # 49e: the decode step's Triton kernels' GPU tests (rope + cache write added); the decode harness with them against
  # the torch step (profile, attention per split count); then the words table's new 7B gate_up entry at M = 128
  # (stream-K, from 49b's search) against the previous commit (.device/old: 5e2bf54), alternating.
  49e)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q49e_dec
    for att in sdpa triton; do
      timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --attention $att --profile \
        --out /tmp/q49e_$att 2>&1 | tail -17 | tee "/tmp/q49e_dec/log_decode_$att.txt"
      cp /tmp/q49e_$att/decode_nvfp4.json "/tmp/q49e_dec/decode_$att.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q49e_dec .
    dispatch_alternating 40 /tmp/q49e --models 7b --layers gate_up --ms 64,128,256 --shipped-layout words
    ;;
  # 49f: the decode attention's GPU tests (one slice unless slices of 512+ positions); the decode harness on it and on
  # the torch step (profile), and with a 2049-position cache (attention per split count); then why 49e's new passes
  # ran the unchanged M = 256 entry of 7B gate_up slower: M = 256 alone, after M = 128 and before it, on this code,
  # and after M = 128 on the previous commit (.device/old: 5e2bf54), all in one tar.
  49f)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q49f_dec
    for att in sdpa triton; do
      timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --attention $att --profile \
        --out /tmp/q49f_$att 2>&1 | tail -17 | tee "/tmp/q49f_dec/log_decode_$att.txt"
      cp /tmp/q49f_$att/decode_nvfp4.json "/tmp/q49f_dec/decode_$att.json"
    done
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --profile --prompt 1920 \
      --new-tokens 128 --batches 1,8 --out /tmp/q49f_long 2>&1 | tail -12 | tee "/tmp/q49f_dec/log_decode_long.txt"
    cp /tmp/q49f_long/decode_nvfp4.json /tmp/q49f_dec/decode_long.json
    tar -cf "$out/decode.tar" -C /tmp/q49f_dec .
    mkdir -p /tmp/q49f_order
    cp benchmarks/gemm_ws.py .device/old/benchmarks/gemm_ws.py
    i=0
    for run in new:256 new:128,256 new:256,128 old:128,256 new:128,256; do
      i=$((i + 1)); v=${run%%:*} ms=${run#*:}
      script=benchmarks/gemm_ws.py; [ $v = old ] && script=.device/old/benchmarks/gemm_ws.py
      echo "== $i $v $ms" | tee -a /tmp/q49f_order/log.txt
      timeout 60 python3 $script --dispatch-only --models 7b --layers gate_up --ms $ms --shipped-layout words \
        --out /tmp/q49f_o 2>&1 | grep "M=" | tee -a /tmp/q49f_order/log.txt
      cp /tmp/q49f_o/gemm_ws.json "/tmp/q49f_order/${i}_${v}_${ms}.json"
    done
    tar -cf "$out/order.tar" -C /tmp/q49f_order .
    ;;
  # 49g: the decode harness on the Triton step (slices of 256+ positions) and on the torch step, BF16 and NVFP4 in
  # turn three times per batch (medians); then the forward's decode-tile search at M = 1-16 on words with stream-K
  # candidates (not searched since run 11).
  49g)
    device_name
    mkdir -p /tmp/q49g_dec
    for att in triton sdpa; do
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --attention $att --repeats 3 \
        --out /tmp/q49g_$att 2>&1 | tail -6 | tee "/tmp/q49g_dec/log_decode_$att.txt"
      cp /tmp/q49g_$att/decode_nvfp4.json "/tmp/q49g_dec/decode_$att.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q49g_dec .
    timeout 280 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16 --stream-k --dp-waves \
      --layouts words --shipped-layout words --out /tmp/q49g_s 2>&1 | tee "$out/log_search.txt" | tail -4
    cp /tmp/q49g_s/gemm_ws.json "$out/gemm_ws_small.json"
    ;;
  # 49h and 49i ran on commits 9e49d8a / 8e74e3e; programmatic dependent launch (qerl.kernels.launch, --pdl) was
  # removed after 49i (no gain, see benchmarks/RESULTS.md run 15), so their --pdl runs need those commits.
  # 49h: programmatic dependent launch (qerl.kernels.launch): its GPU tests and the decode step's; the decode harness
  # on the Triton step with and without --pdl, three passes each; the small-M words entries of 49g's search (7B qkv
  # at M = 16, 32B down at M = 8 / 16 on stream-K) against the previous commit (.device/old: 5e2bf54), alternating,
  # with 7B down and 32B qkv as controls; then the warp-specialized kernels' GPU tests.
  49h)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_programmatic_launch.py \
      tests/test_decode_attention.py 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q49h_dec
    for mode in pdl plain; do
      flag=""; [ $mode = pdl ] && flag=--pdl
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 $flag \
        --out /tmp/q49h_$mode 2>&1 | tail -6 | tee "/tmp/q49h_dec/log_decode_$mode.txt"
      cp /tmp/q49h_$mode/decode_nvfp4.json "/tmp/q49h_dec/decode_$mode.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q49h_dec .
    dispatch_groups 7b,32b q49h words:8,16:40
    timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests_ws.txt"
    ;;
  # 49i: the decode harness without programmatic dependent launch, with it for the project's kernels, and for
  # torch.compile's kernels too (three passes each, in one call); whether the compiled kernels carry the
  # griddepcontrol calls.
  49i)
    device_name
    mkdir -p /tmp/q49i_dec
    for mode in off qerl all; do
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --pdl $mode \
        --out /tmp/q49i_$mode 2>&1 | tail -7 | tee "/tmp/q49i_dec/log_decode_$mode.txt"
      cp /tmp/q49i_$mode/decode_nvfp4.json "/tmp/q49i_dec/decode_$mode.json"
    done
    { python3 -c "import torch, torch._inductor.config as c; print(torch.__version__, c.triton.enable_pdl)"
      echo "inductor kernels with gdc calls: $(grep -rl 'gdc_launch_dependents\|gdc_wait' /tmp/torchinductor_* 2>/dev/null \
        | grep -c '\.py$')"; } 2>&1 | tee /tmp/q49i_dec/inductor_pdl.txt
    tar -cf "$out/decode.tar" -C /tmp/q49i_dec .
    ;;
  # 50a-50d: run 15's final code, on the vLLM bundle in four parts (one per call). 50a (part 1): the GPU tests (four
  # files, a cold cache).
  50a)
    bash .device/vllm4/c1/vllm_unpack.sh .device/vllm4
    device_name
    timeout 560 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
      tests/test_kernels_ws_gpu.py tests/test_decode_attention.py 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  # 50b (part 2): the decode harness on the Triton step (with the profile) and on the torch step, three passes each.
  50b)
    bash .device/vllm4/c2/vllm_unpack.sh .device/vllm4
    device_name
    decode_steps_compared /tmp/q50b
    ;;
  # 50c (part 3): the forward's default dispatch on words at M = 1-128 against run 14's last commit (.device/old:
  # ae8a3d8), alternating, every layer.
  50c)
    bash .device/vllm4/c3/vllm_unpack.sh .device/vllm4
    device_name
    dispatch_groups 7b,14b,32b q50c words:1,8,16,64,128:50
    ;;
  # 50d (part 4, vLLM unpacked): vLLM's Marlin against the default dispatch on words, forward, every layer at M =
  # 1-128, in the same run.
  50d)
    source .device/vllm4/c4/vllm_unpack.sh .device/vllm4
    device_name
    marlin_vs_dispatch /tmp/q50d
    ;;
  # 50e: after a review refactor of the decode harness (one method for the step around attention, one capture
  # helper): the decode-step GPU tests and 50b's harness runs again.
  50e)
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3 \
      | tee "$out/gpu_tests.txt"
    decode_steps_compared /tmp/q50e
    ;;
  # 51a: what bounds the decode-shaped forward at M = 8: the weight's code bytes read with nothing else to do in the
  # forward's box pattern (64 rows x 64 bytes, row-major) against wider boxes and tile-contiguous boxes
  # (benchmarks/read_pattern.py, 7B and 32B layers), and Nsight Compute on the shipped kernels (words) and cuBLAS.
  51a)
    device_name
    timeout 240 python3 benchmarks/read_pattern.py --models 7b,32b --out /tmp/q51a 2>&1 | tee "$out/log_read.txt" \
      | tail -3
    cp /tmp/q51a/read_pattern.json "$out/"
    OUT=/tmp/q51a_prof LAYOUT=words timeout 300 bash benchmarks/profile_gemm.sh 7b:down:8:fwd:qerl \
      7b:gate_up:8:fwd:qerl 7b:qkv:8:fwd:qerl 7b:down:8:fwd:bf16 2>&1 | tail -2
    cp /tmp/q51a_prof/details.txt /tmp/q51a_prof/sass.tar.gz "$out/"
    ;;
  # 51b: splits that need not divide the chunk count and stream-K on three or four CTAs per SM: the warp-specialized
  # kernels' GPU tests, then the decode-tile search of configs that fill whole waves (gemm_ws.py --tile-set fill) at
  # M = 1 / 8 / 16, every layer.
  51b)
    device_name
    ws_tests_and_fill_search 260 /tmp/q51b
    ;;
  # 51d: the table entries from 51b's search against the previous commit (.device/old), alternating, every layer at
  # M = 1 / 8 / 16; the decode harness on the previous commit and on this one (three passes each).
  51d)
    device_name
    dispatch_groups 7b,14b,32b q51d words:1,8,16:80
    mkdir -p /tmp/q51d_dec
    for v in old new; do
      script=benchmarks/decode_nvfp4.py; [ $v = old ] && script=.device/old/benchmarks/decode_nvfp4.py
      timeout 150 python3 $script --compile --layout words --repeats 3 --out /tmp/q51d_$v 2>&1 | tail -5 \
        | tee "/tmp/q51d_dec/log_decode_$v.txt"
      cp /tmp/q51d_$v/decode_nvfp4.json "/tmp/q51d_dec/decode_$v.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q51d_dec .
    ;;
  # 51e: the GPU tests (four files) on this code.
  51e)
    device_name
    timeout 570 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
      tests/test_kernels_ws_gpu.py tests/test_decode_attention.py 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  # 51f: the table's decode configs with 4 / 8 / 10 stages (deeper rings: more weight bytes in flight per CTA), every
  # layer at M = 1 / 8 / 16.
  51f)
    device_name
    timeout 300 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --ms 1,8,16 --tile-set stages --layouts words \
      --shipped-layout words --out /tmp/q51f 2>&1 | tee "$out/log_stages.txt" | tail -4
    cp /tmp/q51f/gemm_ws.json "$out/gemm_ws_stages.json"
    ;;
  # 51g: where the decode-shaped forward's time goes: the shipped configs as they are, with the consumer only waiting
  # for and releasing each stage, and without the copies of X (benchmarks/ws_probe.py), every layer at M = 1 / 8 / 16.
  51g)
    device_name
    timeout 400 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 1,8,16 --out /tmp/q51g 2>&1 \
      | tee "$out/log_probe.txt" | tail -3
    cp /tmp/q51g/ws_probe.json "$out/"
    ;;
  # 51h: the whole-wave search on the gate_up layers with the split sums in the kernel too (wide outputs), M = 1 / 8 / 16.
  51h)
    device_name
    timeout 300 python3 benchmarks/gemm_ws.py --models 7b,14b,32b --layers gate_up --ms 1,8,16 --tile-set fill \
      --layouts words --shipped-layout words --out /tmp/q51h 2>&1 | tee "$out/log_search.txt" | tail -4
    cp /tmp/q51h/gemm_ws.json "$out/gemm_ws_fill_gate_up.json"
    ;;
  # 51i: the copy pipeline's parts at M = 8: the probe's variants without the scale copies and with the code bytes'
  # copies alone, every layer.
  51i)
    device_name
    timeout 300 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 8 --out /tmp/q51i 2>&1 \
      | tee "$out/log_probe.txt" | tail -3
    cp /tmp/q51i/ws_probe.json "$out/"
    ;;
  # 51j (commit 3b2c9ad; the next commit removed that variant): stream-K with chunks in flight (one consumer, 96
  # registers, two CTAs per SM): the forward's GPU tests against the fp32 reference and the stream-K repeat tests, then
  # the whole-wave search with those candidates, every layer at M = 1 / 8 / 16.
  51j)
    device_name
    ws_tests_and_fill_search 200 /tmp/q51j "matches_fp32_reference or stream_k or dp_waves"
    ;;
  # 51k (commit 60ad54d; the next commit removed loader_regs): the loader on 24 registers (WsConfig.loader_regs): the
  # forward's GPU tests against the fp32 reference, the words layout and the fused split sums, then the whole-wave
  # search with those candidates, every layer at M = 1 / 8 / 16.
  51k)
    device_name
    ws_tests_and_fill_search 200 /tmp/q51k "matches_fp32_reference or words_layout or fused"
    ;;
  # 51l: SiLU x up in gate_up's kernel epilogue (nvfp4_matmul_swiglu): its GPU tests and the decode-step tests, then
  # the decode harness without and with --swiglu-epilogue (three passes each, same machine).
  51l)
    device_name
    { timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k swiglu 2>&1 | tail -3
      timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3
    } | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q51l_dec
    for v in plain swiglu; do
      flag=""; [ $v = swiglu ] && flag=--swiglu-epilogue
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 $flag \
        --out /tmp/q51l_$v 2>&1 | tail -5 | tee "/tmp/q51l_dec/log_decode_$v.txt"
      cp /tmp/q51l_$v/decode_nvfp4.json "/tmp/q51l_dec/decode_$v.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q51l_dec .
    ;;
  # 51m: the SiLU x up epilogue's GPU tests again, every failure listed with its assertion.
  51m)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k swiglu -rf \
      --tb=line 2>&1 | tail -40 | tee "$out/gpu_tests.txt"
    ;;
  # Run 17. 52a: the RMSNorm epilogues' GPU tests (kernels, the fused_norm functions at 7B decode shapes under a CUDA
  # graph), the SiLU x up tests (now also after splits summed in the kernel) and the decode-step tests.
  52a)
    device_name
    { timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_norm.py \
        -k "norm or swiglu or epilogues" -rf --tb=line 2>&1 | tail -30
      timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py 2>&1 | tail -3
    } | tee "$out/gpu_tests.txt"
    ;;
  # 52b: the decode harness with SiLU x up in gate_up's kernel, without and with the RMSNorms folded into the
  # projections (--fused-norm), three alternating passes each; the folded run also profiled.
  52b)
    device_name
    mkdir -p /tmp/q52b_dec
    for v in swiglu fused; do
      flag=""; [ $v = fused ] && flag="--fused-norm --profile"
      timeout 280 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue $flag \
        --out /tmp/q52b_$v 2>&1 | tail -9 | tee "/tmp/q52b_dec/log_decode_$v.txt"
      cp /tmp/q52b_$v/decode_nvfp4.json "/tmp/q52b_dec/decode_$v.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q52b_dec .
    ;;
  # 52c: the RoPE + KV-cache epilogue's GPU tests, the RMSNorm ones again (configs reshaped for the epilogues), then
  # the decode harness with SiLU x up and the folded norms, without and with the QKV epilogue, three passes each.
  52c)
    device_name
    { timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_qkv.py \
        tests/test_fused_norm.py -k "rope or norm" -rf --tb=line 2>&1 | tail -30
    } | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q52c_dec
    for v in norm rope; do
      flag=""; [ $v = rope ] && flag="--rope-epilogue --profile"
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
        --fused-norm $flag --out /tmp/q52c_$v 2>&1 | tail -9 | tee "/tmp/q52c_dec/log_decode_$v.txt"
      cp /tmp/q52c_$v/decode_nvfp4.json "/tmp/q52c_dec/decode_$v.json"
    done
    tar -cf "$out/decode.tar" -C /tmp/q52c_dec .
    ;;
  # 52d: what each epilogue costs and saves per 7B layer at M = 1 / 8 / 64 (benchmarks/epilogues.py).
  52d)
    device_name
    timeout 400 python3 benchmarks/epilogues.py --ms 1,8,64 --out "$out" 2>&1 | tail -20
    ;;
  # 52e: the epilogue operands loaded before the chunk loop: the epilogue tests again, then 52d's benchmark.
  52e)
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_qkv.py \
      tests/test_fused_norm.py -k "rope or norm or swiglu" -rf --tb=line 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    timeout 250 python3 benchmarks/epilogues.py --ms 1,8,16,64 --out "$out" 2>&1 | tail -20
    ;;
  # 52f: the epilogues up to NORM_EPILOGUE_MAX_M / ROPE_MAX_M rows, one add + RMSNorm kernel above: their tests,
  # then the decode harness with SiLU x up alone, with the folded norms, and with the QKV epilogue too, in turn.
  52f)
    device_name
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_qkv.py \
      tests/test_fused_norm.py -k "rope or norm or swiglu or epilogues" -rf --tb=line 2>&1 | tail -8 \
      | tee "$out/gpu_tests.txt"
    decode_epilogue_variants /tmp/q52f 100 ""
    ;;
  # 52g: launch configs for qkv's RoPE epilogue at M = 1 / 8 / 16 next to the table's (benchmarks/epilogues.py).
  52g)
    device_name
    timeout 400 python3 benchmarks/epilogues.py --ms 1,8,16 --rope-search --out "$out" 2>&1 | tail -40
    ;;
  # 52h: qkv's RoPE epilogue on 52g's config: its tests, then 52f's three harness runs again.
  52h)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_qkv.py \
      -k "rope" -rf --tb=line 2>&1 | tail -6 | tee "$out/gpu_tests.txt"
    decode_epilogue_variants /tmp/q52h 150 --profile
    ;;
  # 52i: the GPU test suite on the final kernel code.
  52i)
    device_name
    timeout 580 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
      tests/test_kernels_ws_gpu.py tests/test_decode_attention.py tests/test_fused_norm.py tests/test_fused_qkv.py \
      -rf --tb=line 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    ;;
  # 52j: after the review (the harness's graph capture in qerl.kernels.graphs): the decode-step and epilogue
  # function tests, and the harness with every epilogue once more.
  52j)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_attention.py tests/test_fused_norm.py \
      tests/test_fused_qkv.py -rf --tb=line 2>&1 | tail -4 | tee "$out/gpu_tests.txt"
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue --fused-norm \
      --rope-epilogue --out "$out" 2>&1 | tail -6
    ;;
  # 52k: after the review's test-helper and benchmark-import changes: the kernel tests that use them, one M of
  # benchmarks/epilogues.py.
  52k)
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "rope or add_norm or refuse or words_layout or tuned_shapes" -rf --tb=line 2>&1 | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/epilogues.py --ms 8 --out "$out" 2>&1 | tail -18
    ;;
  53a)  # run 18: the transformers rollout backend's compiled decode (static cache + CUDA graphs), NVFP4 vs BF16
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_lora.py \
      tests/test_loading.py -rf --tb=short 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes compiled,eager \
      --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  53b)  # where a compiled step's time goes (batch 8), a rank-32 adapter, and batches 1 and 64
    device_name
    timeout 200 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes compiled --profile \
      --repeats 1 --out "$out/profile" 2>&1 | grep -v Warning | tail -4
    timeout 200 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes compiled \
      --out "$out/rank32" 2>&1 | grep -v Warning | tail -3
    timeout 170 python3 benchmarks/rollout_hf.py --batches 1,64 --lora-ranks 0 --modes compiled \
      --out "$out/batches" 2>&1 | grep -v Warning | tail -4
    ;;
  53c)  # the GPU tests of the packed module, the kernels and the rollout backend on the final code
    device_name
    timeout 560 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py tests/test_kernels_gpu.py \
      tests/test_rollout_hf.py -rf --tb=short 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    ;;
  53d)  # batch 8 again (three passes, another machine) and batch 64
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --modes compiled \
      --out "$out" 2>&1 | grep -v Warning | tail -5
    ;;
  53e)  # the host's side of a compiled step (batch 8): operators run from Python per step, and torch's perf hints
    device_name
    TORCH_LOGS=perf_hints timeout 300 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes compiled \
      --profile --repeats 1 --out "$out" > "$out/log.txt" 2>&1
    grep -v Warning "$out/log.txt" | grep -i "skipping\|cudagraph\|rank 0\|host ops" | head -20
    ;;
  53f)  # the backend's own static-cache loop (no host sync per token): GPU tests, then batch 8 and 64
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_kernels_gpu.py \
      -k "rollout or compiled or packed_linear" -rf --tb=short 2>&1 | tail -6 | tee "$out/gpu_tests.txt"
    timeout 400 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --modes compiled \
      --out "$out" 2>&1 | grep -v Warning | tail -4
    ;;
  53g)  # the same loop: a rank-32 adapter at batch 8, then where a batch-8 step's time goes
    device_name
    timeout 260 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes compiled \
      --out "$out/rank32" 2>&1 | grep -v Warning | tail -3
    timeout 300 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes compiled --profile --repeats 1 \
      --out "$out/profile" 2>&1 | grep -v Warning | grep "rank 0\|host ops"
    ;;
  53h)  # batch 8 once more; it also ran the compiled step without guards on the modules' attributes
    # (StaticDecoder(module_guards=False), torch.compiler.skip_guard_on_all_nn_modules_unsafe): torch 2.11 failed
    # with KeyError 'weight' while compiling it, and the option was removed.
    device_name
    timeout 280 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes compiled \
      --out "$out/guards" 2>&1 | grep -v Warning | tail -2
    ;;
  53i)  # the compiled step captured as one plain CUDA graph per batch and cache length: GPU tests, batch 8 / 64,
        # a rank-32 adapter at batch 8
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_kernels_gpu.py \
      -k "rollout or compiled or packed_linear" -rf --tb=short 2>&1 | tail -6 | tee "$out/gpu_tests.txt"
    grep -q "^3 passed" "$out/gpu_tests.txt" || exit 1
    timeout 300 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --modes compiled \
      --out "$out" 2>&1 | grep -v Warning | tail -4
    timeout 200 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes compiled \
      --out "$out/rank32" 2>&1 | grep -v Warning | tail -3
    ;;
  53j)  # after graphs.capture became a wrapper of warm_and_capture: the GPU tests that capture graphs with it
    device_name
    timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_qkv.py tests/test_decode_attention.py \
      tests/test_fused_norm.py -k "graph or decode_step" -rf --tb=short 2>&1 | tail -6 | tee "$out/gpu_tests.txt"
    ;;
  53k)  # after the review (the packed layer's no-grad call, the counters reserved once): the rollout backend's and
        # the packed module's GPU tests
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_kernels_gpu.py \
      -k "rollout or compiled or packed_linear" -rf --tb=short 2>&1 | tail -6 | tee "$out/gpu_tests.txt"
    ;;
  54a)  # the project's decode step in the transformers backend (fused q/k/v and gate/up over shared storage, the
        # Triton decode attention from each row's first prompt token): GPU tests, then batch 8 against the model's
        # forward as the step
    device_name
    timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_decode_attention.py \
      tests/test_kernels_gpu.py -k "compiled or packed_linear or fused_members or under_a_cuda_graph" -rf --tb=short \
      2>&1 | tail -8 | tee "$out/gpu_tests.txt"
    timeout 180 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -3
    ;;
  54b)  # the fused-members kernel test again with its failure shown (54a: gate / up failed); the fused step at batch
        # 8 / 64, without an adapter and with a rank-32 adapter
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py -k "fused_members" -rf \
      --tb=short 2>&1 | grep -v "^  \|Warning" | tail -25 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0,32 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -6
    ;;
  54c)  # where a batch-8 step of the fused step goes (no adapter, then rank 32)
    device_name
    timeout 250 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0,32 --modes fused --profile --repeats 1 \
      --out "$out" 2>&1 | grep -v Warning | grep "rank \|host ops"
    ;;
  54d)  # o_proj and down_proj as products of their own in the step (the adapter's expand in the epilogue): GPU tests,
        # batch 8 without an adapter and with a rank-32 adapter
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_kernels_gpu.py \
      -k "compiled or packed_linear or fused_members" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -8 \
      | tee "$out/gpu_tests.txt"
    timeout 280 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0,32 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -4
    ;;
  54e)  # the same at batch 64; where a batch-8 step with a rank-32 adapter goes
    device_name
    timeout 300 python3 benchmarks/rollout_hf.py --batches 64 --lora-ranks 0,32 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -4
    timeout 250 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes fused --profile --repeats 1 \
      --out "$out/profile" 2>&1 | grep -v Warning | grep "rank \|host ops"
    ;;
  54f)  # the adapters' shrink at decode batches as a multiply-sum (one reduction kernel under torch.compile) instead
        # of cuBLAS's skinny product: batch 8 with a rank-32 adapter, then its profile
    device_name
    timeout 200 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -3
    timeout 250 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes fused --profile --repeats 1 \
      --out "$out/profile" 2>&1 | grep -v Warning | grep "rank \|host ops"
    ;;
  54g)  # NVFP4 with a rank-32 adapter at batch 8: the expand in the product's epilogue (Triton kernel) against after
        # it (the warp-specialized product, then torch), each run twice in turn
    device_name
    for pass in 1 2; do
      timeout 140 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes fused --repeats 2 \
        --out "$out/epilogue$pass" 2>&1 | grep -v Warning | tail -1
      timeout 140 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --modes fused --repeats 2 \
        --expand-after --out "$out/after$pass" 2>&1 | grep -v Warning | tail -1
    done
    ;;
  54h)  # the final code's GPU tests (rollout backend, decode kernels, fused members); at batch 64 with a rank-32 adapter
        # the shrink as cuBLAS's product (the default above 16 rows) against the multiply-sum
    device_name
    timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_decode_attention.py \
      tests/test_kernels_gpu.py -k "compiled or packed_linear or fused_members or under_a_cuda_graph" -rf --tb=short \
      2>&1 | grep -v "^  \|Warning" | tail -8 | tee "$out/gpu_tests.txt"
    for m in 16 64; do
      timeout 120 python3 benchmarks/rollout_hf.py --batches 64 --lora-ranks 32 --modes fused --repeats 2 \
        --shrink-reduction-max-m $m --out "$out/shrink$m" 2>&1 | grep -v Warning | tail -1
    done
    ;;
  54i)  # without an adapter, both models frozen (54a-54e left the BF16 model's weights trainable, so its q/k/v and
        # gate/up ran as separate products while NVFP4's were fused): batch 8 and 64
    device_name
    timeout 400 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -4
    ;;
  54j)  # sampling inside the step's CUDA graph (one launch a token; commit ba7ce26, not kept: no faster, see
        # RESULTS run 19): the rollout backend's GPU tests, then batch 8 and 64, without an adapter and with rank 32
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -8 | tee "$out/gpu_tests.txt"
    timeout 370 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0,32 --modes fused --out "$out" 2>&1 \
      | grep -v Warning | tail -6
    ;;
  54k)  # the final code: the GPU tests of every kernel whose launcher now reads the scales' row stride (warp-specialized
        # forward / input gradient, their epilogues), the decode kernels, the packed module and the rollout backend
    device_name
    timeout 570 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_qkv.py \
      tests/test_fused_norm.py tests/test_kernels_gpu.py tests/test_decode_attention.py tests/test_rollout_hf.py \
      tests/test_nvfp4.py -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -10 | tee "$out/gpu_tests.txt"
    ;;
  55a)  # Run 21: the input gradient's "fill" search on this code (benchmarks/gemm_ws.py --tile-set fill: a step's
        # wgmmas in flight, splits of N that fill whole waves, two consumers on decode tiles as stream-K) at M = 1 /
        # 16 / 64 / 128, every candidate checked against fp32 first; 32B's qkv / o are 14B's shapes
    device_name
    timeout 400 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --ms 1,16,64,128 --models 7b,14b \
      --out /tmp/q55a/a 2>&1 | grep -v Warning | tee "$out/log_a.txt" | tail -50
    timeout 170 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --ms 1,16,64,128 --models 32b \
      --layers gate_up,down --out /tmp/q55a/b 2>&1 | grep -v Warning | tee "$out/log_b.txt" | tail -14
    for p in a b; do cp /tmp/q55a/$p/gemm_ws.json "$out/gemm_ws_$p.json"; cp /tmp/q55a/$p/tuned_ws.json "$out/tuned_ws_$p.json"; done
    ;;
  55b)  # the TUNED_BWD entries of 55a's search: the input-gradient GPU tests (the new in-flight and two-consumer configs
        # on odd shapes, the dispatch), then the default dispatch on the previous tables (.device/old: git archive
        # b6f9398 qerl benchmarks) and this code's, alternating, M = 1-128; then bounds.py's input-gradient half
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient or default_dispatch or small_m_entries" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 100 /tmp/q55b --dirs bwd --models 7b,14b,32b --ms 1,4,8,16,64,128
    timeout 150 python3 benchmarks/bounds.py --dirs bwd --out /tmp/q55b_bounds 2>&1 | tail -12
    tar -cf "$out/bounds.tar" -C /tmp/q55b_bounds .
    ;;
  55c)  # the forward's "fill" search at M = 64 / 128 (every tile unsplit and with splits of K that fill whole waves,
        # benchmarks/gemm_ws.py mid_fill_candidates), every candidate checked against fp32 first
    device_name
    timeout 330 python3 benchmarks/gemm_ws.py --dirs fwd --tile-set fill --ms 64,128 --models 7b,14b \
      --out /tmp/q55c/a 2>&1 | grep -v Warning | tee "$out/log_a.txt" | tail -22
    timeout 160 python3 benchmarks/gemm_ws.py --dirs fwd --tile-set fill --ms 64,128 --models 32b \
      --layers gate_up,down --out /tmp/q55c/b 2>&1 | grep -v Warning | tee "$out/log_b.txt" | tail -8
    for p in a b; do cp /tmp/q55c/$p/gemm_ws.json "$out/gemm_ws_$p.json"; cp /tmp/q55c/$p/tuned_ws.json "$out/tuned_ws_$p.json"; done
    ;;
  55d)  # the TUNED entries of 55c's search: the forward's GPU tests of the dispatch, then the default dispatch on the
        # previous tables (.device/old: b6f9398) and this code's, alternating, forward M = 32-128; then bounds.py whole
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "default_dispatch or small_m_entries or (matches_fp32_reference and not input_gradient)" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    dispatch_alternating 80 /tmp/q55d --dirs fwd --models 7b,14b,32b --ms 32,64,128
    timeout 170 python3 benchmarks/bounds.py --out /tmp/q55d_bounds 2>&1 | tail -8
    tar -cf "$out/bounds.tar" -C /tmp/q55d_bounds .
    ;;
  55e)  # the fill searches at the buckets around the targets' M: forward M = 32 / 256, input gradient M = 32 / 256 /
        # 512 (the table's config is a candidate, so a pick is measured against it in the same pass)
    device_name
    timeout 250 python3 benchmarks/gemm_ws.py --dirs fwd,bwd --tile-set fill --ms 32,256 --models 7b,14b \
      --out /tmp/q55e/a 2>&1 | grep -v Warning | tee "$out/log_a.txt" | tail -36
    timeout 150 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --ms 512 --models 7b,14b \
      --out /tmp/q55e/b 2>&1 | grep -v Warning | tee "$out/log_b.txt" | tail -9
    timeout 150 python3 benchmarks/gemm_ws.py --dirs fwd,bwd --tile-set fill --ms 32,256 --models 32b \
      --layers gate_up,down --out /tmp/q55e/c 2>&1 | grep -v Warning | tee "$out/log_c.txt" | tail -10
    for p in a b c; do tar -rf "$out/search.tar" -C /tmp/q55e $p/gemm_ws.json $p/tuned_ws.json; done
    ;;
  55f)  # the entries of 55e's search: the kernels' dispatch and input-gradient GPU tests, then the default dispatch on
        # the previous tables (.device/old: b6f9398) and this code's, alternating, both directions at M = 32 / 256 / 512
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient or default_dispatch or small_m_entries" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 110 /tmp/q55f --dirs fwd,bwd --models 7b,14b,32b --ms 32,256,512
    ;;
  55g)  # bounds.py on the final tables, on an H100 (the tables were searched on H200s)
    device_name
    timeout 280 python3 benchmarks/bounds.py --out /tmp/q55g_bounds 2>&1 | tail -16
    tar -cf "$out/bounds.tar" -C /tmp/q55g_bounds .
    ;;
  55h)  # the input gradient's scales converted to bf16 by the scale warp: its GPU tests, then the default dispatch of
        # the code before it (.device/old: git archive 9f60dad qerl benchmarks, run 21's tables) and this code, alternating
    device_name
    timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient or default_dispatch" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 70 /tmp/q55h --dirs bwd --models 7b,14b,32b --ms 1,16,64,128,1024
    ;;
  56a)  # Run 22: the input gradient on the "rows" code layout (words decoding of the ldmatrix.trans word): its GPU
        # tests (same bits as "pairs" for every config and shape, the dispatch), then the default dispatch with the
        # same tables on "pairs" and on "rows", alternating, every layer at M = 1 / 16 / 64 / 128 / 1024
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "rows" -rf \
      --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    dispatch_bwd_layouts 80 /tmp/q56a --models 7b,14b,32b --ms 1,16,64,128,1024
    ;;
  56b)  # 56a's comparison again (its "rows" passes stopped at the one cell the table declines, 14B o at M = 1024, which
        # the script now runs on "pairs" as a module would), M = 1-1024
    device_name
    dispatch_bwd_layouts 100 /tmp/q56b --models 7b,14b,32b --ms 1,16,64,128,256,512,1024
    ;;
  56c)  # the input gradient's "fill" search (as 55a) on the "rows" layout, M = 1 / 16 / 64 / 128: picks as "wsbwdr"
        # entries (TUNED_BWD_ROWS); the table's config is a candidate and the shipped path runs on "rows" too
    device_name
    timeout 390 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 1,16,64,128 --models 7b,14b --out /tmp/q56c/a 2>&1 | grep -v Warning | tee "$out/log_a.txt" | tail -40
    timeout 170 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 1,16,64,128 --models 32b --layers gate_up,down --out /tmp/q56c/b 2>&1 | grep -v Warning \
      | tee "$out/log_b.txt" | tail -14
    for p in a b; do cp /tmp/q56c/$p/gemm_ws.json "$out/gemm_ws_$p.json"; cp /tmp/q56c/$p/tuned_ws.json "$out/tuned_ws_$p.json"; done
    ;;
  56d)  # TUNED_BWD_ROWS (56c's picks) and the packed layer's rows copy: their GPU tests, then the default dispatch on
        # "rows" with the tables before the entries (.device/old: git archive e08a477 qerl benchmarks) and with them,
        # alternating, M = 1 / 16 / 64 / 128; then bounds.py's input gradient on "rows"
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "rows or input_gradient or packed_linear or default_dispatch" -rf --tb=short 2>&1 | grep -v "^  \|Warning" \
      | tail -6 | tee "$out/gpu_tests.txt"
    dispatch_alternating 60 /tmp/q56d --dirs bwd --shipped-bwd-layout rows --models 7b,14b,32b --ms 1,16,64,128
    timeout 170 python3 benchmarks/bounds.py --dirs bwd --bwd-layout rows --out /tmp/q56d_bounds 2>&1 | tail -12
    tar -cf "$out/bounds.tar" -C /tmp/q56d_bounds .
    ;;
  56e)  # the rows entries' lookup fixed (a rows entry replaces only its own bucket): the rows GPU tests again, then the
        # "fill" search on "rows" at M = 32 / 256 / 512 (the table's config a candidate, the shipped path on "rows")
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "rows" -rf \
      --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 32,256,512 --models 7b,14b --out /tmp/q56e/a 2>&1 | grep -v Warning | tee "$out/log_a.txt" | tail -30
    timeout 100 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 32,256,512 --models 32b --layers gate_up,down --out /tmp/q56e/b 2>&1 | grep -v Warning \
      | tee "$out/log_b.txt" | tail -10
    for p in a b; do tar -rf "$out/search.tar" -C /tmp/q56e $p/gemm_ws.json $p/tuned_ws.json; done
    ;;
  56f)  # the final rows tables (56c's and 56e's picks): the default dispatch on "rows" with the tables before the
        # entries (.device/old: git archive e08a477 qerl benchmarks) and with them, alternating, M = 1-256; then bounds.py's
        # input gradient on "rows" (the table's lookup fixed since 56d)
    device_name
    dispatch_alternating 70 /tmp/q56f --dirs bwd --shipped-bwd-layout rows --models 7b,14b,32b --ms 1,16,32,64,128,256
    timeout 170 python3 benchmarks/bounds.py --dirs bwd --bwd-layout rows --out /tmp/q56f_bounds 2>&1 | tail -12
    tar -cf "$out/bounds.tar" -C /tmp/q56f_bounds .
    ;;
  56g)  # split-N runs as even as the count allows (not only divisors of the step count): the input gradient's GPU tests
        # (uneven splits among the configs), then the "fill" search on "rows" at M = 1 / 16 / 32 / 64 with the splits
        # that fill whole waves now unconstrained
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient_matches or rows_layout_default or module_backward" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 1,16,32,64 --out /tmp/q56g 2>&1 | grep -v Warning | tee "$out/log.txt" | grep "geomean\|FAILED\|WRONG" | tail -12
    cp /tmp/q56g/gemm_ws.json /tmp/q56g/tuned_ws.json "$out/"
    ;;
  56h)  # 56g's picks (TUNED_BWD_ROWS): the dispatch GPU tests, then the default dispatch on "rows" with the tables
        # before them (.device/old: git archive of 56g's commit) and with them, alternating, M = 1 / 16 / 32 / 64
    device_name
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "rows_layout_default or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 \
      | tee "$out/gpu_tests.txt"
    dispatch_alternating 60 /tmp/q56h --dirs bwd --shipped-bwd-layout rows --models 7b,14b,32b --ms 1,16,32,64
    ;;
  56i)  # bounds.py's input gradient on "rows" with the final tables
    device_name
    timeout 200 python3 benchmarks/bounds.py --dirs bwd --bwd-layout rows --out /tmp/q56i_bounds 2>&1 | tail -3
    cp /tmp/q56i_bounds/bounds.json /tmp/q56i_bounds/bounds.md "$out/"
    ;;
  57a)  # Run 23: where the input gradient's time goes (benchmarks/ws_probe.py --dir bwd: the shipped one-consumer
        # configs on "rows" as they are, the consumer only waiting and releasing, the scale warp only passing stages on,
        # the code bytes' copies alone), every layer at M = 1 / 16 / 64; then the forward's probe at M = 64 (with and
        # without the copies of X, whose boxes the CTAs of a row of tiles each read from L2)
    device_name
    timeout 380 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 1,16,64 --out /tmp/q57a/bwd 2>&1 \
      | grep -v Warning | tee "$out/log_bwd.txt" | tail -3
    cp /tmp/q57a/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 170 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 64 --variants full,no_x,no_compute \
      --out /tmp/q57a/fwd 2>&1 | grep -v Warning | tee "$out/log_fwd.txt" | tail -3
    cp /tmp/q57a/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    ;;
  57b)  # the code boxes' read rate without L2 hits (benchmarks/read_pattern.py now cycles 3x L2 of weight copies; 51a
        # read one copy): row-major boxes of 64 rows x 64 / 128 / 256 bytes and tile-major 4 KiB boxes, each program
        # walking K (the forward's order) or N (the input gradient's), 7B and 32B layers; then the forward's probe at
        # M = 1 (the code bytes' copies alone in the kernel's own ring) on the same machine
    device_name
    timeout 330 python3 benchmarks/read_pattern.py --models 7b,32b --orders k,n --splits 1,4,8,16,32 \
      --out /tmp/q57b/read 2>&1 | tee "$out/log_read.txt" | tail -2
    cp /tmp/q57b/read/read_pattern.json "$out/"
    timeout 150 python3 benchmarks/ws_probe.py --models 7b,32b --ms 1 --variants full,no_compute,codes_only \
      --out /tmp/q57b/fwd 2>&1 | grep -v Warning | tee "$out/log_fwd.txt" | tail -2
    cp /tmp/q57b/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    ;;
  57c)  # the input gradient's code copies in its own ring with the scale warp in the chain (codes_only) and out of it
        # (codes_direct), every layer at M = 1 / 16, and on the same machine the plain TMA loop over the same boxes in
        # the same order (read_pattern.py rows64, programs walking N, 4-16 splits)
    device_name
    timeout 200 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 1,16 \
      --variants full,no_compute,codes_only,codes_direct --out /tmp/q57c/bwd 2>&1 | grep -v Warning \
      | tee "$out/log_bwd.txt" | tail -2
    cp /tmp/q57c/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 150 python3 benchmarks/read_pattern.py --models 7b,14b,32b --orders n --splits 3,4,6,8,16 \
      --patterns rows64 --no-gemm --out /tmp/q57c/read 2>&1 | tee "$out/log_read.txt" | tail -2
    cp /tmp/q57c/read/read_pattern.json "$out/"
    ;;
  57d)  # what a launch of the warp-specialized kernels costs with no work (ws_probe.py "empty": no chunks / steps, the
        # set-up, partitions and epilogue alone) next to the kernels, forward at M = 1 and input gradient at M = 1 / 16,
        # every layer; then the plain TMA loop (read_pattern.py) on the 14B layers in the forward's order
    device_name
    timeout 150 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 1,16 \
      --variants full,codes_only,empty --out /tmp/q57d/bwd 2>&1 | grep -v Warning | tee "$out/log_bwd.txt" | tail -2
    cp /tmp/q57d/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 150 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 1 --variants full,codes_only,empty \
      --out /tmp/q57d/fwd 2>&1 | grep -v Warning | tee "$out/log_fwd.txt" | tail -2
    cp /tmp/q57d/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    timeout 100 python3 benchmarks/read_pattern.py --models 14b --orders k --splits 1,2,4,8 --patterns rows64 \
      --no-gemm --out /tmp/q57d/read 2>&1 | tee "$out/log_read.txt" | tail -2
    cp /tmp/q57d/read/read_pattern.json "$out/"
    ;;
  57e)  # the fused split sums with four splits' loads in flight: their GPU tests (the bits of the second kernel's sum,
        # the references), then the default dispatch with the previous sums (.device/old: git archive c49c8ca qerl
        # benchmarks) and the new ones, alternating: the forward on "words" and the input gradient on "rows", M = 1 / 16 / 32
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "fused_split or test_matches_fp32_reference or input_gradient_matches" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    mkdir -p /tmp/q57e_w /tmp/q57e_b
    top=$out; out=/tmp/q57e_w
    dispatch_alternating 60 /tmp/q57e_wp --shipped-layout words --models 7b,14b,32b --ms 1,16,32
    out=/tmp/q57e_b
    dispatch_alternating 60 /tmp/q57e_bp --dirs bwd --shipped-bwd-layout rows --models 7b,14b,32b --ms 1,16,32
    out=$top
    tar -cf "$out/dispatch_words.tar" -C /tmp/q57e_w .
    tar -cf "$out/dispatch_bwd.tar" -C /tmp/q57e_b .
    ;;
  57f)  # what makes the kernels' own ring stream slower than the plain TMA loop (57c): the code copies alone and the
        # full kernel on the decode configs with fewer registers (more CTAs per SM), more / fewer stages, more / fewer
        # splits, at M = 1 on the wide and the small layers; then the fused-sum test on the one-by-one sum
    device_name
    timeout 200 python3 benchmarks/ws_probe.py --dir bwd --models 7b,32b --layers qkv,gate_up --ms 1 \
      --variants full,codes_only --configs ";maxnreg=64;maxnreg=56;stages=3;stages=12;split_n=8;split_n=32" \
      --out /tmp/q57f/bwd 2>&1 | grep -v Warning | tee "$out/log_bwd.txt" | tail -2
    cp /tmp/q57f/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 200 python3 benchmarks/ws_probe.py --models 7b,32b --layers qkv,gate_up --ms 1 \
      --variants full,codes_only --configs ";maxnreg=64;maxnreg=56;stages=3;stages=10;bn=128" \
      --out /tmp/q57f/fwd 2>&1 | grep -v Warning | tee "$out/log_fwd.txt" | tail -2
    cp /tmp/q57f/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "fused_split" -rf \
      --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  57g)  # five CTAs per SM at decode tiles: the shipped configs on 48 registers a thread (the consumer's wgmmas then
        # serialized by ptxas; without chunks / steps in flight too), every layer, input gradient at M = 1 / 16,
        # forward at M = 1 / 16
    device_name
    timeout 220 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 1,16 --variants full \
      --configs ";maxnreg=48;maxnreg=48,in_flight=False" --out /tmp/q57g/bwd 2>&1 | grep -v Warning \
      | tee "$out/log_bwd.txt" | tail -2
    cp /tmp/q57g/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 220 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 1,16 --variants full \
      --configs ";maxnreg=48;maxnreg=48,in_flight=False" --out /tmp/q57g/fwd 2>&1 | grep -v Warning \
      | tee "$out/log_fwd.txt" | tail -2
    cp /tmp/q57g/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    ;;
  57h)  # the driver's CTAs per SM for the decode configs (benchmarks/ws_occupancy.py), then the input gradient's "fill"
        # search on "rows" with the corrected CTAs per SM (256 threads a CTA) and 48-register candidates (five CTAs per
        # SM), M = 1 / 16 / 32
    device_name
    timeout 120 python3 benchmarks/ws_occupancy.py --out /tmp/q57h/occupancy.json 2>&1 | grep -v Warning \
      | tee "$out/log_occupancy.txt" | tail -14
    cp /tmp/q57h/occupancy.json "$out/"
    timeout 300 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts rows --shipped-bwd-layout rows \
      --ms 1,16,32 --out /tmp/q57h/search 2>&1 | grep -v Warning | tee "$out/log_search.txt" \
      | grep "geomean\|FAILED\|WRONG" | tail -12
    cp /tmp/q57h/search/gemm_ws.json /tmp/q57h/search/tuned_ws.json "$out/"
    ;;
  57i)  # run 23's rows entries: the input gradient's GPU tests (48-register configs among them), the default dispatch
        # on "rows" with the tables before them (.device/old: git archive e708832 qerl benchmarks) and with them,
        # alternating, M = 1 / 8 / 16 / 32; then the "fill" search on "pairs" (TUNED_BWD) at M = 1 / 16 / 32
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient_matches or rows_layout_default or module_backward" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    top=$out; out=/tmp/q57i_d; mkdir -p $out
    dispatch_alternating 60 /tmp/q57i --dirs bwd --shipped-bwd-layout rows --models 7b,14b,32b --ms 1,8,16,32
    out=$top; tar -cf "$out/dispatch_rows.tar" -C /tmp/q57i_d .
    timeout 150 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --ms 1,16,32 --out /tmp/q57i_s 2>&1 \
      | grep -v Warning | tee "$out/log_search.txt" | grep "geomean\|FAILED\|WRONG" | tail -6
    cp /tmp/q57i_s/tuned_ws.json "$out/"
    ;;
  57j)  # run 23's TUNED_BWD entries ("pairs"): the dispatch GPU tests, then the default dispatch with the tables before
        # them (.device/old: git archive 53e6e28 qerl benchmarks, which holds the rows entries) and with them,
        # alternating, on "pairs" and on "rows", M = 1 / 8 / 16 / 32; then bounds.py's input gradient on "rows"
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "default_dispatch or rows_layout_default or module_backward or packed_linear" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    dispatch_layouts q57j
    timeout 200 python3 benchmarks/bounds.py --dirs bwd --bwd-layout rows --out /tmp/q57j_bounds 2>&1 | tail -3
    cp /tmp/q57j_bounds/bounds.json /tmp/q57j_bounds/bounds.md "$out/"
    ;;
  57k)  # on an H100: run 23's input-gradient tables against run 22's final tables (.device/old: git archive 98f109c
        # qerl benchmarks), alternating, on "pairs" and on "rows", M = 1 / 8 / 16 / 32
    device_name
    dispatch_layouts q57k
    ;;
  57l)  # the final input-gradient tables against run 22's (.device/old: git archive 98f109c qerl
        # benchmarks) on an H200, alternating, on "pairs" and on "rows", M = 1 / 8 / 16 / 32 (as 57k)
    device_name
    dispatch_layouts q57l
    ;;
  57m)  # split sums in the kernel or in a second kernel, on every shipped split config (the searches tried only the
        # one ``nvfp4_gemm._fuse_reduction`` names): the input gradient on "rows" at M = 1 / 16 / 32, the forward on
        # "words" at M = 1 / 16 / 32
    device_name
    timeout 200 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 1,16,32 --variants full \
      --configs ";fused=True;fused=False" --out /tmp/q57m/bwd 2>&1 | grep -v Warning | tee "$out/log_bwd.txt" | tail -2
    cp /tmp/q57m/bwd/ws_probe.json "$out/ws_probe_bwd.json"
    timeout 200 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 1,16,32 --variants full \
      --configs ";fused=True;fused=False" --out /tmp/q57m/fwd 2>&1 | grep -v Warning | tee "$out/log_fwd.txt" | tail -2
    cp /tmp/q57m/fwd/ws_probe.json "$out/ws_probe_fwd.json"
    ;;
  57n)  # 57m's sums: the dispatch GPU tests, then the default dispatch with the previous tables (.device/old: git
        # archive f89e58c qerl benchmarks) and the new ones, alternating, M = 1 / 16: the forward on "words", the input
        # gradient on "rows" and on "pairs"
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "default_dispatch or rows_layout_default or fused_split" -rf --tb=short 2>&1 | grep -v "^  \|Warning" \
      | tail -3 | tee "$out/gpu_tests.txt"
    top=$out
    for g in words rows pairs; do
      out=/tmp/q57n_$g; mkdir -p $out
      if [ $g = words ]; then
        dispatch_alternating 60 /tmp/q57n_${g}_p --shipped-layout words --models 7b,14b,32b --ms 1,16
      else
        dispatch_alternating 60 /tmp/q57n_${g}_p --dirs bwd --shipped-bwd-layout $g --models 7b,14b,32b --ms 1,16
      fi
      out=$top; tar -cf "$out/dispatch_$g.tar" -C /tmp/q57n_$g .
    done
    ;;
  58a)  # the input gradient in one pipelined partition (WsBwdConfig.pipelined): its GPU tests (same bits as the
        # ring, fp32 reference), then against the shipped "rows" configs at M = 1 / 16 on every layer
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "pipelined or input_gradient_matches" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -8 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/pipelined_bwd.py --ms 1,16 --out "$out" 2>&1 | tee "$out/log.txt" | tail -4
    ;;
  58b)  # the input gradient's "fill" searches with both split sums timed (in the kernel, by a second kernel) at
        # M = 1 / 16, on "rows" then on "pairs"
    device_name
    for lay in rows pairs; do
      timeout 270 python3 benchmarks/gemm_ws.py --dirs bwd --tile-set fill --layouts $lay --shipped-bwd-layout $lay \
        --ms 1,16 --out /tmp/q58b_$lay 2>&1 | grep -v Warning | tee "$out/log_search_$lay.txt" \
        | grep "geomean\|FAILED\|WRONG" | tail -4
      cp /tmp/q58b_$lay/tuned_ws.json "$out/tuned_$lay.json"; cp /tmp/q58b_$lay/gemm_ws.json "$out/gemm_ws_$lay.json"
    done
    ;;
  58c)  # the forward's "fill" search on "words" with both split sums timed, M = 1 / 16
    device_name
    timeout 500 python3 benchmarks/gemm_ws.py --tile-set fill --layouts words --shipped-layout words --ms 1,16 \
      --out /tmp/q58c 2>&1 | grep -v Warning | tee "$out/log_search.txt" | grep "geomean\|FAILED\|WRONG" | tail -4
    cp /tmp/q58c/tuned_ws.json /tmp/q58c/gemm_ws.json "$out/"
    ;;
  58d)  # 58b's M = 16 entries: the dispatch GPU tests, then the default dispatch with the tables before them
        # (.device/old: git archive 1da8287 qerl benchmarks) and with them, alternating, on "pairs" and "rows", M = 16
        # (run on an H200 and on an H100)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "default_dispatch or rows_layout_default or module_backward or packed_linear" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    top=$out
    for lay in pairs rows; do
      out=/tmp/q58d_$lay; mkdir -p $out
      dispatch_alternating 45 /tmp/q58d_${lay}_p --dirs bwd --shipped-bwd-layout $lay --models 7b,14b,32b --ms 16
      out=$top; tar -cf "$out/dispatch_$lay.tar" -C /tmp/q58d_$lay .
    done
    ;;
  58e)  # X in a ring of its own (WsConfig.x_stages): the forward's GPU tests, then ws_probe.py on the shipped "words"
        # configs at M = 32 / 64 / 128 with X's ring and deeper chunk rings (full kernel and consumer only waiting)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "x_ring or matches_fp32_reference or words_layout_gives" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/ws_probe.py --models 7b,14b,32b --ms 32,64,128 --variants full,no_compute \
      --configs ";x_stages=2;x_stages=2,stages=8;x_stages=3,stages=8;x_stages=2,stages=12" --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log_probe.txt" | tail -3
    ;;
  58f)  # how fast the SMs re-read X from L2 (benchmarks/l2_reread.py), the traffic the forward makes at M >= 32
    device_name
    timeout 200 python3 benchmarks/l2_reread.py --out "$out" 2>&1 | grep -v Warning | tee "$out/log.txt" | tail -30
    ;;
  58g)  # the input gradient at M = 32 / 64 ("rows", shipped configs): deeper rings (6 / 8 stages, 2 CTAs per SM still
        # fit at 128 registers) for the full kernel, the copies alone and the code bytes alone (ws_probe.py)
    device_name
    timeout 500 python3 benchmarks/ws_probe.py --dir bwd --models 7b,14b,32b --ms 32,64 \
      --variants full,copies_only,codes_only --configs ";stages=6;stages=8" --out "$out" 2>&1 | grep -v Warning \
      | tee "$out/log_probe.txt" | tail -3
    ;;
  59a)  # the large-M slab path piece by piece (benchmarks/slab_plans.py): its GPU tests, then every slab plan (row
        # slabs 1-6, one stream / overlapped; the input gradient also on column slabs) on the 7B / 14B layers,
        # M = 1024 / 4096, forward and input gradient
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py \
      -k "slab or large_m" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/slab_plans.py --models 7b,14b --ms 1024,4096 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | tail -40
    ;;
  59b)  # as 59a with each cell's variants timed in turn (graph replays round-robin, a repeat of the default
        # dispatch as the noise), every layer
    device_name
    timeout 560 python3 benchmarks/slab_plans.py --models 7b,14b,32b --ms 1024,4096 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | tail -48
    ;;
  59c)  # SLAB_PLANS (from 59b's M = 4096 cells): the slab path's GPU tests, then the default dispatch against the
        # plan it took before, in turn, on the table's shapes at M = 2048 / 4096 / 8192
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py \
      -k "slab or large_m or packed_linear or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/slab_plans.py --verify --table-only --ms 2048,4096,8192 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | tail -40
    ;;
  59d)  # the kept SLAB_PLANS entries (59c's verification): GPU tests, then the default dispatch against the plan it
        # took before, in turn, on every layer at M = 2048 / 4096 / 8192 (shapes without an entry: the same plan twice)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py \
      -k "slab or large_m or packed_linear or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/slab_plans.py --verify --ms 2048,4096,8192 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | tail -72
    ;;
  59e)  # the default dispatch's host work per call next to its GPU time (benchmarks/host_overhead.py), 7B layers,
        # M = 1 / 16 / 128 / 1024 / 4096, with cProfile of a few cells
    device_name
    timeout 300 python3 benchmarks/host_overhead.py --ms 1,16,128,1024,4096 --out "$out" 2>&1 | grep -v Warning \
      | tee "$out/log.txt" | head -48
    ;;
  59f)  # the warp-specialized kernels on their M = 1024 table configs at M = 2048 / 4096, against the default
        # dispatch (slab path, SLAB_PLANS) and the plan before, in turn, every layer
    device_name
    timeout 500 python3 benchmarks/slab_plans.py --verify --ws-from 1024 --ms 2048,4096 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | tail -150 | cut -c1-150 | grep -v "previous " 
    ;;
  59g)  # the M = 2048 / 4096 entries of TUNED_BWD / TUNED (59f): dispatch GPU tests, then the default dispatch
        # against the slab path (SLAB_PLANS) and the plan before run 25, in turn, every layer, M = 1536-4096
        # (run on an H200 and on an H100)
    device_name
    large_m_verify 1536,2048,3072,4096
    ;;
  59h)  # 59g's findings applied (the 7B qkv / o / gate_up input-gradient entries at M = 2048 left out: slower at
        # M = 1536; every product past M = 1024 on the slab path unless a table entry takes it): dispatch GPU tests,
        # then the default dispatch against the slab path and the plan before run 25, M = 1280-3072, every layer
        # (run on an H200 and on an H100)
    device_name
    large_m_verify 1280,1536,2048,3072
    ;;
  59i)  # as 59h at M = 4096 / 8192 (SLAB_PLANS and the M = 4096 entries; 59c / 59d checked them on an H200 only)
    device_name
    timeout 400 python3 benchmarks/slab_plans.py --verify --ms 4096,8192 --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | grep -v "^     " | cut -c1-60,150-260 | tail -48
    ;;
  59j)  # host work per call split into Triton's launch path and the dispatch around it (host_overhead.py), 7B
        # layers, M = 16 / 1024 / 4096
    device_name
    timeout 300 python3 benchmarks/host_overhead.py --ms 16,1024,4096 --profile "" --out "$out" 2>&1 \
      | grep -v Warning | tee "$out/log.txt" | head -30
    ;;
  59k)  # where the dispatch's own host time goes: cProfile by cumulative time of 7B o at M = 16 / 1024 and 7B down's
        # input gradient at M = 4096
    device_name
    timeout 200 python3 benchmarks/host_overhead.py --ms 16,1024,4096 --sort cumulative --top 45 \
      --profile "o:fwd:16,o:bwd:16,o:fwd:1024,down:bwd:4096" --out "$out" 2>&1 | grep -v Warning > "$out/log.txt"
    grep -c . "$out/log.txt"
    ;;
  59l)  # the final tree: GPU tests of the dispatch and the layouts now cached, the host work per call again
        # (host_overhead.py), then the default dispatch against the plan before run 25, every layer, M = 1024-8192
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "rows_layout_default or module_backward or default_dispatch or slab or large_m or packed_linear or matches_fp32" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    mkdir -p "$out/host"
    timeout 120 python3 benchmarks/host_overhead.py --ms 16,1024,4096 --profile "" --out "$out/host" 2>&1 \
      | grep -v Warning > "$out/host/log.txt"; head -24 "$out/host/log.txt" | cut -c1-120
    timeout 420 python3 benchmarks/slab_plans.py --verify --ms 1024,2048,4096,8192 --out "$out" 2>&1 \
      | grep -v Warning > "$out/log.txt"; grep -c "M=" "$out/log.txt"
    ;;
  59m)  # the slab dequantization kernel's programs along K first (whole rows of the slab written by the programs
        # running at once) against along the rows, a few launch shapes, 7B / 32B weights (gemm_large_m.py --dequant)
    device_name
    PYTHONPATH=. timeout 300 python3 benchmarks/gemm_large_m.py --dequant --models 7b,32b --out "$out" \
      --dequant-shapes 32:4,32:4:k,64:4,64:4:k,64:8,64:8:k,128:8,128:8:k 2>&1 | grep -v Warning | tee "$out/log.txt" \
      | tail -66
    ;;
  59n)  # the dequantization's programs along K (DEQUANT_CHUNKS_FIRST, from 59m): GPU tests of the slab path, then the
        # default dispatch against the same with the programs along the rows, every layer, M = 2048 / 4096
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py \
      -k "slab or large_m or packed_linear or module_backward or dequant" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    timeout 400 python3 benchmarks/slab_plans.py --verify --dequant-order --ms 2048,4096 --out "$out" 2>&1 \
      | grep -v Warning > "$out/log.txt"; grep -v "^     " "$out/log.txt" | sed 's/.*M=/M=/' | cut -c1-12,150-300
    ;;
  59o)  # 7B qkv / o forward at M = 512-1024 (the warp-specialized kernel's M = 1024 entries serve it): the default
        # dispatch against the slab path (59b had the slab path 1.17x / 1.05x faster at M = 1024)
    device_name
    timeout 200 python3 benchmarks/slab_plans.py --verify --models 7b --layers qkv,o --dirs fwd \
      --ms 512,640,768,896,1024 --out "$out" 2>&1 | grep -v Warning > "$out/log.txt"
    grep -v "^     " "$out/log.txt" | sed 's/.*M=/M=/' | cut -c1-60,150-300
    ;;
  60a)  # every route the dispatch could take per layer and M between the tables' buckets (benchmarks/routes.py): the
        # forward on "pairs"; 60b: the input gradient
    device_name
    timeout 560 python3 benchmarks/routes.py --dirs fwd --ms 384,640,768,896,1024,1536,2048 --out "$out" 2>&1 \
      | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /' "$out/log.txt" | cut -c1-200
    ;;
  60b)
    device_name
    timeout 560 python3 benchmarks/routes.py --dirs bwd --ms 384,640,768,896,1024,1536,2048 --out "$out" 2>&1 \
      | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /' "$out/log.txt" | cut -c1-200
    ;;
  60c)  # run 26's keys between the buckets and SLAB_RANGES: the dispatch's GPU tests, then the default dispatch against
        # the same on the buckets only (benchmarks/routes.py --verify) at M off the measured grid, the forward
    device_name
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "keys_between or rows_layout_default or module_backward or default_dispatch or slab or large_m or packed_linear" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/routes.py --verify --dirs fwd --ms 320,448,576,704,832,960,1152,1408,1792 \
      --out "$out" 2>&1 | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /' "$out/log.txt" | cut -c1-60,100-220
    ;;
  60d)  # 60c's comparison on the input gradient
    device_name
    timeout 500 python3 benchmarks/routes.py --verify --dirs bwd --ms 320,448,576,704,832,960,1152,1408,1792 \
      --out "$out" 2>&1 | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /' "$out/log.txt" | cut -c1-60,100-220
    ;;
  60e)  # the final tables against run 25's (benchmarks/results/run26_2026-11-27/previous_tables.json, dumped from
        # fcb8123) and against the buckets only, M = 320-2048 on and off the grid, the forward; 60f: the input gradient
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "keys_between or default_dispatch or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 \
      | tee "$out/gpu_tests.txt"
    timeout 450 python3 benchmarks/routes.py --verify --dirs fwd \
      --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json \
      --ms 320,384,576,640,704,768,832,896,960,1024,1152,1408,1536,1792,2048 --out "$out" 2>&1 | grep -v Warning \
      > "$out/log.txt"; sed 's/ | .* | / /; s/best.*repeat/repeat/' "$out/log.txt" | cut -c1-150
    ;;
  60f)
    device_name
    timeout 560 python3 benchmarks/routes.py --verify --dirs bwd \
      --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json \
      --ms 320,384,576,640,704,768,832,896,960,1024,1152,1408,1536,1792,2048 --out "$out" 2>&1 | grep -v Warning \
      > "$out/log.txt"; sed 's/ | .* | / /; s/best.*repeat/repeat/' "$out/log.txt" | cut -c1-150
    ;;
  60g)  # after 60f: 7B qkv's input-gradient M = 2048 key out, 7B gate_up's M = 1025-1536 to the slab path; GPU tests,
        # then the input gradient of those two layers against run 25's tables at M = 1152-2048
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "keys_between or default_dispatch or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 \
      | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/routes.py --verify --dirs bwd --models 7b --layers qkv,gate_up \
      --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json \
      --ms 1152,1408,1536,1792,2048 --out "$out" 2>&1 | grep -v Warning \
      > "$out/log.txt"; sed 's/ | .* | / /; s/best.*repeat/repeat/' "$out/log.txt" | cut -c1-150
    ;;
  60h)  # the final tables against run 25's on an H100: GPU tests, the forward and the input gradient, M = 320-1792
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "keys_between or default_dispatch or module_backward" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 \
      | tee "$out/gpu_tests.txt"
    for d in fwd bwd; do
      timeout 220 python3 benchmarks/routes.py --verify --dirs $d \
        --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json \
        --ms 320,384,576,704,832,960,1024,1152,1792 --out "$out/$d" 2>&1 | grep -v Warning > "$out/log_$d.txt"
    done
    cat "$out"/log_*.txt | sed 's/ | .* | / /; s/best.*repeat/repeat/' | cut -c1-150 | tail -80
    ;;
  60i)  # the final tables (7B o's forward at M = 897-1024 back on the kernel after 60h) against run 25's on an H200:
        # the forward and the input gradient, M = 320-2048 on and off the grid
    device_name
    for d in fwd bwd; do
      timeout 280 python3 benchmarks/routes.py --verify --dirs $d \
        --previous-tables benchmarks/results/run26_2026-11-27/previous_tables.json \
        --ms 320,384,576,640,704,768,832,896,960,1024,1152,1408,1536,1792,2048 --out "$out/$d" 2>&1 | grep -v Warning \
        > "$out/log_$d.txt"
    done
    cat "$out"/log_*.txt | sed 's/ | .* | / /; s/best.*repeat/repeat/' | cut -c1-150 | tail -40
    ;;
  60j)  # the routes of the forward on the "words" layout (the rollout's; TUNED_WORDS), as 60a
    device_name
    timeout 560 python3 benchmarks/routes.py --layout words --dirs fwd --ms 384,640,768,896,1024,1536,2048 \
      --out "$out" 2>&1 | grep -v Warning > "$out/log.txt"; sed 's/ | .* | / /' "$out/log.txt" | cut -c1-200
    ;;
  60k)  # 60j's keys and slab ranges on "words": GPU tests, then the forward on "words" against run 25's tables
        # (previous_tables.json with TUNED_WORDS) and on the buckets only, M = 320-2048 on and off the grid
    device_name
    words_verify "keys_between or default_dispatch or words" 320,384,576,640,704,768,832,896,960,1024,1152,1408,1536,1792,2048
    ;;
  60l)  # after 60k: M = 1025-1280 on "words" keep their route before on M = 1280 keys; GPU tests, then the forward on
        # "words" against run 25's tables at M = 1088-1792
    device_name
    words_verify "keys_between or default_dispatch" 1088,1152,1216,1280,1344,1408,1472,1536,1664,1792
    ;;
  60m)  # 60l's words tables on an H100: GPU tests, the forward on "words" against run 25's tables
    device_name
    words_verify "keys_between or default_dispatch" 320,576,704,832,960,1152,1408,1536,1792,2048
    ;;
  60n)  # the routes between the small buckets (decode batches): the forward on "words" and on "pairs", M = 24-192
        # (measured only)
    device_name
    for lay in words pairs; do
      timeout 250 python3 benchmarks/routes.py --layout $lay --dirs fwd --ms 24,48,96,192 --out "$out/$lay" 2>&1 \
        | grep -v Warning > "$out/log_$lay.txt"
    done
    cat "$out"/log_*.txt | sed 's/ | .* | / /' | cut -c1-200
    ;;
  61a)  # Run 27: the forward's "fill" search at M = 192 on "words" (every tile unsplit and with splits of K that fill
        # whole waves, benchmarks/gemm_ws.py mid_fill_candidates; the default dispatch on "words" as the shipped path),
        # and on "pairs" for 14B / 32B qkv (one shape), each candidate checked against fp32 first
    device_name
    for part in 7b:qkv,o,gate_up,down:200 14b:qkv,o,gate_up,down:200 32b:gate_up,down:110; do
      IFS=: read -r model layers limit <<< "$part"
      timeout "$limit" python3 benchmarks/gemm_ws.py --dirs fwd --tile-set fill --ms 192 --layouts words \
        --shipped-layout words --models "$model" --layers "$layers" --out "/tmp/q61a/$model" 2>&1 | grep -v Warning \
        | tee "$out/log_words_$model.txt" | grep "M=  192"
    done
    timeout 60 python3 benchmarks/gemm_ws.py --dirs fwd --tile-set fill --ms 192 --models 14b --layers qkv \
      --out /tmp/q61a/pairs 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | grep "M=  192"
    for p in 7b 14b 32b pairs; do tar -rf "$out/search.tar" -C /tmp/q61a $p/gemm_ws.json $p/tuned_ws.json; done
    ;;
  61b)  # after 61a (about 10 s a cell): the same "fill" search on "words" at M = 64 / 96 / 128, then at M = 32 / 256
        # (TUNED_WORDS's entries there date from run 11's search, before the fill candidates), and on "pairs" at M = 192
        # for the layers 61a left out
    device_name
    for part in words:64,96,128:7b,14b:210 words:64,96,128:32b:70 pairs:192:7b,14b:100 pairs:192:32b:30 \
                words:32,256:7b,14b:120 words:32,256:32b:40; do
      IFS=: read -r lay ms models limit <<< "$part"
      layers=qkv,o,gate_up,down; [ "$models" = 32b ] && layers=gate_up,down
      w="/tmp/q61b/${lay}_${ms//,/_}_${models//,/_}"
      timeout "$limit" python3 benchmarks/gemm_ws.py --dirs fwd --tile-set fill --ms "$ms" --layouts "$lay" \
        --shipped-layout "$lay" --models "$models" --layers "$layers" --out "$w" 2>&1 | grep -v Warning \
        | tee -a "$out/log.txt" | grep " M=" | cut -c1-250
      tar -rf "$out/search.tar" -C /tmp/q61b "$(basename "$w")"
    done
    ;;
  61c)  # the entries and M = 96 / 192 keys taken from 61a / 61b: GPU tests, then the default dispatch against the tables
        # before (benchmarks/results/run27_2026-11-27/previous_tables.json: 3963b5c's, with its keys between the
        # buckets) and on the buckets only, M = 20-256 on and off the grid: the forward on "words", then on "pairs"
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "keys_between or default_dispatch" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 \
      | tee "$out/gpu_tests.txt"
    prev=benchmarks/results/run27_2026-11-27/previous_tables.json
    timeout 330 python3 benchmarks/routes.py --verify --layout words --dirs fwd --previous-tables $prev \
      --ms 20,24,32,40,56,64,72,80,96,112,128,136,160,176,192,208,240,256 --out "$out/words" 2>&1 | grep -v Warning \
      > "$out/log_words.txt"
    timeout 100 python3 benchmarks/routes.py --verify --dirs fwd --previous-tables $prev --ms 136,160,176,192,208 \
      --out "$out/pairs" 2>&1 | grep -v Warning > "$out/log_pairs.txt"
    cat "$out"/log_*.txt | sed 's/ | .* | / /; s/best.*repeat/repeat/' | cut -c1-150 | tail -60
    ;;
  61d)  # after 61c (the same config slower at M = 136 than at 192 on some layers): benchmarks/partial_tiles.py, the
        # dispatch's config on X of M rows against X zero-padded to whole tiles, "words" then "pairs"
    device_name
    timeout 200 python3 benchmarks/partial_tiles.py --layout words --dirs fwd --models 7b,14b,32b \
      --layers qkv,o,gate_up --ms 66,72,80,96,129,136,144,152,160,176,184,192 --out "$out/words" 2>&1 \
      | grep -v Warning | tee "$out/log_words.txt" | cut -c1-150
    timeout 90 python3 benchmarks/partial_tiles.py --layout pairs --dirs fwd --models 7b,14b --layers qkv,o,gate_up \
      --ms 136,160,192 --out "$out/pairs" 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | cut -c1-150
    ;;
  61e)  # the forward's last M tile shifted to end at row M (nvfp4_gemm_ws._tile_m0, after 61d): GPU tests, then
        # benchmarks/partial_tiles.py on "words" (shifted, unshifted, padded), and the input gradient's partial tiles
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "last_tile or (matches_fp32_reference and not input_gradient) or keys_between or default_dispatch or swiglu" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 150 python3 benchmarks/partial_tiles.py --layout words --dirs fwd --models 7b,14b,32b \
      --layers qkv,o,gate_up --ms 66,72,80,129,136,144,160,176,192 --out "$out/words" 2>&1 \
      | grep -v Warning | tee "$out/log_words.txt" | cut -c1-180
    timeout 100 python3 benchmarks/partial_tiles.py --layout pairs --dirs bwd --models 7b \
      --ms 129,136,160,192,264,520 --out "$out/bwd" 2>&1 | grep -v Warning | tee "$out/log_bwd.txt" | cut -c1-180
    ;;
  61f)  # the input gradient's last M tile shifted too (after 61e): GPU tests, benchmarks/partial_tiles.py on the input
        # gradient, then the forward on "words" against the tables before (3963b5c's) and on the buckets only
    device_name
    timeout 270 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "last_tile or input_gradient_matches_fp32 or swiglu_dispatch or keys_between or default_dispatch" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 100 python3 benchmarks/partial_tiles.py --layout pairs --dirs bwd --ms 136,264,520,700 \
      --out "$out/bwd" 2>&1 | grep -v Warning | tee "$out/log_bwd.txt" | cut -c1-150
    timeout 200 python3 benchmarks/routes.py --verify --layout words --dirs fwd \
      --previous-tables benchmarks/results/run27_2026-11-27/previous_tables.json \
      --ms 20,24,32,40,56,64,72,80,96,112,128,136,160,176,192,208,240,256 --out "$out/words" 2>&1 | grep -v Warning \
      > "$out/log_words.txt"; sed 's/ | .* | / /; s/best.*repeat/repeat/' "$out/log_words.txt" | cut -c1-150 | tail -30
    ;;
  61g)  # the shift only where the last tile holds <= 32 rows (shift_last_tile) and three M = 192 "words" keys out
        # (after 61f): GPU tests, then the training's products on "pairs" against the tables before (3963b5c's, no shift:
        # "previous"; with this tree's shift: "previous, shifted"), M on and off the tiles, forward and input gradient
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "last_tile or swiglu_dispatch or keys_between or default_dispatch" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    pairs_verify 200 136,160,192,264,520,700,1100 40
    ;;
  61i)  # a shifted last tile stores only its own rows (nvfp4_gemm_ws._own_rows; 61g: storing them all cost 2-4% at
        # 256-row tiles and splits), 32B down's M = 192 "pairs" key out: GPU tests, then 61g's comparison
    device_name
    timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "last_tile or matches_fp32_reference or swiglu or row_norm or keys_between or default_dispatch" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    pairs_verify 160 136,160,192,264,520,700,1100 12
    ;;
  61j)  # the final tables (7B o's M = 192 "pairs" key out) and shift rule (not on 256-row tiles of W, after 61i): the
        # kernels' GPU tests, then the forward on "words" and on "pairs" and the input gradient against the tables before
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "last_tile or swiglu or keys_between or default_dispatch or (matches_fp32_reference and 129)" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    prev=benchmarks/results/run27_2026-11-27/previous_tables.json
    timeout 150 python3 benchmarks/routes.py --verify --layout words --dirs fwd --previous-tables $prev \
      --ms 24,40,72,80,96,136,160,176,192,264,520 --out "$out/words" 2>&1 | grep -v Warning > "$out/log_words.txt"
    pairs_verify 110 136,160,192,264,520 8
    ;;
  61k)  # the final tree's other GPU tests: the input gradient (fp32, "rows", the shifted tile), the RMSNorm epilogues,
        # "words" = "pairs" bit for bit, then the Triton kernels' and the codec's
    device_name
    timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "input_gradient or rows or row_norm or words_layout_gives" -rf --tb=short 2>&1 | grep -v "^  \|Warning" \
      | tail -3 | tee "$out/gpu_tests_ws.txt"
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py tests/test_nvfp4.py \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  62a)  # rows of X past M that X's storage holds (nvfp4_gemm_ws.tma_rows): their GPU tests, then
        # benchmarks/partial_tiles.py where a tile reaches past M: the plain X, X with spare rows, X copied into whole
        # tiles, at M below the only tile's rows (decode batches, 1-100) and at M = 129-200 on 256-row tiles
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "rows_past_m" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    pt() {  # NAME LIMIT ARGS: partial_tiles.py on plain / spare / padded X
      local name=$1 limit=$2; shift 2
      timeout "$limit" python3 benchmarks/partial_tiles.py --variants plain,spare,padded --budget 0.25 "$@" \
        --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"; tail -2 "$out/log_$name.txt" | cut -c1-160
    }
    pt words 140 --layout words --dirs fwd --ms 1,4,12,24,40,56,66,100
    pt bwd 130 --layout pairs --dirs bwd --ms 1,4,12,24,40,56,100,136
    pt fwd 80 --layout pairs --dirs fwd --ms 24,40,100,136,200
    pt rows 50 --layout rows --dirs bwd --ms 1,40,136
    ;;
  62b)  # after 62a: the last tile's X (dY) copied in boxes of 8 rows where it reaches 16+ rows past M
        # (nvfp4_gemm_ws._x_box): GPU tests, then partial_tiles.py: this dispatch, whole boxes, boxes of 32 rows
    device_name
    timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "small_boxes or last_tile or default_dispatch or swiglu_dispatch" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    pt() {  # NAME LIMIT ARGS: partial_tiles.py on this dispatch, whole boxes, boxes of 32 rows
      local name=$1 limit=$2; shift 2
      timeout "$limit" python3 benchmarks/partial_tiles.py --variants "plain,whole boxes,boxes 32" --budget 0.25 \
        "$@" --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"; tail -1 "$out/log_$name.txt" | cut -c1-160
    }
    pt words 90 --layout words --dirs fwd --ms 40,56,66,100
    pt bwd 70 --layout pairs --dirs bwd --ms 40,100,136
    pt fwd 90 --layout pairs --dirs fwd --ms 40,100,136,200
    pt rows 30 --layout rows --dirs bwd --ms 136
    ;;
  62c)  # after 62b (on an H100: boxes of 8 rows cost up to 1.34x where boxes of 32 gained): boxes of 32 rows where a
        # whole box lies past M; GPU tests, then partial_tiles.py: this dispatch, whole boxes, boxes of 8, spare rows
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "small_boxes or (rows_past_m and 129)" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 \
      | tee "$out/gpu_tests.txt"
    pt() {  # NAME LIMIT ARGS: partial_tiles.py on this dispatch, whole boxes, boxes of 8 rows, spare rows
      local name=$1 limit=$2; shift 2
      timeout "$limit" python3 benchmarks/partial_tiles.py --variants "plain,whole boxes,boxes 8,spare" \
        --budget 0.25 "$@" --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"
      tail -1 "$out/log_$name.txt" | cut -c1-160
    }
    pt words 75 --layout words --dirs fwd --ms 40,66,100
    pt bwd 50 --layout pairs --dirs bwd --ms 100,136
    pt fwd 75 --layout pairs --dirs fwd --ms 40,136,200
    pt rows 30 --layout rows --dirs bwd --ms 136
    ;;
  62d)  # the final tree's wider GPU tests (every kernel now takes the small boxes' descriptor): the products against fp32
        # on every config, the module and dispatch tests, stream-K, then the residual + RMSNorm and RoPE epilogues
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "matches_fp32 or module_backward or packed_linear or default_dispatch or rows_layout_default or stream_k" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    timeout 110 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "add_norm or rope" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests_epilogues.txt"
    ;;
  62e)  # the decode step's outputs read as the next X allocated with rows past M (padded_empty): their GPU tests, the
        # decode layer's epilogues, decode attention, the SiLU x up dispatch
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_norm.py tests/test_decode_attention.py \
      tests/test_kernels_ws_gpu.py -k "whole_tiles or decode_layer or graph or swiglu_dispatch or (decode_attention and \
      not reference)" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  62f)  # 62e's new test again (its M = 12 case asked a 64-row tile of a buffer padded for M = 12's 16-row tiles)
    device_name
    timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_norm.py -k "whole_tiles" -rf \
      --tb=short 2>&1 | grep -v "Warning" | tail -15 | tee "$out/gpu_tests.txt"
    ;;
  63a)  # the box of the last tile that reaches past M copies the last 32 rows below M, stored where they belong
        # (_x_box, _rows_held; SUB_BOX_MIN_PAST 1): GPU tests, then partial_tiles.py on "words": this dispatch, whole
        # boxes, spare rows, at M = 33-63 (64-row tiles) and 100-127 (128-row tiles)
    device_name
    timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "small_boxes or boxes_reaching or rows_past_m or last_tile" -rf --tb=short 2>&1 | grep -v "^  \|Warning" \
      | tail -4 | tee "$out/gpu_tests.txt"
    pt_boxes words 270 --layout words --dirs fwd --ms 33,40,48,56,60,63,100,120
    ;;
  63b)  # 63a's timings on "pairs" (forward, input gradient) and "rows" (input gradient)
    device_name
    pt_boxes fwd 170 --layout pairs --dirs fwd --ms 40,48,56,63,100,120
    pt_boxes bwd 170 --layout pairs --dirs bwd --ms 40,48,56,63,100,120
    pt_boxes rows 100 --layout rows --dirs bwd --ms 40,56,100
    ;;
  63c)  # the final rule (sub_box_rows: 24 rows past M in the forward on 64-row tiles of X or W, else 32): GPU tests of
        # the boxes and the default dispatch, then partial_tiles.py where the rule takes or leaves the boxes
    device_name
    timeout 250 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "small_boxes or boxes_reaching or rows_past_m or last_tile or default_dispatch" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    pt_boxes words 110 --layout words --dirs fwd --ms 33,40,44,100,104
    pt_boxes fwd 60 --layout pairs --dirs fwd --ms 40,100
    pt_boxes bwd 60 --layout pairs --dirs bwd --ms 40,100
    ;;
  63d)  # the rest of 63c's tests (its pytest ran out of time on a cold compile cache after 200 of them), stream-K, the
        # residual + RMSNorm and RoPE epilogues, the decode layer's producers
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_kernels_gpu.py \
      -k "boxes_reaching or default_dispatch or stream_k" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 250 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_norm.py \
      -k "add_norm or rope or whole_tiles or decode_layer" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 \
      | tee "$out/gpu_tests_epilogues.txt"
    ;;
  63e)  # 63d's failure (the residual epilogue on 256 x 128 tiles: shared memory over the limit) with ws_matmul leaving
        # the small boxes out under that epilogue: it failed alike (the epilogue on those tiles needs 232512 bytes with
        # or without the boxes, an ahead-of-time compile showed), so the test skips that case and the boxes stayed;
        # then the decode harness at batches 40 and 100 (not whole tiles) with spare rows (the default), without them
        # (small boxes from run 29), and with neither
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "boxes_reaching" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    for v in "spare:" "own:--no-spare-rows" "whole:--no-spare-rows --whole-boxes"; do
      name=${v%%:*}; flags=${v#*:}
      # shellcheck disable=SC2086
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm \
        --batches 40,100 --new-tokens 128 $flags --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"
      tail -3 "$out/log_$name.txt"
    done
    ;;
  63f)  # on an H100: 63c's timings of the final rule on "words" and "pairs" (forward)
    device_name
    pt_boxes words 200 --layout words --dirs fwd --ms 33,40,44,100
    pt_boxes fwd 150 --layout pairs --dirs fwd --ms 40,100
    ;;
  63g)  # why the decode harness ran level with BF16 at batch 100 (63e): its GPU time by kind of kernel at batches 64,
        # 100 and 128 (eager steps, the PyTorch profiler), with the tok/s of the same runs
    device_name
    timeout 420 python3 benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm \
      --batches 64,100,128 --new-tokens 64 --profile --out "$out/profile" 2>&1 | grep -v Warning > "$out/log_profile.txt"
    tail -6 "$out/log_profile.txt"
    ;;
  63h)  # 63g found SiLU x up after the product (where its epilogue does not apply: 7B gate_up at M = 65-128, stream-K
        # entries) as four torch kernels, ~29 us a layer at batch 100; now one Triton kernel (swiglu_triton): its GPU
        # tests, then the decode harness at batches 64 / 100 / 128 with it and with the torch version (--torch-swiglu)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py tests/test_fused_norm.py \
      -k "swiglu" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    for v in "kernel:" "torch:--torch-swiglu"; do
      name=${v%%:*}; flags=${v#*:}
      # shellcheck disable=SC2086
      timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm \
        --batches 64,100,128 --new-tokens 128 $flags --out "$out/$name" 2>&1 | grep -v Warning > "$out/log_$name.txt"
      tail -4 "$out/log_$name.txt"
    done
    ;;
  63i)  # per 7B layer at M = 100 / 128 (benchmarks/epilogues.py): gate_up then SiLU x up in torch or in the Triton
        # kernel, against the SiLU x up epilogue on the stream-K entry made one CTA a tile
    device_name
    timeout 260 python3 benchmarks/epilogues.py --ms 100,128 --out "$out/epilogues" 2>&1 | grep -v Warning \
      | tee "$out/log_epilogues.txt" | tail -22
    ;;
  64a)  # Run 30: where the large-M forward's time goes (benchmarks/ws_probe.py on "pairs", TUNED's M = 1024 configs:
        # without the dequantization, without the tile's stores, without X's copies, with no chunks; cuBLAS's BF16 in
        # the same run), then the rollout's "words" forward at M = 128 likewise
    device_name
    timeout 330 python3 benchmarks/ws_probe.py --fwd-layout pairs --bf16 --models 7b,32b --ms 1024 \
      --variants full,no_dequant,no_store,no_x,empty --out /tmp/q64a/pairs 2>&1 | grep -v Warning \
      | tee "$out/log_pairs.txt" | tail -12
    cp /tmp/q64a/pairs/ws_probe.json "$out/ws_probe_pairs_1024.json"
    timeout 200 python3 benchmarks/ws_probe.py --bf16 --models 7b,32b --layers gate_up,down --ms 64,128 \
      --variants full,no_dequant,no_store,no_x --out /tmp/q64a/words 2>&1 | grep -v Warning \
      | tee "$out/log_words.txt" | tail -10
    cp /tmp/q64a/words/ws_probe.json "$out/ws_probe_words_128.json"
    ;;
  64b)  # the forward's whole tiles stored by TMA (_tma_store_tile): its GPU tests, then per layer and M the default
        # dispatch with it against the stores from registers, cuBLAS in the same rounds (benchmarks/tma_store.py),
        # and the probe at M = 1024 with it ("full") against the stores before ("regs_store") and none ("no_store")
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py \
      -k "tma_store or (matches_fp32_reference and 300-4608) or default_dispatch" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 256,512,1024,2048,4096 \
      --out "$out/tma_store" 2>&1 | grep -v Warning | tee "$out/log_tma_store.txt" | tail -8
    timeout 120 python3 benchmarks/ws_probe.py --fwd-layout pairs --bf16 --models 7b --ms 1024 \
      --variants full,regs_store,no_store --out /tmp/q64b 2>&1 | grep -v Warning | tee "$out/log_probe.txt" | tail -4
    ;;
  64c)  # 64b's GPU tests reached their limit with failures: the failing cases with their tracebacks, on this code and
        # on run 29's (dff81ee, carried as .device/old)
    device_name
    sel="matches_fp32_reference and 300-4608 and (8x64x6x8x or 16x256x4x3x or 64x64x3x1x1xFalsex128xFalsex2)"
    for tree in . .device/old; do
      (cd $tree && timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "$sel" \
        --tb=short 2>&1 | grep -v Warning | tail -25) | tee -a "$out/log_tests.txt"
    done
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k tma_store \
      --tb=short -x 2>&1 | grep -v Warning | tail -40 | tee "$out/log_tma_tests.txt"
    ;;
  64d)  # 64b's failures came from an mbarrier allocated for the TMA store and left unused on every other launch (the
        # non-TMA kernels now compile to run 29's SASS but for the parameters' offsets): the GPU tests again, then the
        # TMA store per layer at M = 1024 / 2048 with two one-tile-per-CTA configs as candidates for the table
    device_name
    timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store or \
      (matches_fp32_reference and 300-4608) or default_dispatch or fused_split or stream_k_leaves" -rf --tb=short 2>&1 \
      | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 \
      --candidates "256,128,3,1,2,False;128,128,4,1,2,False" --out "$out/tma_store" 2>&1 | grep -v Warning \
      | tee "$out/log_tma_store.txt" | tail -4
    ;;
  64e)  # the one-tile-per-CTA config (256 x 128 tiles, two consumers) with the TMA store against the dispatch off the
        # measured grid, on the layers where 64d had it faster at M = 1024 / 2048 (7B o, 7B / 32B gate_up; 32B o)
    device_name
    timeout 330 python3 benchmarks/tma_store.py --models 7b,32b --layers o,gate_up --ms 1152,1408,1536,1792 \
      --candidates "256,128,3,1,2,False" --out "$out/tma_store" 2>&1 | grep -v Warning \
      | tee "$out/log_tma_store.txt" | tail -4
    ;;
  64f)  # H100: the TMA store per layer at M = 1024 / 2048 with the candidate, then 64e's cells, then the GPU tests
    device_name
    timeout 200 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 --candidates "256,128,3,1,2,False" \
      --out "$out/tma_store" 2>&1 | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    timeout 150 python3 benchmarks/tma_store.py --models 7b,32b --layers o,gate_up --ms 1152,1408,1536,1792 \
      --candidates "256,128,3,1,2,False" --out "$out/tma_store_off_grid" 2>&1 | grep -v Warning \
      | tee "$out/log_tma_store_off_grid.txt" | tail -2
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store or \
      default_dispatch or fused_split" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    ;;
  64g)  # the final tables (7B / 32B gate_up's M = 1536 / 2048 keys, 32B gate_up's M = 1024 entry one tile per CTA):
        # GPU tests, then the TMA store per layer at M = 1024 / 2048 (pairs) and on the rollout's "words" for 7B
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store or \
      default_dispatch or keys_between" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 220 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 --out "$out/tma_store" 2>&1 \
      | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    timeout 100 python3 benchmarks/tma_store.py --layout words --models 7b --ms 256,512,1024 \
      --out "$out/tma_store_words" 2>&1 | grep -v Warning | tee "$out/log_tma_store_words.txt" | tail -3
    ;;
  64h)  # a last tile past M by TMA too (Y's descriptor drops its rows past M; shifted tiles and small boxes keep the
        # stores from registers): GPU tests, then per layer at M = 640 / 1000 / 1900 (last tiles past M)
    device_name
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store or \
      default_dispatch" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 640,1000,1900 --out "$out/tma_store" 2>&1 \
      | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    ;;
  64i)  # the TMA store on 128 W rows per consumer too (two copies; the tables' 128 x 256 tiles): its GPU tests on that
        # config, then "pairs" gate_up at M = 128 / 512 / 896 and "words" 7B gate_up / down at M = 1024 / 2048
    device_name
    timeout 80 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store and 128x256" \
      -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 55 python3 benchmarks/tma_store.py --models 7b,14b,32b --layers gate_up --ms 128,512,896 \
      --out "$out/tma_store" 2>&1 | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    timeout 45 python3 benchmarks/tma_store.py --layout words --models 7b --layers gate_up,down --ms 1024,2048 \
      --out "$out/tma_store_words" 2>&1 | grep -v Warning | tee "$out/log_tma_store_words.txt" | tail -2
    ;;
  65a)  # the stream-K kernel's whole tiles stored by TMA from boxes of their own (``_sk_tma_store_tile``): GPU tests,
        # then per layer at M = 1024 the dispatch with / without it and four stream-K configs with it as candidates
        # (pure stream-K and whole waves, 128 x 128, 256 x 128 of 2 stages, 128 x 256)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store or \
      stream_k_leaves or dp_waves" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024 --candidates "$SK_CANDIDATES" \
      --out "$out/tma_store" 2>&1 | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    ;;
  65b)  # whole tiles of the 3-stage 256-row stream-K configs stored through their last chunk's stage of the ring
        # (``_sk_ring_store_tile``): per layer at M = 1024 / 2048 the dispatch with / without the TMA stores and the
        # pure / whole-waves 256 x 128 stream-K configs, each both ways; then the GPU tests of the stream-K stores
    device_name
    timeout 240 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 --both \
      --candidates "256,128,3,1,2,False,None,False,1,False;256,128,3,1,2,False,None,False,1,True" \
      --out "$out/tma_store" 2>&1 | grep -v Warning | tee "$out/log_tma_store.txt" | tail -3
    timeout 320 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "(tma_store and \
      (x1xFalse or x1xTrue)) or stream_k_leaves or dp_waves" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -6 \
      | tee "$out/gpu_tests.txt"
    ;;
  65c)  # the 256 x 128 stream-K configs (stores through the ring) off the measured grid and at M = 4096 on gate_up /
        # 14B down, on the rollout's "words" gate_up at M = 1024 / 2048; then the GPU tests of the stream-K stores,
        # one process per config (compiling in parallel)
    device_name
    timeout 150 python3 benchmarks/tma_store.py --models 7b,14b,32b --layers gate_up --ms 1152,1536,1792,4096 \
      --candidates "$SK_RING" --out "$out/off_grid" 2>&1 | grep -v Warning | tee "$out/log_off_grid.txt" | tail -2
    timeout 60 python3 benchmarks/tma_store.py --models 14b --layers down --ms 1152,1536,1792,4096 \
      --candidates "$SK_RING" --out "$out/off_grid_down" 2>&1 | grep -v Warning | tee "$out/log_off_grid_down.txt" \
      | tail -2
    timeout 80 python3 benchmarks/tma_store.py --layout words --models 7b,14b,32b --layers gate_up --ms 1024,2048 \
      --candidates "$SK_RING" --out "$out/words" 2>&1 | grep -v Warning | tee "$out/log_words.txt" | tail -2
    for c in 128x128x4 256x128x2 128x256x3 "256x128x3 and x1xFalse" "256x128x3 and x1xTrue"; do
      timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "tma_store and \
        (x1xFalse or x1xTrue) and $c" -rf --tb=short > "/tmp/t_${c%% *}_${#c}.txt" 2>&1 &
    done
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "stream_k_leaves or \
      dp_waves or default_dispatch" -rf --tb=short > /tmp/t_rest.txt 2>&1 &
    wait
    for f in /tmp/t_*.txt; do echo "$f: $(grep -v "^  \|Warning" $f | tail -1)"; grep "^FAILED\|^ERROR" $f; done \
      | tee "$out/gpu_tests.txt"
    ;;
  65d)  # the final tables (run 31's stream-K keys): GPU tests of the dispatch, then per layer at M = 1024 / 2048 with
        # the one-tile 256 x 128 config (the gate_up entries before) as a candidate, and gate_up / down at M = 256-896
        # (the earlier stream-K keys on 256 x 128 tiles now store through the ring)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "default_dispatch or \
      keys_between" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 --candidates "256,128,3,1,2,False" \
      --out "$out/final" 2>&1 | grep -v Warning | tee "$out/log_final.txt" | tail -3
    timeout 120 python3 benchmarks/tma_store.py --models 7b,14b,32b --layers gate_up,down --ms 256,512,896 \
      --out "$out/small" 2>&1 | grep -v Warning | tee "$out/log_small.txt" | tail -4
    ;;
  65e)  # H100: gate_up / down at M = 1024 / 2048 on the final tables with the one-tile 256 x 128 config as a candidate
    device_name
    timeout 200 python3 benchmarks/tma_store.py --models 7b,14b,32b --layers gate_up,down --ms 1024,2048 \
      --candidates "256,128,3,1,2,False" --out "$out/h100" 2>&1 | grep -v Warning | tee "$out/log_h100.txt" | tail -3
    ;;
  65f|65g)  # the stream-K stores where the tables reach them below M = 1024: the rollout's "words" forward at M = 100 /
        # 128 (the decode harness's batches 100-128) and 256 / 512, training's "pairs" at M = 256 / 512 (each cell with /
        # without the TMA stores in the same rounds); 65g: the same on an H100
    device_name
    timeout 200 python3 benchmarks/tma_store.py --layout words --models 7b,14b,32b --ms 100,128,256,512 \
      --out "$out/words" 2>&1 | grep -v Warning | tee "$out/log_words.txt" | tail -4
    timeout 120 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 256,512 --out "$out/pairs" 2>&1 \
      | grep -v Warning | tee "$out/log_pairs.txt" | tail -2
    ;;
  65h)  # the decode harness at batches 64 / 100 / 128 with run 31's TMA stores (its gate_up at batch 100-128 runs the
        # "words" stream-K entries of 128 x 128 tiles, which now store from boxes of their own)
    device_name
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm \
      --batches 64,100,128 --new-tokens 128 --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -5 "$out/log_decode.txt"
    ;;
  66a)  # stream-K's split tiles summed by the CTA holding their first chunk (_sk_add_parts) against the previous kernel
        # file (carried: .device/old/qerl/kernels/nvfp4_gemm_ws.py, run 31's) on the same configs: per layer at
        # M = 1024 / 2048 the dispatch's stream-K configs and the 256 x 128 ones (pure / whole waves) as candidates;
        # then the forward's stream-K GPU tests, one process per group of configs (compiling in parallel)
    device_name
    timeout 270 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --ms 1024,2048 \
      --candidates "$SK_RING" --out "$out/pairs" 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | tail -2
    sk_gpu_tests 290
    ;;
  66b)  # where pure stream-K's time goes on the layers of about one 256 x 128 tile per SM at M = 1024 (ws_probe.py: the
        # kernel without the split tiles' parts, without the decode, without the wgmmas; one tile per CTA alongside),
        # then 66a's comparison on the dispatch's stream-K cells below M = 1024 (the rollout's "words" and "pairs")
    device_name
    timeout 230 python3 benchmarks/ws_probe.py --models 7b,14b --layers qkv,o --ms 1024 --fwd-layout pairs --bf16 \
      --variants full,sk_no_fixup,no_dequant,no_compute --configs "bm=256,bn=128,stages=3,consumers=2,stream_k=1,dp_waves=False;\
bm=256,bn=128,stages=3,consumers=2,stream_k=0,dp_waves=False" --out "$out/probe" 2>&1 | grep -v Warning | tee "$out/log_probe.txt"
    timeout 330 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --layout words \
      --ms 8,16,100,128,256,512,1024 --out "$out/words" 2>&1 | grep -v Warning | tee "$out/log_words.txt" | tail -2
    ;;
  66c)  # 66b's stream-K probe taken apart: the summing CTA without its wait, without adding the parts, the parts'
        # stores left out (7B qkv / o, 14B o at M = 1024, pure stream-K on 256 x 128 tiles)
    device_name
    timeout 300 python3 benchmarks/ws_probe.py --models 7b,14b --layers qkv,o --ms 1024 --fwd-layout pairs --bf16 \
      --variants full,sk_no_fixup,sk_no_wait,sk_no_add,sk_no_put \
      --configs "bm=256,bn=128,stages=3,consumers=2,stream_k=1,dp_waves=False" --out "$out/probe" 2>&1 \
      | grep -v Warning | tee "$out/log_probe.txt"
    ;;
  66d)  # the summing CTA's accumulator seeded with the later CTA's part where runs are at least a tile long: 66a's
        # comparison again (M = 1024 / 2048, the 256 x 128 candidates), 66c's probe, then the stream-K GPU tests
    device_name
    timeout 250 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --ms 1024,2048 \
      --candidates "$SK_RING" --out "$out/pairs" 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | tail -2
    timeout 100 python3 benchmarks/ws_probe.py --models 7b,14b --layers qkv,o --ms 1024 --fwd-layout pairs --bf16 \
      --variants full,sk_no_fixup,sk_no_add --configs "bm=256,bn=128,stages=3,consumers=2,stream_k=1,dp_waves=False" \
      --out "$out/probe" 2>&1 | grep -v Warning | tee "$out/log_probe.txt"
    sk_gpu_tests 220
    ;;
  66e)  # the seed loaded into the accumulator's own registers (_sk_seed_part): 66d's comparison and probe, 66b's
        # "words" cells below M = 1024, then the stream-K GPU tests
    device_name
    timeout 200 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --ms 1024,2048 \
      --candidates "$SK_RING" --out "$out/pairs" 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | tail -2
    timeout 60 python3 benchmarks/ws_probe.py --models 7b,14b --layers qkv,o --ms 1024 --fwd-layout pairs --bf16 \
      --variants full,sk_no_fixup,sk_no_add --configs "bm=256,bn=128,stages=3,consumers=2,stream_k=1,dp_waves=False" \
      --out "$out/probe" 2>&1 | grep -v Warning | tee "$out/log_probe.txt"
    timeout 100 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --layout words \
      --ms 8,16,100,128,256,512 --out "$out/words" 2>&1 | grep -v Warning | tee "$out/log_words.txt" | tail -1
    sk_gpu_tests 200
    ;;
  66f)  # the parts stored in the accumulator registers' order (a warp's access on two lines, not eight): 66e's
        # comparisons on "pairs" at M = 1024 / 2048 and on "words" below, then the stream-K GPU tests
    device_name
    timeout 200 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --ms 1024,2048 \
      --candidates "$SK_RING" --out "$out/pairs" 2>&1 | grep -v Warning | tee "$out/log_pairs.txt" | tail -2
    timeout 100 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --layout words \
      --ms 8,16,100,128,256,512 --out "$out/words" 2>&1 | grep -v Warning | tee "$out/log_words.txt" | tail -1
    sk_gpu_tests 190
    ;;
  66g)  # the final tables (run 32's stream-K keys: 7B qkv / down, 14B / 32B qkv / o at M = 1024, 7B o at 2048): GPU
        # tests of the dispatch, then per layer at M = 1024 / 2048 the dispatch against BF16 (with / without TMA stores)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "default_dispatch or \
      keys_between" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    timeout 230 python3 benchmarks/tma_store.py --models 7b,14b,32b --ms 1024,2048 --out "$out/final" 2>&1 \
      | grep -v Warning | tee "$out/log_final.txt" | tail -3
    ;;
  66h)  # H100: the layers of run 32's keys (qkv / o / down) at M = 1024 / 2048 on the final tables
    device_name
    timeout 220 python3 benchmarks/tma_store.py --models 7b,14b,32b --layers qkv,o,down --ms 1024,2048 \
      --out "$out/h100" 2>&1 | grep -v Warning | tee "$out/log_h100.txt" | tail -3
    ;;
  66i)  # the decode harness at batches 64 / 100 / 128 on run 32's code (its gate_up at batch 100-128 runs the "words"
        # stream-K entries of 128 x 128 tiles, whose split tiles are now summed by the CTA holding their first chunk)
    device_name
    timeout 230 python3 benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm \
      --batches 64,100,128 --new-tokens 128 --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -5 "$out/log_decode.txt"
    ;;
  66j)  # the seeded sum's own GPU test (runs a tile long: 7B qkv's and 14B o's shapes at M = 1024, 64 x 64 tiles)
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "seeded_sum" -rf \
      --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    ;;
  67a)  # run 32's sum of a split tile ported to the input gradient's stream-K kernel: sk_fixup.py --grad-input at M =
        # 1024 / 2048 (the dispatch's stream-K configs, pure stream-K on 256-row tiles of 4 / 5 stages; each on this
        # kernel file and run 32's), then the input gradient's stream-K GPU tests
    device_name
    timeout 280 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --grad-input \
      --ms 1024,2048 --candidates "256,4,1,None,False,1,2;256,5,1,None,False,1,2" --out "$out/bwd" 2>&1 \
      | grep -v Warning | tee "$out/log_bwd.txt" | tail -2
    sk_bwd_gpu_tests 240
    ;;
  67b)  # 67a's picks as TUNED_BWD keys (pure stream-K: 14B / 32B o at M = 1024 / 2048, 7B qkv / o at 2048): the input
        # gradient against run 32's tables at M = 832-2048 (routes.py --verify), then the dispatch's GPU tests
    device_name
    timeout 300 python3 benchmarks/routes.py --verify --dirs bwd --models 7b,14b --layers qkv,o \
      --previous-tables benchmarks/results/run33_2026-11-28/previous_tables.json \
      --ms 832,896,960,1024,1152,1280,1536,1792,2048 --out "$out/verify_bwd" 2>&1 | grep -v Warning \
      | tee "$out/log_verify.txt" | tail -2
    t="timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
    $t -k "default_dispatch or keys_between" > /tmp/d_dispatch.txt 2>&1 &
    $t -k "module_backward or rows_layout_default" > /tmp/d_module.txt 2>&1 &
    wait
    for f in /tmp/d_*.txt; do echo "$f: $(grep -v "^  \|Warning" $f | tail -1)"; grep "^FAILED\|^ERROR" $f; done \
      | tee "$out/gpu_tests.txt"
    ;;
  67c)  # M = 1025-1152 of 7B qkv / o and 14B / 32B o's input gradient back on the slab path (SLAB_RANGES, FINE_MS
        # 1152): the input gradient against run 32's tables at M = 1088-1216 there, then every layer at M = 1024 / 2048
        # (the final tables), then the dispatch's GPU tests
    device_name
    v="python3 benchmarks/routes.py --verify --dirs bwd --previous-tables \
      benchmarks/results/run33_2026-11-28/previous_tables.json"
    timeout 120 $v --models 7b,14b --layers qkv,o --ms 1088,1152,1216 --out "$out/between" 2>&1 | grep -v Warning \
      | tee "$out/log_between.txt" | tail -1
    timeout 200 $v --ms 1024,2048 --out "$out/final" 2>&1 | grep -v Warning | tee "$out/log_final.txt" | tail -1
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "default_dispatch or \
      keys_between" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -4 | tee "$out/gpu_tests.txt"
    ;;
  67d)  # the input gradient's other stream-K cells (the dispatch's, M = 256-768 and 4096: shorter runs, tiles split
        # among several CTAs; 32B gate_up / down's M = 4096 keys): this kernel file against run 32's, as 67a
    device_name
    timeout 400 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --grad-input \
      --ms 256,384,512,640,768,4096 --out "$out/bwd_other" 2>&1 | grep -v Warning | tee "$out/log_bwd_other.txt" \
      | tail -2
    ;;
  67e)  # the issue's benchmark on the final code: gemm_nvfp4.py (no Marlin) on the 7B / 32B layers at the issue's M grid,
        # forward and input gradient; then 7B qkv's forward at M = 1024 on other pure stream-K tiles (sk_fixup.py)
    device_name
    timeout 480 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -14 "$out/log_gemm.txt"
    timeout 90 python3 benchmarks/sk_fixup.py --previous .device/old/qerl/kernels/nvfp4_gemm_ws.py --models 7b \
      --layers qkv --ms 1024 --candidates "128,128,4,1,2,False,None,False,1,False;\
128,256,3,1,2,False,None,False,1,False;128,128,4,1,2,False,None,False,1,True" --out "$out/qkv" 2>&1 \
      | grep -v Warning | tee "$out/log_qkv.txt" | tail -2
    ;;
  67f)  # the issue's benchmark with the default dispatch beside the Triton tile kernels (gemm_nvfp4.py's new columns:
        # "pairs" both directions, "words" forward), 7B / 32B layers at the issue's M grid
    device_name
    timeout 540 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -18 "$out/log_gemm.txt"
    ;;
  67g)  # 67f again with every cell's variants timed in the same rounds (gemm_nvfp4.py now times BF16, the Triton
        # kernels and the dispatch on both layouts by interleaved_us, as the other benchmarks since run 25)
    device_name
    timeout 540 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -18 "$out/log_gemm.txt"
    ;;
  67h)  # 67g's 7B qkv / down forward at M = 1024 read 0.85x / 0.86x of BF16 where run 32's tma_store.py read 0.90x /
        # 0.93x (BF16 185 us here against 219 us there on down): both harnesses on those cells, in turn, twice
    device_name
    for i in 1 2; do
      timeout 100 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b --layers qkv,down --ms 1024 --dirs fwd \
        --out "$out/gemm$i" 2>&1 | grep -v Warning | grep "M= 1024" | tee -a "$out/log.txt"
      timeout 100 python3 benchmarks/tma_store.py --models 7b --layers qkv,down --ms 1024 --out "$out/tma$i" 2>&1 \
        | grep -v Warning | grep "M= *1024" | tee -a "$out/log.txt"
    done
    ;;
  67i)  # the two harnesses' short passes differ in the clock the GPU holds (67h): every 7B / 32B layer at M = 1024 /
        # 4096 under sustained load (sustained.py: each variant replayed back to back at the power limit), both
        # directions, the training layout, on the final tables
    device_name
    timeout 330 python3 benchmarks/sustained.py --cells "" --models 7b,32b --ms 1024,4096 --dirs fwd,bwd \
      --layout pairs --seconds 1.0 --out "$out/sustained" 2>&1 | grep -v Warning | tee "$out/log.txt" | tail -4
    ;;
  67j)  # 67i's cells below 0.9x under sustained load against their routes before (QERL_TUNED_CONFIGS with
        # benchmarks/results/run33_2026-11-28/alt_configs.json: 7B down's forward at M = 1024 on one tile per CTA (run
        # 31's entry), 32B gate_up's forward and 32B down's input gradient at M = 4096 on the slab path), in turn, twice
    device_name
    cells="7b:down:1024,32b:gate_up:4096,32b:down:4096:bwd"
    for i in 1 2; do
      timeout 60 python3 benchmarks/sustained.py --cells "$cells" --layout pairs --seconds 1.0 --out "$out/shipped$i" \
        2>&1 | grep -v Warning | grep "nvfp4" | tee -a "$out/log.txt"
      QERL_TUNED_CONFIGS=benchmarks/results/run33_2026-11-28/alt_configs.json timeout 60 python3 \
        benchmarks/sustained.py --cells "$cells" --layout pairs --seconds 1.0 --out "$out/before$i" 2>&1 \
        | grep -v Warning | grep "nvfp4" | tee -a "$out/log.txt"
    done
    ;;
  67k)  # the three routes 67j measured faster under sustained load, as shipped now: those cells against BF16 under
        # sustained load, then the dispatch's GPU tests
    device_name
    timeout 90 python3 benchmarks/sustained.py --cells "7b:down:1024,32b:gate_up:4096,32b:down:4096:bwd" \
      --layout pairs --seconds 1.0 --out "$out/sustained" 2>&1 | grep -v Warning | grep "MHz" | tee "$out/log.txt"
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -k "default_dispatch or \
      keys_between" -rf --tb=short 2>&1 | grep -v "^  \|Warning" | tail -3 | tee "$out/gpu_tests.txt"
    ;;
  67l)  # two of this run's new input-gradient stream-K entries (32B o at M = 1024, 7B qkv at 2048) under sustained
        # load against their routes before (alt_bwd_configs.json: the slab path), once each
    device_name
    cells="32b:o:1024:bwd,7b:qkv:2048:bwd"
    timeout 70 python3 benchmarks/sustained.py --cells "$cells" --layout pairs --seconds 1.0 --out "$out/shipped" 2>&1 \
      | grep -v Warning | grep "MHz" | tee -a "$out/log.txt"
    QERL_TUNED_CONFIGS=benchmarks/results/run33_2026-11-28/alt_bwd_configs.json timeout 70 python3 \
      benchmarks/sustained.py --cells "$cells" --layout pairs --seconds 1.0 --out "$out/before" 2>&1 \
      | grep -v Warning | grep "MHz" | tee -a "$out/log.txt"
    ;;
  68a)  # run 34: stream-K with one consumer's chunks in flight (WsConfig.in_flight with stream_k): its GPU tests, then
        # the rollout forward's ("words") search of those tiles (gemm_ws.py --tile-set sk_in_flight) on the 7B / 32B
        # layers at M = 64 / 128
    device_name
    t="timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
    $t -k "stream_k_in_flight" > /tmp/t_inflight.txt 2>&1 &
    $t -k "matches_fp32_reference and (Truex128xFalsex2 or Truex96xFalsex2 or TruexNonexFalsex1 or Truex168xFalsex1)" \
      > /tmp/t_fp32.txt 2>&1 &
    wait
    gpu_test_summary t
    timeout 330 python3 benchmarks/gemm_ws.py --dirs fwd --tile-set sk_in_flight --ms 64,128 --layouts words \
      --shipped-layout words --models 7b,32b --out "$out/search_64_128" 2>&1 | grep -v Warning \
      | tee "$out/log_search.txt" | tail -3
    ;;
  68b)  # 68a's search at M = 1 / 8 / 16 / 32
    device_name
    timeout 540 python3 benchmarks/gemm_ws.py --dirs fwd --tile-set sk_in_flight --ms 1,8,16,32 --layouts words \
      --shipped-layout words --models 7b,32b --out "$out/search_1_32" 2>&1 | grep -v Warning \
      | tee "$out/log_search.txt" | tail -3
    ;;
  68c)  # the in-flight stream-K entries taken from 68a / 68b (TUNED_WORDS; the epilogues that need whole tiles keep the
        # entries before, WHOLE_TILE_WORDS): the dispatch's and the epilogues' GPU tests, then the rollout forward
        # against the tables before (routes.py --verify --layout words) on 7B / 32B qkv and o at M = 1-128
    device_name
    entries_tests_then_verify benchmarks/results/run34_2026-11-28/previous_tables.json 7b,32b qkv,o \
      1,4,8,12,16,24,32,48,64,112,128
    ;;
  68d)  # the issue's benchmark on the final tables (68c's less 7B qkv's M = 64 entry, which ran 0.97x at M = 48):
        # gemm_nvfp4.py (no Marlin) on the 7B / 32B layers' forward at M = 1-128
    device_name
    timeout 400 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128 --dirs fwd \
      --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -8 "$out/log_gemm.txt"
    ;;
  68e)  # what bounds the rollout forward at M = 128 (in-flight stream-K spread 7B qkv's chunks over 131 SMs instead of 72
        # and gained 4%): ws_probe.py on the one-tile configs of 7B / 32B qkv and o (7B qkv's entry before run 34)
    device_name
    timeout 420 python3 benchmarks/ws_probe.py --models 7b,32b --layers qkv,o --ms 128 --bf16 --configs "stream_k=0" \
      --variants full,no_compute,no_x,no_dequant,empty --out "$out/probe_128" 2>&1 | grep -v Warning \
      | tee "$out/log_probe.txt" | tail -3
    ;;
  68f)  # the forward's GPU tests broadly on the final code (_mma_step's release rule changed for every forward kernel):
        # the fp32 reference on every config, the layouts' bits, the stores and boxes past M, stream-K and the dispatch
    device_name
    t="timeout 500 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
    $t -k "matches_fp32_reference and not input_gradient" > /tmp/t_fp32.txt 2>&1 &
    $t -k "words_layout_gives or tma_store or last_tile_shift_matches_the_tile or rows_past_m or small_boxes or \
      boxes_reaching" > /tmp/t_bits.txt 2>&1 &
    $t -k "stream_k or dp_waves or default_dispatch or fused_split or module_backward" > /tmp/t_sk.txt 2>&1 &
    wait
    gpu_test_summary t
    ;;
  68g)  # 68f's third group, which ran out of time in one process, in four: the layouts' bits, the TMA stores, the last
        # tile shifted and rows past M, the boxes reaching past M
    device_name
    t="timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short"
    $t -k "words_layout_gives" > /tmp/t_words.txt 2>&1 &
    $t -k "tma_store" > /tmp/t_tma.txt 2>&1 &
    $t -k "last_tile_shift_matches_the_tile or rows_past_m" > /tmp/t_shift.txt 2>&1 &
    $t -k "small_boxes or boxes_reaching" > /tmp/t_boxes.txt 2>&1 &
    wait
    gpu_test_summary t
    ;;
  69a)  # run 35: W's bytes asked of L2 ahead of the ring's copies (WsConfig.prefetch): its GPU tests, then the rollout
        # forward's ("words") search of prefetch distances on the table's configs (gemm_ws.py --tile-set prefetch),
        # 7B / 32B layers at M = 64 / 128
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short \
      -k "l2_prefetch" > /tmp/t_prefetch.txt 2>&1 &
    warm_then_search 420 7b,32b qkv,o,gate_up,down search_64_128 --dirs fwd --tile-set prefetch --ms 64,128 \
      --layouts words --shipped-layout words
    wait
    gpu_test_summary t
    ;;
  69b)  # 69a's prefetches ran slower at every distance: now a CTA's whole run asked of L2 once its ring's first copies
        # are issued (WsConfig.prefetch = -1, one bulk prefetch per W row): the GPU tests, then the search at M = 1 /
        # 16 / 64 / 128 / 1024
    device_name
    timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_ws_gpu.py -rf --tb=short \
      -k "l2_prefetch" > /tmp/t_prefetch.txt 2>&1 &
    warm_then_search 400 7b,32b qkv,o,gate_up,down search_run --dirs fwd --tile-set prefetch --ms 1,16,64,128,1024 \
      --layouts words --shipped-layout words
    wait
    gpu_test_summary t
    ;;
  # 69c-69d: the prefetches left out (the kernels as 6eeeb33's): the decode harness and the issue's benchmark re-timed
  # on the final tables.
  69c)  # the decode harness (7B shape, "words", SiLU x up / RMSNorm / RoPE epilogues, CUDA graphs) at batches 1 / 8 /
        # 64, 256 new tokens, three passes each
    device_name
    timeout 540 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      --fused-norm --rope-epilogue --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -6 "$out/log_decode.txt"
    ;;
  69d)  # the issue's benchmark on the final tables: 7B / 32B layers, forward and input gradient, its M grid
    device_name
    timeout 560 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -18 "$out/log_gemm.txt"
    ;;
  69e)  # vLLM's bundle, parts 1-5 of 6 (.device/vllm6/p1..p5, one per call)
    vllm_parts .device/vllm6 6
    ;;
  69f)  # part 6 (the bundle unpacked); vLLM's Marlin against the rollout dispatch ("words"), every 7B / 14B / 32B
        # layer at M = 1-128, in the same run
    vllm_parts .device/vllm6 6
    device_name
    marlin_vs_dispatch /tmp/q69f
    ;;
  69h)  # the forward's default tiles (TILES, with their stream-K variants, pure and with whole waves) searched again on
        # the current kernel, "words", 7B / 32B qkv and o at M = 64 / 128 (last searched so in run 11)
    device_name
    warm_shards_then_search 280 14 search_narrow --models 7b,32b --layers qkv,o --ms 64,128 --dirs fwd \
      --layouts words --shipped-layout words --stream-k --dp-waves
    ;;
  69i)  # 69h on 7B / 32B gate_up and down at M = 64 / 128, and on every 7B / 32B layer at M = 32
    device_name
    warm_shards_then_search 280 14 search_wide --models 7b,32b --layers gate_up,down --ms 64,128 --dirs fwd \
      --layouts words --shipped-layout words --stream-k --dp-waves
    warm_shards_then_search 250 14 search_32 --models 7b,32b --ms 32 --dirs fwd \
      --layouts words --shipped-layout words --stream-k --dp-waves
    ;;
  69j)  # three stream-K entries from 69i (7B gate_up M = 64, 32B gate_up M = 64 / 128; the whole-tile epilogues keep
        # the entries before, WHOLE_TILE_WORDS): the dispatch's and the epilogues' GPU tests, then the rollout forward
        # against the tables before (routes.py --verify --layout words) on 7B / 32B gate_up at M = 33-128
    device_name
    entries_tests_then_verify benchmarks/results/run35_2026-11-28/previous_tables.json 7b,32b gate_up \
      33,40,48,56,64,72,80,96,112,128
    ;;
  69k)  # each "words" table entry as it is and on stream-K (gemm_ws.py --tile-set table --stream-k --dp-waves), every
        # 7B / 14B / 32B layer at M = 16 / 32 / 64 / 128
    device_name
    warm_shards_then_search 300 14 search_table_sk --models 7b,14b,32b --ms 16,32,64,128 --dirs fwd --tile-set table \
      --layouts words --shipped-layout words --stream-k --dp-waves
    ;;
  69l)  # 14B gate_up's M = 64 / 128 entries on stream-K as 32B's (69k's single pass could not tell them apart): the
        # rollout forward against the tables before, 14B gate_up at M = 33-128, and the dispatch's GPU tests
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short tests/test_kernels_ws_gpu.py \
      -k "default_dispatch or swiglu_dispatch or swiglu_after" > /tmp/t_dispatch.txt 2>&1
    gpu_test_summary t
    timeout 300 python3 benchmarks/routes.py --verify --layout words --dirs fwd --models 14b --layers gate_up \
      --previous-tables benchmarks/results/run35_2026-11-28/previous_tables.json \
      --ms 33,40,48,56,64,72,80,96,112,128 --out "$out/verify_words" 2>&1 | grep -v Warning \
      | tee "$out/log_verify.txt" | tail -2
    ;;
  69n)  # the final code's GPU tests around the decode step and the rollout backend (the epilogues' choice of config
        # changed for stream-K entries): fused QKV / RoPE, decode attention, SiLU x up, the transformers backend, the
        # epilogues on the warp-specialized kernel
    device_name
    rm -f /tmp/t_*.txt
    t="timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short"
    $t tests/test_fused_qkv.py tests/test_decode_attention.py tests/test_swiglu.py > /tmp/t_decode.txt 2>&1 &
    $t tests/test_rollout_hf.py > /tmp/t_rollout.txt 2>&1 &
    $t tests/test_kernels_ws_gpu.py -k "swiglu or add_norm or rope or row_norm" > /tmp/t_epilogues.txt 2>&1 &
    wait
    gpu_test_summary t
    ;;
  69o)  # gemm_ws.py's warm-up after a refactor (the cell's candidates and weights built once): warm shards and a timed
        # search, both directions, on one small shape
    device_name
    warm_shards_then_search 120 2 search_smoke --models 7b --layers o --ms 16,64 --dirs fwd,bwd --layouts words,pairs \
      --shipped-layout words --tile-set table --stream-k
    grep -c "warm-up" /tmp/warm_*.txt
    ;;
  69m)  # the final tables (69l's 14B entries back as before): the issue's benchmark on the 7B / 32B layers' forward at M =
        # 1 / 4 / 16 / 64 / 128
    device_name
    timeout 400 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,4,16,64,128 --dirs fwd \
      --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -8 "$out/log_gemm.txt"
    ;;
  69g)  # (vLLM unpacked) the issue's benchmark with vLLM's Marlin in the same run: 7B / 32B layers, forward, its M grid
    vllm_parts .device/vllm6 6
    device_name
    timeout 560 python3 benchmarks/gemm_nvfp4.py --models 7b,32b --ms 1,4,16,64,128,256,1024,4096 --dirs fwd \
      --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -12 "$out/log_gemm.txt"
    ;;
  70a)  # run 36: programmatic dependent launch of the forward kernels (W's first copies before griddepcontrol.wait):
        # its GPU tests and the dispatch / split / stream-K / epilogue tests (now launched with it), then the issue's
        # benchmark with and without it in the same run (7B / 32B forward, M = 1-128)
    device_name
    gpu_tests_parallel 300 "pdl:tests/test_kernels_pdl_gpu.py" \
      "epilogues:tests/test_fused_norm.py tests/test_fused_qkv.py tests/test_swiglu.py" \
      "ws:tests/test_kernels_ws_gpu.py -k 'default_dispatch or fused_split or stream_k or dp_waves'" \
      "fp32:tests/test_kernels_ws_gpu.py -k 'matches_fp32_reference and not input_gradient'"
    timeout 300 python3 benchmarks/gemm_nvfp4.py --no-marlin --pdl-compare --models 7b,32b --ms 1,4,16,64,128 \
      --dirs fwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -8 "$out/log_gemm.txt"
    ;;
  70b)  # the decode harness (as 69c) with the NVFP4 model also captured without PDL, batches 1 / 8 / 64
    device_name
    timeout 560 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      --fused-norm --rope-epilogue --pdl-compare --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -9 "$out/log_decode.txt"
    ;;
  70c)  # where a launch lets the next one in: at its start (70a's) against after its chunks ("tail"), and without
        # PDL, in the same run; the GPU chain tests on the tail trigger
    device_name
    gpu_tests_parallel 200 "pdl_tail:tests/test_kernels_pdl_gpu.py -k tail" "norm_pdl:tests/test_fused_norm.py -k pdl"
    timeout 330 python3 benchmarks/gemm_nvfp4.py --no-marlin --pdl-compare --models 7b,32b --ms 1,4,16,64,128 \
      --dirs fwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -8 "$out/log_gemm.txt"
    ;;
  70d)  # PDL kept at the launch's start (70c), not for splits summed by the second kernel nor stream-K with whole
        # waves, and now in the decode attention's two kernels: GPU tests, the issue's benchmark with and without it
        # (7B / 32B forward, M = 1-128), the decode harness with and without it
    device_name
    gpu_tests_parallel 240 "pdl:tests/test_kernels_pdl_gpu.py tests/test_decode_attention.py" \
      "epilogues:tests/test_fused_norm.py tests/test_fused_qkv.py tests/test_swiglu.py" \
      "ws:tests/test_kernels_ws_gpu.py -k 'default_dispatch or fused_split or stream_k or dp_waves'"
    timeout 200 python3 benchmarks/gemm_nvfp4.py --no-marlin --pdl-compare --models 7b,32b --ms 1,4,16,64,128 \
      --dirs fwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -7 "$out/log_gemm.txt"
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      --fused-norm --rope-epilogue --pdl-compare --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -9 "$out/log_decode.txt"
    ;;
  70e)  # PDL in the Triton kernels between the projections too (add + RMSNorm, SiLU x up): GPU tests, the decode
        # harness with and without it
    device_name
    gpu_tests_parallel 240 "pdl:tests/test_kernels_pdl_gpu.py tests/test_decode_attention.py tests/test_swiglu.py" \
      "norm:tests/test_fused_norm.py tests/test_fused_qkv.py" \
      "epilogues:tests/test_kernels_ws_gpu.py -k 'swiglu or add_norm or row_norm'" "rollout:tests/test_rollout_hf.py"
    timeout 200 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      --fused-norm --rope-epilogue --pdl-compare --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -9 "$out/log_decode.txt"
    ;;
  70f)  # PDL next to a kernel without it (a copy into X before each projection) against the chain of projections,
        # 7B / 32B at M = 1 / 8 / 64; the issue's benchmark with and without PDL at M = 256 / 1024 / 4096
    device_name
    timeout 200 python3 benchmarks/pdl_neighbours.py --models 7b,32b --ms 1,8,64 --out "$out/neighbours" 2>&1 \
      | grep -v Warning > "$out/log_neighbours.txt"
    tail -6 "$out/log_neighbours.txt"
    timeout 200 python3 benchmarks/gemm_nvfp4.py --no-marlin --pdl-compare --models 7b,32b --ms 256,1024,4096 \
      --dirs fwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -5 "$out/log_gemm.txt"
    ;;
  70g)  # PDL off by default (70f: a launch with it after one without costs time), on for the decode harness's NVFP4
        # model (--pdl): GPU tests, the decode harness with and without it, the issue's benchmark with the PDL column
    device_name
    gpu_tests_parallel 200 "pdl:tests/test_kernels_pdl_gpu.py tests/test_decode_attention.py tests/test_swiglu.py" \
      "norm:tests/test_fused_norm.py tests/test_fused_qkv.py tests/test_rollout_hf.py" \
      "ws:tests/test_kernels_ws_gpu.py -k 'default_dispatch or fused_split or stream_k or swiglu'"
    timeout 150 python3 benchmarks/decode_nvfp4.py --compile --layout words --repeats 3 --swiglu-epilogue \
      --fused-norm --rope-epilogue --pdl --pdl-compare --out "$out/decode" 2>&1 | grep -v Warning > "$out/log_decode.txt"
    tail -9 "$out/log_decode.txt"
    timeout 150 python3 benchmarks/gemm_nvfp4.py --no-marlin --pdl-compare --models 7b,32b --ms 1,4,16,64,128 \
      --dirs fwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -30 > "$out/log_gemm.txt"
    tail -7 "$out/log_gemm.txt"
    ;;
  71a)  # the bias and the adapter's expand in the warp-specialized forward's epilogue (new): its GPU tests, the
        # dispatch's, the rollout backend's and run 36's PDL tests (not run on a GPU since their last commits); then
        # benchmarks/lora_epilogue.py (the epilogue against the expand after the product, same rounds)
    device_name
    gpu_tests_parallel 280 "lw:tests/test_kernels_ws_gpu.py -k 'bias_and_adapter_expand and words'" \
      "lp:tests/test_kernels_ws_gpu.py -k 'bias_and_adapter_expand and pairs'" \
      "ld:tests/test_kernels_ws_gpu.py -k 'puts_bias_and_adapter or refusals or adapter_expand_after or small_m'" \
      "step:tests/test_rollout_hf.py tests/test_decode_step.py" "kg:tests/test_kernels_gpu.py -k 'lora or bias'" \
      "pdl:tests/test_kernels_pdl_gpu.py tests/test_fused_norm.py tests/test_pdl.py tests/test_decode_attention.py"
    timeout 290 python3 benchmarks/lora_epilogue.py --models 7b,32b --ms 1,8,16,64 --ranks 32 \
      --out "$out/lora_epilogue" 2>&1 | grep -v Warning > "$out/log_lora_epilogue.txt"
    tail -10 "$out/log_lora_epilogue.txt"
    ;;
  71c)  # 71a's tests and benchmark on the second version: B's rows and u copied asynchronously (cp.async) before the
        # chunk loop (71a loaded them into registers there: up to 6 us slower on 32B gate_up at M = 64), u read after
        # the loop on 64-row tiles; only configs that already hand each tile whole to one CTA (splits summed by the
        # last CTA up to M = 16), where the operands leave the CTAs per SM as they are
    device_name
    gpu_tests_parallel 280 "lw:tests/test_kernels_ws_gpu.py -k 'bias_and_adapter_expand and words'" \
      "lp:tests/test_kernels_ws_gpu.py -k 'bias_and_adapter_expand and pairs'" \
      "ld:tests/test_kernels_ws_gpu.py -k 'puts_bias_and_adapter or refusals or adapter_expand_after or small_m'" \
      "step:tests/test_rollout_hf.py tests/test_decode_step.py" "kg:tests/test_kernels_gpu.py -k 'lora or bias'"
    timeout 290 python3 benchmarks/lora_epilogue.py --models 7b,32b --ms 1,8,16,64 --ranks 32 \
      --out "$out/lora_epilogue" 2>&1 | grep -v Warning > "$out/log_lora_epilogue.txt"
    tail -10 "$out/log_lora_epilogue.txt"
    ;;
  71b)  # whole rollouts of the transformers backend with a rank-32 adapter: NVFP4 with the expand in the epilogue and
        # after the product (nvfp4_after), BF16, in the same passes, batch 8 and 64
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --modes fused \
      --ws-lora-epilogue-compare --out "$out/rollout" 2>&1 | grep -v Warning > "$out/log_rollout.txt"
    tail -8 "$out/log_rollout.txt"
    ;;
  # Run 38: vLLM's engine re-timed on this project's kernels (the adapter's expand in the warp-specialized forward's
  # epilogue since run 37) against Marlin and BF16; the bundle travels in six parts, one a call (vllm_parts).
  72a)  # part 1; the 7B checkpoint (random NVFP4, kept under /tmp/qb while the machine stays warm); ws_probe on two
        # consumers sharing X (128 rows of W a CTA) against the shipped configs, 7B qkv at M = 64 / 128
    vllm_parts .device/vllm6 6
    device_name
    timeout 200 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    timeout 240 python3 benchmarks/ws_probe.py --models 7b --layers qkv --ms 64,128 \
      --variants full,no_compute,no_x,no_dequant \
      --configs ";bn=128,consumers=2,in_flight=False,maxnreg=None,stages=4,split_k=1,stream_k=1;bn=128,consumers=2,in_flight=False,maxnreg=None,stages=4,split_k=1,stream_k=0" \
      --out "$out/probe" 2>&1 | grep -v Warning > "$out/log_probe.txt"
    tail -40 "$out/log_probe.txt"
    ;;
  72b)  # part 2; the 14B checkpoint; the switch QERL_WS_LORA_EPILOGUE's GPU test with the dispatch's
    vllm_parts .device/vllm6 6
    timeout 300 python3 benchmarks/rollout_vllm.py checkpoint --shape 14b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    gpu_tests_parallel 200 "ld:tests/test_kernels_ws_gpu.py -k 'puts_bias_and_adapter or refusals or adapter_expand_after'"
    ;;
  72c|72d|72e)  # parts 3-5
    vllm_parts .device/vllm6 6
    ls /tmp/vllm_chunks
    ;;
  72f)  # part 6 (the bundle unpacked); 7B rollouts on this project's kernels ("words", the expand in the epilogue),
        # without an adapter and with rank 16, batch 1 / 8 / 32 / 64
    vllm_parts .device/vllm6 6
    device_name
    timeout 500 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4 --ranks 0,16 \
      --batches 1,8,32,64 --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_7b_qerl.json" 2>&1 \
      | grep -v Warning > "$out/log_7b_qerl.txt"
    tail -25 "$out/log_7b_qerl.txt"
    ;;
  72g)  # the same on Marlin and on BF16
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 0,16 \
      --batches 1,8,32,64 --fp4-kernel marlin --workdir /tmp/qb --json "$out/rollout_7b_marlin_bf16.json" 2>&1 \
      | grep -v Warning > "$out/log_7b_marlin_bf16.txt"
    tail -40 "$out/log_7b_marlin_bf16.txt"
    ;;
  72h)  # 7B rank 16 on this project's kernels with the expand after the product (QERL_WS_LORA_EPILOGUE=0); 14B rank
        # 32 on this project's kernels and on Marlin
    vllm_env
    QERL_WS_LORA_EPILOGUE=0 timeout 150 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4 \
      --ranks 16 --batches 1,8,32,64 --fp4-kernel qerl --workdir /tmp/qb --json "$out/rollout_7b_qerl_after.json" \
      2>&1 | grep -v Warning > "$out/log_7b_qerl_after.txt"
    tail -12 "$out/log_7b_qerl_after.txt"
    for k in qerl marlin; do
      timeout 200 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 32 \
        --batches 1,8,32,64 --fp4-kernel $k --workdir /tmp/qb --json "$out/rollout_14b_$k.json" 2>&1 \
        | grep -v Warning > "$out/log_14b_$k.txt"
      tail -12 "$out/log_14b_$k.txt"
    done
    ;;
  72i)  # 14B rank 32 on BF16
    vllm_env
    timeout 300 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 32 \
      --batches 1,8,32,64 --workdir /tmp/qb --json "$out/rollout_14b_bf16.json" 2>&1 | grep -v Warning \
      > "$out/log_14b_bf16.txt"
    tail -12 "$out/log_14b_bf16.txt"
    ;;
  72j)  # splits summed by the last CTA at M = 64 / 128 (never searched above M = 16): two consumers sharing X split
        # 2-6 ways (both sums) and the in-flight 64-row tile, against the table's config in the same pass, "words"
    device_name
    warm_shards_then_search 100 14 split_sum --models 7b,32b --layers qkv,o --ms 64,128 --dirs fwd \
      --layouts words --shipped-layout words --tile-set split_sum
    ;;
  # Run 39: 32B and 3B rollouts on this project's kernels against Marlin and BF16 (rank 32, the configs' rank), the
  # 32B single-GPU RL step on them. 73a-73f carry the vLLM bundle's six parts; the checkpoints are written meanwhile.
  73a)  # part 1; the random 32B NVFP4 checkpoint (kept under /tmp/qb while the machine stays warm)
    vllm_parts .device/vllm6 6
    device_name
    timeout 330 python3 benchmarks/rollout_vllm.py checkpoint --shape 32b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    ;;
  73b)  # part 2; the 3B checkpoint; the 3B layers' rollout forward ("words" dispatch) against cuBLAS at M = 1-128
    vllm_parts .device/vllm6 6
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 3b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    timeout 240 python3 benchmarks/gemm_ws.py --dispatch-only --shipped-layout words --models 3b \
      --ms 1,8,16,32,64,128 --dirs fwd --out "$out/dispatch_3b" 2>&1 | grep -v Warning > "$out/log_dispatch_3b.txt"
    tail -30 "$out/log_dispatch_3b.txt"
    ;;
  73c|73d|73e)  # parts 3-5
    vllm_parts .device/vllm6 6
    ls /tmp/vllm_chunks
    ;;
  73f)  # part 6 (the bundle unpacked); 32B rank 32 on this project's kernels, batch 1 / 8 / 32 / 64
    vllm_parts .device/vllm6 6
    rollout_point 32b nvfp4 qerl 480 0.9
    ;;
  73g)  # 32B rank 32 on Marlin
    vllm_env
    rollout_point 32b nvfp4 marlin 560 0.9
    ;;
  73h)  # 32B rank 32 on BF16
    vllm_env
    rollout_point 32b bf16 marlin 560 0.9
    ;;
  73i)  # one RL step on the 32B shape with the engine on this project's kernels: rank 32, 16 x 256 completion tokens,
        # sleep mode, 0.2 of the H200 for the engine (what the configs' 0.35 gives it on an 80 GB card), as run 3's 5h
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rl-step --shape 32b --rank 32 --batch 16 --prompt-len 256 \
      --gen-len 256 --steps 2 --gpu-memory-utilization 0.2 --sleep-mode --fp4-kernel qerl --workdir /tmp/qb \
      --json "$out/rl_step_32b_sleep_qerl.json" 2>&1 | grep "\[bench\]\|Error\|error" | tail -12
    ;;
  73j)  # 3B rank 32 on this project's kernels and on Marlin; then the 3B layers' forward on both and on cuBLAS
    vllm_env
    rollout_point 3b nvfp4 qerl 200 0.85
    rollout_point 3b nvfp4 marlin 200 0.85
    timeout 150 python3 benchmarks/gemm_ws.py --dispatch-only --shipped-layout words --marlin --models 3b \
      --ms 1,8,16,32,64,128 --dirs fwd --out "$out/marlin_3b" 2>&1 | grep -v Warning > "$out/log_marlin_3b.txt"
    tail -30 "$out/log_marlin_3b.txt"
    ;;
  73k)  # 3B rank 32 on BF16
    vllm_env
    rollout_point 3b bf16 marlin 200 0.85
    ;;
  # Run 40: launch-table entries for the 3B shapes ("words", M = 1-128; none before: default_words_config), checked
  # against the config before in interleaved rounds, then 3B rollouts on them. 74a-74f carry the vLLM bundle's parts.
  74a)  # part 1; the 3B checkpoint; the decode tiles searched on the 3B layers at M = 1 / 8 / 16: whole-wave splits and
        # stream-K (fill), stream-K with chunks in flight, the power-of-two splits (default)
    vllm_parts .device/vllm6 6
    device_name
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 3b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -1
    top=$out; out=/tmp/q74a; mkdir -p $out  # (a call returns at most 8 files: the searches' in one tar)
    for ts in fill sk_in_flight default; do
      warm_shards_then_search 150 14 small_$ts --models 3b --ms 1,8,16 --dirs fwd --layouts words \
        --shipped-layout words --tile-set $ts
    done
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  74b)  # part 2; the same at M = 32 / 64 / 128: every tile with its stream-K variants (all), whole-wave splits (fill),
        # stream-K with chunks in flight, splits summed by the last CTA (split_sum)
    vllm_parts .device/vllm6 6
    device_name
    top=$out; out=/tmp/q74b; mkdir -p $out
    warm_shards_then_search 200 14 mid_all --models 3b --ms 32,64,128 --dirs fwd --layouts words \
      --shipped-layout words --tile-set all --stream-k --dp-waves
    for ts in fill sk_in_flight split_sum; do
      warm_shards_then_search 150 14 mid_$ts --models 3b --ms 32,64,128 --dirs fwd --layouts words \
        --shipped-layout words --tile-set $ts
    done
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  74c)  # part 3; the 3B entries: the dispatch's, the epilogues' (bias and adapter, now on 3B shapes too) GPU tests, then
        # the rollout forward ("words") against the tables before (routes.py --verify) on every 3B layer at M = 1-128
    vllm_parts .device/vllm6 6
    device_name
    gpu_tests_parallel 250 \
      "lora:tests/test_kernels_ws_gpu.py -k 'puts_bias_and_adapter and 3b'" \
      "dispatch:tests/test_kernels_ws_gpu.py -k 'default_dispatch and not puts_bias or swiglu_dispatch or swiglu_after'" \
      "norm:tests/test_kernels_ws_gpu.py -k 'row_norm_epilogue or whole_tile or stream_k_completes'"
    timeout 300 python3 benchmarks/routes.py --verify --layout words --dirs fwd --models 3b \
      --previous-tables benchmarks/results/run40_2026-11-28/previous_tables.json \
      --ms 1,8,12,16,24,32,40,48,64,80,96,128 --out "$out/verify_words" 2>&1 | grep -v Warning \
      | tee "$out/log_verify.txt" | tail -50
    ;;
  74d)  # part 4; the issue's benchmark on the 3B layers (trainer's "pairs" layout, forward and input gradient) at
        # M = 1-4096, as run for 7B / 32B
    vllm_parts .device/vllm6 6
    device_name
    timeout 500 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 3b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning > "$out/log_gemm.txt"
    tail -45 "$out/log_gemm.txt"
    ;;
  74e)  # part 5; the trainer's forward ("pairs", TUNED: no 3B entries) searched on the 3B layers at M = 32-2048:
        # the default tiles and their stream-K variants, against the shipped route (the Triton tile loop / slab path)
    vllm_parts .device/vllm6 6
    device_name
    top=$out; out=/tmp/q74e; mkdir -p $out
    warm_shards_then_search 270 14 pairs_fwd --models 3b --ms 32,64,128,256,512,1024,2048 --dirs fwd --stream-k
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  74f)  # the bundle's last part (unpacked; a fresh machine took 74c-74e's parts, 74g / 74f carry parts 1-2 again); 3B rank 32 on this project's kernels (run 40's entries) and on BF16
    vllm_parts .device/vllm6 6
    rollout_point 3b nvfp4 qerl 250 0.85
    rollout_point 3b bf16 marlin 250 0.85
    ;;
  74g)  # a part; the trainer's input gradient ("pairs", TUNED_BWD) searched on the 3B layers at M = 32-2048, as 74e
    vllm_parts .device/vllm6 6
    device_name
    top=$out; out=/tmp/q74g; mkdir -p $out
    warm_shards_then_search 270 14 pairs_bwd --models 3b --ms 32,64,128,256,512,1024,2048 --dirs bwd --stream-k
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  74h)  # the 3B "pairs" entries of 74e / 74g: the dispatch's GPU tests, the trainer's forward and input gradient against
        # the tables before (routes.py --verify) at M = 24-2048, then the issue's benchmark on the 3B layers again
    device_name
    gpu_tests_parallel 200 "dispatch:tests/test_kernels_ws_gpu.py -k 'default_dispatch and not puts_bias'" \
      "fp32:tests/test_kernels_gpu.py -k 'packed_linear or forward_and_grad_input or autograd'"
    timeout 330 python3 benchmarks/routes.py --verify --dirs fwd,bwd --models 3b \
      --previous-tables benchmarks/results/run40_2026-11-28/previous_tables.json \
      --ms 24,32,64,128,256,512,768,1024,1536,2048 --budget 0.5 --out "$out/verify_pairs" 2>&1 | grep -v Warning \
      | tee "$out/log_verify.txt" | tail -3
    timeout 150 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 3b --ms 1,4,16,64,128,256,1024,4096 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning > "$out/log_gemm.txt"
    tail -18 "$out/log_gemm.txt"
    ;;
  74i)  # the final 3B "pairs" tables (74h's four losing picks back on the route before): gate_up / down against the
        # tables before at the M those picks served
    device_name
    timeout 200 python3 benchmarks/routes.py --verify --dirs fwd,bwd --models 3b --layers gate_up,down \
      --previous-tables benchmarks/results/run40_2026-11-28/previous_tables.json \
      --ms 24,32,640,768,1024,1536,2048 --budget 0.5 --out "$out/verify_pairs_final" 2>&1 | grep -v Warning \
      | tee "$out/log_verify_final.txt" | tail -2
    ;;
  74j)  # padded_rows from M = 17 at least 64 (74e's 3B down entry at M = 17-32 runs 64-row tiles): the buffers a decode
        # step hands its next projection, the dispatch's and the swiglu GPU tests
    device_name
    gpu_tests_parallel 200 "next_x:tests/test_fused_norm.py tests/test_swiglu.py" \
      "dispatch:tests/test_kernels_ws_gpu.py -k 'default_dispatch and not puts_bias or swiglu_dispatch'"
    ;;
  74k)  # the 3B "pairs" stream-K / two-consumer entries at M = 1024 under sustained load (run 33's check): each cell's
        # dispatch and, as "alt", the route before (alt_before.json declines those entries: the slab path), 2 s each
    device_name
    timeout 170 python3 benchmarks/sustained.py --layout pairs --seconds 2 \
      --cells 3b:qkv:1024,3b:gate_up:1024,3b:down:1024,3b:qkv:1024:bwd,3b:gate_up:1024:bwd \
      --alt-configs benchmarks/results/run40_2026-11-28/sustained/alt_before.json --out "$out/sustained" 2>&1 \
      | grep -v Warning | tee "$out/log_sustained.txt" | tail -12
    ;;
  75a)  # the rollout's forward ("words") above M = 128 (prefill) searched on the 3B layers, which had no entries there
        # (default_words_config): the default tiles, their stream-K variants pure and with whole waves, M = 256-1024
    device_name
    top=$out; out=/tmp/q75a; mkdir -p $out
    warm_shards_then_search 270 14 words_large_a --models 3b --ms 256,512,1024 --dirs fwd --layouts words \
      --shipped-layout words --stream-k --dp-waves
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  75b)  # 75a at M = 2048 / 4096
    device_name
    top=$out; out=/tmp/q75b; mkdir -p $out
    warm_shards_then_search 270 14 words_large_b --models 3b --ms 2048,4096 --dirs fwd --layouts words \
      --shipped-layout words --stream-k --dp-waves
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  75c)  # 75a / 75b's 3B "words" entries at M = 256-4096: the dispatch's GPU tests, the rollout forward against the tables
        # before (routes.py --verify) at M = 129-4096 between and on the buckets, the issue's benchmark on the 3B layers
    device_name
    words_3b_entries_check 250 0.5 129,192,256,320,384,512,640,768,1024,1536,2048,3072,4096
    ;;
  75d)  # 75a at the keys between the buckets (nvfp4_gemm.FINE_MS) above 128: 75c found 3B qkv at M = 1536 1.16x slower
        # on the M = 2048 entry than on the default config before, and M = 640-768 / 1536 below the buckets' ratios
    device_name
    top=$out; out=/tmp/q75d; mkdir -p $out
    warm_shards_then_search 270 14 words_fine --models 3b --ms 192,384,640,768,896,1280,1536 --dirs fwd \
      --layouts words --shipped-layout words --stream-k --dp-waves
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  75e)  # 75d's keys between the buckets added to the 3B "words" entries: the dispatch's GPU tests, the rollout forward
        # against the tables before run 41 at M = 129-4096 (on and between every key), the issue's benchmark on 3B
    device_name
    words_3b_entries_check 330 0.4 \
      129,160,192,224,256,320,384,448,512,576,640,704,768,832,896,960,1024,1152,1280,1408,1536,1792,2048,3072,4096
    ;;
  75f)  # every GPU test of the suite (-m gpu; the files that hold them: the others import trl / datasets, which this
        # machine lacks) on the final code, in 8 processes (conftest's --shard I/8)
    device_name
    every_gpu_test
    ;;
  76a)  # the TMA descriptors' L2 promotion (Triton's 128 B against none / 64 B / 256 B): the rollout's forward ("words")
        # on the 7B / 14B / 32B layers at M = 1-128, the input gradient ("pairs") on 7B / 32B at M = 1-128; compiled and
        # checked in 8 processes first
    device_name
    rm -f /tmp/warm_*.txt
    fw="--models 7b,14b,32b --ms 1,8,16,32,64,128 --dirs fwd --layout words"
    bw="--models 7b,32b --ms 1,16,64,128 --dirs bwd --layout pairs"
    for i in 0 1 2 3 4 5 6 7; do
      ( timeout 240 python3 benchmarks/tma_l2_promotion.py $fw --warm-only --shard $i/8 --out /tmp/w$i/f
        timeout 120 python3 benchmarks/tma_l2_promotion.py $bw --warm-only --shard $i/8 --out /tmp/w$i/b ) \
        > /tmp/warm_$i.txt 2>&1 &
    done
    wait
    grep -h -i "error\|wrong" /tmp/warm_*.txt | head -5
    timeout 250 python3 benchmarks/tma_l2_promotion.py $fw --out "$out/fwd_words" 2>&1 | grep -v Warning \
      | tee "$out/log_fwd.txt" | tail -3
    timeout 100 python3 benchmarks/tma_l2_promotion.py $bw --out "$out/bwd_pairs" 2>&1 | grep -v Warning \
      | tee "$out/log_bwd.txt" | tail -3
    ;;
  76b)  # deeper rings on fewer CTAs per SM at decode M (gemm_ws.py --tile-set deep: stream-K on one or two CTAs per SM
        # with 8-30 stages, one tile per CTA with 8-16 stages), the rollout's forward ("words"), M = 1 / 8 / 16
    device_name
    top=$out; out=/tmp/q76b; mkdir -p $out
    warm_shards_then_search 240 14 deep --models 7b,14b,32b --ms 1,8,16 --dirs fwd --layouts words \
      --shipped-layout words --tile-set deep
    tar -cf "$top/search.tar" -C $out . && out=$top
    ;;
  76c)  # the launch tables moved out of the kernel module (qerl/kernels/ws_tables.py): every GPU test of the suite
    device_name
    every_gpu_test
    ;;
  76d)  # the benchmark scripts whose cells now come from gemm_ws.cell_operands / gemm_nvfp4.bf16_copies, each on a
        # small grid (their correctness checks run before any timing)
    device_name
    o="--models 7b --layers o"
    timeout 90 python3 benchmarks/tma_l2_promotion.py $o --ms 8 --dirs fwd --out "$out/tma" 2>&1 | tail -1
    timeout 90 python3 benchmarks/routes.py --verify --layout words $o --dirs fwd --ms 96 --budget 0.1 \
      --out "$out/routes" 2>&1 | grep -v Warning | tail -1
    timeout 90 python3 benchmarks/slab_plans.py $o --dirs fwd --ms 2048 --verify --out "$out/slab" 2>&1 \
      | grep -v Warning | tail -1
    timeout 90 python3 benchmarks/gemm_nvfp4.py --no-marlin $o --ms 8 --dirs fwd,bwd --out "$out/gemm" 2>&1 \
      | grep -v Warning | tail -2
    timeout 90 python3 benchmarks/gemm_ws.py $o --ms 64 --tile-set table --out "$out/ws" 2>&1 | grep -v Warning \
      | tail -1
    timeout 60 python3 benchmarks/order_effect.py --n 3584 --k 3584 --m 64 2>&1 | grep -v Warning | tail -2
    timeout 150 python3 benchmarks/bounds.py --models 7b --dirs fwd --ms 8 --out "$out/bounds" 2>&1 \
      | grep -v Warning | tail -2
    ls -R "$out" | grep json
    ;;
  76e)  # why deeper rings ran slower (76b): benchmarks/ws_probe.py on 7B / 32B gate_up at M = 8, the shipped config
        # against 10 stages, one CTA per SM with 12 stages, stream-K on one CTA per SM with 12 / 24 stages, each whole
        # and with the consumer only waiting for and releasing each stage (no_compute) or the code copies alone
    device_name
    timeout 500 python3 benchmarks/ws_probe.py --models 7b,32b --layers gate_up --ms 8 --bf16 \
      --variants full,no_compute,codes_only --configs \
      ";stages=10;maxnreg=None,stages=12;in_flight=False,maxnreg=None,stream_k=1,stages=12;in_flight=False,maxnreg=None,stream_k=1,stages=24" \
      --out "$out/probe" 2>&1 | grep -v Warning | tee "$out/log_probe.txt" | tail -12
    ;;
  # Run 43: NVFP4 against BF16 LoRA on SmolLM2-135M-Instruct (RL on arithmetic, then held-out accuracy), on the
  # transformers rollout backend (no vLLM). Payload: `bash scripts/device_payload.sh accuracy`; back to back (/tmp is
  # kept while the machine stays warm): 77a carries .device/acc/p0, 77p .device/acc/p1 to p5 in turn, 77b p6.
  77a)  # the wheels and the GGUF file's first piece
    device_name
    mkdir -p /tmp/acc/logs /tmp/acc/eval && cp .device/acc/p0/gguf_0 /tmp/acc/
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .device/acc/p0/whl/*.whl
    acc_env
    python3 -c "import torch, transformers, peft, trl, datasets, gguf, qerl.train; print('torch', torch.__version__, \
'transformers', transformers.__version__, 'peft', peft.__version__, 'trl', trl.__version__, 'datasets', \
datasets.__version__)" 2>&1 | tail -1 | tee -a "$out/device.txt"
    ;;
  77p)  # the GGUF file's next piece (whichever .device/acc/pN the call carries)
    cp .device/acc/p[1-5]/gguf_* /tmp/acc/ && ls /tmp/acc
    ;;
  77b)  # the GGUF file's last piece and the two models (acc_models), then three GRPO runs at once (NVFP4 + AQN,
        # NVFP4, BF16; seed 0, the same hyperparameters) with the base models' evaluations beside them, then the
        # trained adapters' evaluations
    device_name
    acc_env
    acc_models
    export ACC_LIMIT=${ACC_LIMIT:-420}
    for c in nvfp4_aqn nvfp4 bf16; do acc_start $c 0; done
    acc_eval base_nvfp4 /tmp/acc/nvfp4 nvfp4
    acc_eval base_bf16 /tmp/acc/dense bf16
    wait
    acc_finish
    ;;
  77c)  # the runs that a call's time limit stopped, continued from their last checkpoints, then the evaluations
    device_name
    acc_env
    export ACC_LIMIT=${ACC_LIMIT:-450}
    for d in /tmp/acc/run_*; do
      [ -d "$d/final" ] && continue
      r=${d#/tmp/acc/run_} seed=0
      [[ $r == *_s* ]] && seed=${r##*_s}
      acc_start "${r%_s*}" "$seed"
    done
    wait
    acc_finish
    ;;
  77d)  # as 77b with seeds 1 and 2 (six runs at once; the models again if the machine is new)
    device_name
    acc_env
    acc_models
    export ACC_LIMIT=${ACC_LIMIT:-470}
    for seed in 1 2; do for c in nvfp4_aqn nvfp4 bf16; do acc_start $c $seed; done; done
    wait
    acc_finish
    ;;
  77e)  # the paper's pairing of a higher learning rate with the NVFP4 base: NVFP4 + AQN and BF16 both at 4e-4 (twice
        # the config's), seeds 0-2, six runs at once
    device_name
    acc_env
    acc_models
    export ACC_LIMIT=${ACC_LIMIT:-470}
    for seed in 0 1 2; do
      acc_train nvfp4_aqn_lr4e-4_s$seed nvfp4 /tmp/acc/nvfp4 --seed $seed --learning_rate 4e-4 &
      acc_train bf16_lr4e-4_s$seed bf16 /tmp/acc/dense --aqn_mode off --seed $seed --learning_rate 4e-4 &
    done
    wait
    acc_finish
    ;;
  77f)  # BF16 LoRA on the NVFP4 checkpoint's weights dequantized (the dense model with every quantized projection
        # replaced by the codec's dequantization): what the quantized weights cost, apart from the NVFP4 training path;
        # seeds 0 and 1 at once, with that base's evaluation
    device_name
    acc_env
    acc_models
    python3 - <<'PY'
import shutil
from safetensors.torch import load_file, save_file
from qerl import nvfp4
shutil.copytree("/tmp/acc/dense", "/tmp/acc/dequant", dirs_exist_ok=True)
dense, packed = load_file("/tmp/acc/dense/model.safetensors"), load_file("/tmp/acc/nvfp4/model.safetensors")
n = 0
for key in list(dense):
    m = key.removesuffix(".weight")
    if m + ".weight_packed" in packed:
        w = nvfp4.dequantize(packed[m + ".weight_packed"], packed[m + ".weight_scale"], packed[m + ".weight_global_scale"])
        dense[key] = w.to(dense[key].dtype)
        n += 1
save_file(dense, "/tmp/acc/dequant/model.safetensors", metadata={"format": "pt"})
print("dequantized projections:", n)
PY
    export ACC_LIMIT=${ACC_LIMIT:-330}
    for seed in 0 1; do acc_train bf16_dequant_s$seed bf16 /tmp/acc/dequant --aqn_mode off --seed $seed & done
    acc_eval base_dequant /tmp/acc/dequant bf16
    wait
    acc_finish
    ;;
  78a)  # the transformers backend's prefill: each distinct prompt once and the LM head on the last position, against
        # every row prefilled with the head on every position (the same captured steps, in turn); GRPO's groups of 8;
        # first the GPU tests of the backend
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py tests/test_decode_step.py \
      -rf --tb=short 2>&1 | tail -4 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -14
    ;;
  78b)  # 78f's comparison with a rank-32 adapter
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -14
    ;;
  78c)  # the shared-prefill GPU test's failure in full; then where the prefill's wall time goes (one 128-token prompt
        # in a group of 8): host operators, GPU kernels and Python's profile, NVFP4 against BF16
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_rollout_hf.py -k shared_prefill -x \
      --tb=long 2>&1 | grep -v Warning | tail -40 | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/prefill_profile.py --batch 8 --group 8 --out "$out" 2>&1 | grep -v Warning | tail -4
    ;;
  78d)  # the prefill captured as a CUDA graph per (distinct prompts, padded width): the backend's GPU tests, then the
        # 78a comparison with a third variant (the prefill shared but uncaptured)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -30 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -22
    ;;
  78e)  # why the captured prefill's replay gave NaNs (scripts/prefill_capture_check.py: warm-up against replay, padding,
        # SDPA backends, the 4-D mask); the backend's GPU tests; the 78d comparison
    device_name
    timeout 120 python3 scripts/prefill_capture_check.py 2>&1 | grep "^widths" | tee "$out/capture_check.txt"
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -22
    ;;
  78f)  # the fused step built before the prefill is captured (its fusion moves q / k / v and gate / up, which a prefill
        # captured earlier read where they were): the backend's GPU tests, then the 78d comparison
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -22
    ;;
  78g)  # the captured prefills in one shared memory pool: the backend's GPU tests
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    ;;
  78h)  # 78f's comparison with distinct prompts (no groups: what sharing cannot help), batch 8, no adapter
    device_name
    timeout 220 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0 --group 1 --prefill-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -9
    ;;
  79a)  # the fused step on its own "words" copy of the codes (decode_layout): the backend's GPU tests, then the
        # rollouts without an adapter, the modules' "pairs" and the words copy in the same passes
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --decode-layout-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  79b)  # 79a's comparison with a rank-32 adapter
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --decode-layout-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  79c)  # "auto" (the default now: the words copy on a Hopper GPU where it fits): the backend's GPU tests, then
        # batch 8 without and with a rank-32 adapter against the modules' pairs, and where a step's time goes
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    timeout 380 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 0,32 --group 8 --decode-layout-compare \
      --profile --out "$out" 2>&1 | grep -v Warning | tail -24
    ;;
  79d)  # the adapters' shrink written in u's [S, M, r] layout (its cast and scaling in the reduction kernel): the
        # backend's GPU tests, then 79c's batch-8 rank-32 comparison and profile
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -20 | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --group 8 --decode-layout-compare \
      --profile --out "$out" 2>&1 | grep -v Warning | tail -9
    ;;
  79e)  # the step's bf16 copies of the fp32 adapter (refreshed before each generation): the backend's adapter GPU
        # tests, then batch 8 with a rank-32 adapter against the step on the fp32 adapter itself, with the profile
        # (runs at commit 335a8a0 only: the copies and the benchmark's flag were taken out again after this call)
    device_name
    timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py -rf \
      -k "in_place or shared_prefill" --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -12 | tee "$out/gpu_tests.txt"
    timeout 250 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --group 8 --adapter-copies-compare \
      --profile --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  80a)  # the adapters' shrink in one kernel launch per group and B kept in bf16 (DecodeStep's adapter_kernels): the
        # kernel's GPU tests, the backend's adapter tests, then batch 8 with a rank-32 adapter against the shrink in
        # torch with B cast each step, in the same passes, and where a step's time goes
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py \
      tests/test_rollout_hf.py -k "shrink or in_place or split_kernels" -rf --tb=short 2>&1 \
      | grep -v "Warning\|DEBUG" | tail -14 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --group 8 --adapter-kernels-compare \
      --profile --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  80b)  # 80a's comparison at batches 8 and 64 with the prefill's share split off
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --adapter-kernels-compare \
      --prefill-split --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  80c)  # the shrink kernel's reduce modes and program counts against the compiled torch shrink, all 28 layers' four
        # groups in one graph (benchmarks/lora_shrink.py), after the kernel's GPU tests
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -8 | tee "$out/gpu_tests.txt"
    timeout 420 python3 benchmarks/lora_shrink.py --programs 64,256,1024 --out "$out" 2>&1 | grep -v Warning | tail -5
    ;;
  80d)  # the shrink kernel on tl.dot (tf32x3), its K loop pipelined: its GPU tests, its variants against the compiled
        # torch shrink (benchmarks/lora_shrink.py), then the backend at batches 8 and 64, rank 32, against the torch
        # shrink with B cast each step, in the same passes
    device_name
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -8 | tee "$out/gpu_tests.txt"
    timeout 150 python3 benchmarks/lora_shrink.py --out "$out" 2>&1 | grep -v Warning | tail -4
    timeout 320 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --adapter-kernels-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -7
    ;;
  80e)  # the shrink kernel from 17 rows on (the multiply-sum below), atomic split sums, B kept in bf16: the kernel's
        # and the backend's adapter GPU tests, then 80d's comparison at batches 8 and 64
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py \
      tests/test_rollout_hf.py -k "shrink or in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -8 \
      | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --adapter-kernels-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -7
    ;;
  80f)  # the 20-row case of the backend's in-place test alone (run at 09e5984, then at be39fe4 with the test comparing
        # against the torch shrink's rollouts); the shipped default is reduce="last" (80d's kernel at batch 64)
    timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "in_place and 20" --tb=short 2>&1 | grep -v "Warning\|DEBUG" | grep -v "^  warnings" | tail -12 \
      | tee "$out/gpu_test_20rows.txt"
    ;;
  81a)  # where a batch-64 step's time goes (no adapter, rank 32), and the shrink kernel's split sums by atomic adds
        # against the last program's in the same passes (DecodeStep's shrink_reduce), after the shrink's GPU tests
    device_name
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 470 python3 benchmarks/rollout_hf.py --batches 64 --lora-ranks 0,32 --group 8 --shrink-reduce-compare \
      --profile --out "$out" 2>&1 | grep -v Warning | tail -12
    ;;
  81b)  # the shrink kernel's tail: blocks of fewer rows and fewer K-splits per tile for the last program's sum, against
        # the atomic adds, alone at the rows where the decode step runs it (17-128), after its GPU tests
    device_name
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py -rf \
      --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/lora_shrink.py --ms 24,64,128 --variants last_128,atomic_128,last_128_s16,\
last_128_s8,last_128_bm32,last_128_bm16,last_256_bm16,last_512_bm16,last_256_bm16_s16,last_256_bm32_s16,\
atomic_128_bm16,atomic_512_bm16 --out "$out" 2>&1 | grep -v Warning | tail -5
    ;;
  81c)  # the shrink kernel's new defaults (the last program's sum on blocks of 16 rows, 256 programs): its GPU tests and
        # the backend's in-place test at 20 rows, then rank-32 rollouts at batches 64 and 32 against atomic adds
    device_name
    timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py \
      tests/test_rollout_hf.py -k "shrink or in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    timeout 470 python3 benchmarks/rollout_hf.py --batches 64,32 --lora-ranks 32 --group 8 --shrink-reduce-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -8
    ;;
  81d)  # the backend's NVFP4 step with programmatic dependent launch on (its projections and attention take part, the
        # norms, SiLU x up and RoPE kernels between them do not), without an adapter, against PDL off, same passes
    device_name
    timeout 450 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 0 --group 8 --pdl-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -8
    ;;
  81e)  # split partials summed by the kernel that adds the bias and the adapter's expand after them (one launch for
        # two): the kernels' GPU tests for it, then rank-32 rollouts at batches 64 and 32 against two launches
    device_name
    timeout 130 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_kernels_gpu.py \
      tests/test_kernels_ws_gpu.py tests/test_rollout_hf.py -k "lora or split_sum or in_place or 7b_decode" -rf --tb=short 2>&1 \
      | grep -v "Warning\|DEBUG" | tail -6 | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/rollout_hf.py --batches 64,32 --lora-ranks 32 --group 8 --split-epilogue-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -8
    ;;
  82a)  # the transformers backend on the 32B shape (64 layers, random weights built a layer at a time): rank-32
        # rollouts at batches 64 and 8 on the words copy, with the profile
    device_name
    timeout 560 python3 benchmarks/rollout_hf.py --shape 32b --batches 64,8 --lora-ranks 32 --group 8 \
      --decode-layout words --profile --out "$out" 2>&1 | grep -v Warning | tail -14
    ;;
  82b)  # rank-32 rollouts at batch 32 on the 32B and 14B shapes
    device_name
    timeout 280 python3 benchmarks/rollout_hf.py --shape 32b --batches 32 --lora-ranks 32 --group 8 \
      --decode-layout words --out "$out/32b" 2>&1 | grep -v Warning | tail -4
    timeout 230 python3 benchmarks/rollout_hf.py --shape 14b --batches 32 --lora-ranks 32 --group 8 \
      --decode-layout words --out "$out/14b" 2>&1 | grep -v Warning | tail -4
    ;;
  82c)  # the 14B shape (48 layers): rank-32 rollouts at batches 64 and 8
    device_name
    timeout 500 python3 benchmarks/rollout_hf.py --shape 14b --batches 64,8 --lora-ranks 32 --group 8 \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tail -6
    ;;
  82d)  # the 3B shape (36 layers, the LM head tied to the embedding): rank-32 rollouts at batches 64 and 8
    device_name
    timeout 330 python3 benchmarks/rollout_hf.py --shape 3b --batches 64,8 --lora-ranks 32 --group 8 \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tail -5
    ;;
  82e)  # the shrink kernel on bf16 copies of A (one 16-bit product, half the bytes): its GPU tests on bf16 A, the 7B
        # step's shrinks alone at M = 64 on fp32 and bf16 A, then rank-32 rollouts at batch 64 with and without copies
    device_name
    timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py \
      -k "matches_reference_on_gpu and bfloat16" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -4 \
      | tee "$out/gpu_tests.txt"
    timeout 60 python3 benchmarks/lora_shrink.py --ms 64 --variants last_256_bm16 --a-dtypes float32,bfloat16 \
      --replays 30 --out "$out/alone" 2>&1 | grep -v Warning | tail -2
    timeout 170 python3 benchmarks/rollout_hf.py --batches 64 --lora-ranks 32 --group 8 --a-copies-compare \
      --out "$out" 2>&1 | grep -v Warning | tail -4
    ;;
  82f)  # 82e's test selection matched none: the shrink kernel's GPU tests against the fp32 reference, bf16 A among them
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_lora_shrink.py \
      -k "matches_reference_on_gpu" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -4 | tee "$out/gpu_tests_82f.txt"
    ;;
  82g)  # next: the in-place adapter test with the shrink kernel on bf16 copies of A (DecodeStep(a_copies=True)), the
        # condition for making the copies the default
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "reads_norms_and_adapter_in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    ;;
  83a)  # an H100: 82g's in-place adapter test (the copies of A), then 7B rank-32 rollouts at batches 64 and 8 with and
        # without the copies (the rollout claim on the H100, not timed there since run 32)
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "reads_norms_and_adapter_in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    timeout 330 python3 benchmarks/rollout_hf.py --batches 64,8 --lora-ranks 32 --group 8 --a-copies-compare \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tail -6
    ;;
  83b)  # an H100: the issue's benchmark (NVFP4 forward and input gradient against cuBLAS BF16) on the 7B / 14B / 32B
        # layers at decode M and at M = 1024, on the tables searched on H200s
    device_name
    timeout 480 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,14b,32b --ms 1,16,64,128,1024 \
      --dirs fwd,bwd --out "$out/gemm" 2>&1 | grep -v Warning | tail -40 > "$out/log_gemm.txt"
    tail -12 "$out/log_gemm.txt"
    ;;
  83c)  # the multiply-sum shrink (decode batches <= 16) on the copies of A too: the in-place adapter test (copies at 2
        # and 20 rows among its cases), the torch shrink on fp32 and bf16 A at M = 8 / 16 / 64, then 7B rank-32
        # rollouts at batches 8 and 64 with and without the copies
    device_name
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "reads_norms_and_adapter_in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    timeout 90 python3 benchmarks/lora_shrink.py --ms 8,16,64 --variants last_256_bm16 --a-dtypes float32,bfloat16 \
      --replays 30 --out "$out/alone" 2>&1 | grep -v Warning | tail -4
    timeout 300 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --a-copies-compare \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tail -6
    ;;
  83d)  # 83c without the shrink alone (device time): the in-place adapter test (the copies of A at 2 and 20 rows among
        # its cases), then 7B rank-32 rollouts at batches 8 and 64 on the copies of A (the default) and on fp32 A
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "reads_norms_and_adapter_in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    timeout 300 python3 benchmarks/rollout_hf.py --batches 8,64 --lora-ranks 32 --group 8 --a-copies-compare \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tee "$out/log_rollouts.txt" | tail -6
    ;;
  83e)  # 83d at batch 8 only (device time; batch 64's copies were timed in 82e): the in-place adapter test, then 7B
        # rank-32 rollouts at batch 8 on the copies of A (the default, now also in the multiply-sum) and on fp32 A
    device_name
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:logging tests/test_rollout_hf.py \
      -k "reads_norms_and_adapter_in_place" -rf --tb=short 2>&1 | grep -v "Warning\|DEBUG" | tail -6 \
      | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/rollout_hf.py --batches 8 --lora-ranks 32 --group 8 --a-copies-compare \
      --decode-layout words --out "$out" 2>&1 | grep -v Warning | tee "$out/log_rollouts.txt" | tail -6
    ;;
  83f)  # an H100, the device time left: the issue's benchmark on the 7B layers' forward at decode M
    device_name
    timeout 150 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b --ms 1,16,64,128 --dirs fwd \
      --out "$out/gemm" 2>&1 | grep -v Warning | tail -20 | tee "$out/log_gemm.txt"
    ;;
  83g)  # an H100, the device time left: the 14B / 32B forward and the 7B / 32B input gradient at decode M
    device_name
    timeout 100 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 14b,32b --ms 1,16,64,128 --dirs fwd \
      --out "$out/fwd" 2>&1 | grep -v Warning | tail -6 | tee "$out/log_fwd.txt"
    timeout 80 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1,16,64,128 --dirs bwd \
      --out "$out/bwd" 2>&1 | grep -v Warning | tail -6 | tee "$out/log_bwd.txt"
    ;;
  83h)  # an H100, the device time left: the 7B / 32B forward and input gradient at M = 1024
    device_name
    timeout 100 python3 benchmarks/gemm_nvfp4.py --no-marlin --models 7b,32b --ms 1024 --dirs fwd,bwd \
      --out "$out/m1024" 2>&1 | grep -v Warning | tail -12 | tee "$out/log_m1024.txt"
    ;;
esac
