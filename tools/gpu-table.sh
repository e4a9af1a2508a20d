#!/usr/bin/env bash
# The GPU table of docs/gpu.md on one NVIDIA machine, within a time budget, each step bounded,
# in this order (bf16 on `cuda` beside PyTorch, the fused GPU kernels against the composite ops,
# and where the step's time goes, first):
#   1. KiteNorm Table-1 dims, `pre` in bf16 and f32 on `cuda` beside tools/torch_gpu.py f32 and
#      bf16 autocast (PyTorch eager), in one `normlab bench` invocation (bf16 first: it is the
#      number PyTorch users compare with);
#   2. `pre` in bf16 on `cuda` with `--kernels composite` (no fused GPU norms, attention or
#      cross-entropy: the A/B of the kernels in src/kernels/gpu), then with `--kernels cublas` (the layers'
#      products by cuBLAS);
#   3. `normlab bench curve`: `pre`'s bf16 losses beside PyTorch bf16 autocast from the same
#      initial weights on the same batch (100 steps, Table-1 dims), held against bf16's bound;
#   4. `normlab bench profile` at Table-1 dims on `cuda`, `pre` then `kitenorm` in bf16, beside
#      PyTorch's ceilings (tools/torch_ceilings.py: cuBLAS GEMM, elementwise bandwidth);
#   5. `kitenorm` as in 1, then the profile of `pre` in f32, then the curve in f32;
#   6. PyTorch `--compile` in bf16 and f32 at the bench's sizes;
#   7. `pre` in f32/f16 on `vulkan` beside PyTorch eager (NVIDIA's Vulkan driver has no bf16);
#   8. `generate` tokens/s of the Table-1 model on `vulkan` and `cuda`;
#   9. 200 steps of the Table-1 model (micro-batch 8 x 512) on `cuda` (bf16, f32) and `vulkan`
#      (f32): the loss curves, for agreement.
# Steps run in this order; one that the budget no longer fits is skipped and logged so, as is
# one not named in GPU_TABLE_STEPS when that is set (e.g. GPU_TABLE_STEPS="cuda-table-pre profile-cuda-pre-bf16").
# GPU memory: the most `nvidia-smi` reports in use while each step runs (sampled every 200 ms).
#   tools/gpu-table.sh BIN OUT_DIR [SECONDS]     # BIN built with --features vulkan,cuda
#   tools/gpu-table.sh BIN OUT_DIR SECONDS lavapipe   # BIN built with --features wgpu
# `lavapipe` runs every step of the script without an NVIDIA card, to check it end to end
# before a lease: `wgpu` (Mesa's software Vulkan device, tools/lavapipe.sh) in place of `cuda`
# and `vulkan`, the `tiny` dims and a 2-layer d-32 run in place of Table-1's, f16 in place of
# bf16 (WGSL has no bf16; the curve is f32), PyTorch on the CPU, the profile's ceilings at
# 512³ and 2²² values, no `cublas` step (it needs `cuda`), no GPU memory column, each step's
# limit ×4 (lavapipe compiles every kernel on the CPU).
# `vulkan` needs the Vulkan loader and glvnd beside NVIDIA's driver (Debian: libvulkan1
# libglvnd0 libegl1 libgl1 libglx0; VK_DRIVER_FILES=/usr/share/vulkan/icd.d/nvidia_icd.json).
# burn compiles and autotunes each kernel on first use: on an H200 the first `cuda` f32 train
# step of the Table-1 model took ≈ 90 s, and half precision longer, so a short budget measures
# f32 only (the steps left over are logged as skipped). Every step keeps its compiled kernels
# and autotune results in one kernel cache, target/normlab-cache/kernels (NORMLAB_CACHE is
# set to target/normlab-cache; docs/gpu.md, "Kernel cache"): carry target/normlab-cache into
# the next lease and its steps skip that work. It also comes back as
# OUT/kernel-cache.tar.xz (unpack with `tar -C target/normlab-cache -xJf`); the JSON results of a
# run that reaches its end come back as OUT/results.tar.xz.
set -uo pipefail
bin=$1 out=$2 budget=${3:-540} mode=${4:-cuda}
if [ "$mode" = lavapipe ]; then
    gpu=wgpu vk=wgpu dims=tiny half=f16 curve_half=f32 stretch=4
    torch_dims=(--V 256 --D 32 --L 2 --H 2 --FF 96 --B 2 --T 32 --device cpu)
    run_config=configs/quickstart.toml
    run_dims=(--set model.d_model=32 --set model.n_layers=2 --set model.n_heads=2 --set train.batch_size=2
        --set train.micro_batch_size=2 --set train.seq_len=32)
    curve_steps=(--steps 20)
    ceilings=(--ceiling-gemm 512 --ceiling-len 4194304)
    devices=(wgpu) runs=(wgpu:f16 wgpu:f32)
else
    gpu=cuda vk=vulkan dims=table1 half=bf16 curve_half=bf16 stretch=1
    torch_dims=(--V 50257 --D 512 --L 12 --H 8 --FF 1536 --B 4 --T 2048)
    run_config=configs/kitenorm-table1.toml
    run_dims=(--set train.batch_size=8 --set train.micro_batch_size=8 --set train.seq_len=512)
    curve_steps=(--steps 100)
    ceilings=()
    devices=(vulkan cuda) runs=(cuda:bf16 vulkan:f32 cuda:f32)
fi
start=$(date +%s)
mkdir -p "$out"
log="$out/gpu-table.log"
left() { echo $((budget - ($(date +%s) - start))); }
# step NAME SECONDS COMMAND...: runs COMMAND with at most SECONDS (fewer if the budget is
# shorter), logging its output and the peak GPU memory while it ran.
step() {
    local name=$1 limit=$(($2 * stretch))
    shift 2
    local l
    if [ -n "${GPU_TABLE_STEPS:-}" ] && [[ " $GPU_TABLE_STEPS " != *" $name "* ]]; then
        echo "== $name: skipped, not in GPU_TABLE_STEPS" >>"$log"
        return
    fi
    l=$(left)
    if [ "$l" -lt 30 ]; then
        echo "== $name: skipped, ${l}s of the budget left" >>"$log"
        return
    fi
    [ "$l" -lt "$limit" ] && limit=$l
    echo "== $name (at most ${limit}s): $*" >>"$log"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$out/.mem" 2>/dev/null &
    local smi=$! t0
    t0=$(date +%s.%N)
    timeout "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    local peak
    peak=$(sort -n "$out/.mem" | tail -1)
    echo "== $name: exit $rc after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, GPU memory peak ${peak:-n/a} MiB" >>"$log"
    kill $smi 2>/dev/null
    wait $smi 2>/dev/null
}
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$log" 2>&1
else
    echo "no nvidia-smi: no GPU memory column ($mode)" >>"$log"
fi
# NVRTC for burn's CUDA runtime: the CUDA toolkit's, or PyTorch's nvidia-* wheels'.
wheels=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))))' 2>/dev/null)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${wheels}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NORMLAB_CACHE="$PWD/target/normlab-cache"
mkdir -p "$NORMLAB_CACHE"
table1=(--dims $dims --kernels fused --warmup 5 --steps 10 --fwd-steps 5 --torch-python python3)
table() { step "$gpu-table-$1" "$2" "$bin" bench model --device $gpu --recipes "$1" --precision $half,f32 "${table1[@]}" --out "$out/$gpu-$1.json"; }
profile() {
    step "profile-$gpu-$1-$2" "$3" "$bin" bench profile --device $gpu --dims $dims --recipe "$1" --precision "$2" \
        --warmup 2 --steps 5 "${ceilings[@]}" --torch-python python3 --out "$out/profile-$gpu-$1-$2.json"
}
# `pre`'s losses beside PyTorch's from the same initial weights (bench curve).
curve() {
    step "curve-torch-$gpu-$1" "$2" "$bin" bench curve --device $gpu --dims $dims --precision "$1" "${curve_steps[@]}" \
        --torch-python python3 --out "$out/curve-torch-$gpu-$1.json"
}
table pre 200
# The fused GPU kernels (`fused`, in 1) against burn's composite ops (`composite`), and the
# layers' products by cuBLAS (`cublas`; on lavapipe the same op computes by burn's matmul).
for k in composite cublas; do
    [ "$mode" = lavapipe ] && [ $k = cublas ] && continue
    step "$gpu-$k-pre" 100 "$bin" bench model --device $gpu --recipes pre --kernels $k --precision $half \
        --dims $dims --warmup 3 --steps 5 --fwd-steps 5 --out "$out/$gpu-$k.json"
done
curve $curve_half 150
profile pre $half 150
profile kitenorm $half 100
table kitenorm 150
profile pre f32 80
[ "$mode" = lavapipe ] || curve f32 100
for dt in bf16 f32; do
    step "torch-compile-$dt" 80 python3 tools/torch_gpu.py "${torch_dims[@]}" --warmup 5 --steps 10 --compile --dtype $dt
done
step $vk-table 220 "$bin" bench model --device $vk --recipes pre --precision f32,f16 "${table1[@]}" --out "$out/$vk.json"
work=$(mktemp -d)
run=(--config $run_config --force --quiet --set 'model.recipe="pre"' "${run_dims[@]}")
gen=(--prompt "The meaning of" --max-new-tokens 256 --temperature 0)
for dev in "${devices[@]}"; do
    step "train-$dev-for-generate" 60 "$bin" train "${run[@]}" --set train.steps=2 --set "run.dir=\"$work/gen-$dev\"" --set "run.device=\"$dev\""
    step "generate-$dev" 40 "$bin" generate --checkpoint "$work/gen-$dev" "${gen[@]}"
done
long_run=(--set 'model.recipe="kitenorm"' --set train.steps=200 --set run.eval_every=100 --set run.eval_windows=8 --set run.checkpoint_every=1000)
for c in "${runs[@]}"; do
    dev=${c%%:*} p=${c##*:}
    step "curve-$dev-$p" 100 "$bin" train "${run[@]}" "${long_run[@]}" --set "run.device=\"$dev\"" --set "train.precision=\"$p\"" --set "run.dir=\"$work/curve-$dev-$p\""
    cp "$work/curve-$dev-$p/metrics.jsonl" "$out/curve-$dev-$p.jsonl" 2>/dev/null
done
rm -f "$out/.mem"
# The device tool returns at most 8 files: the measurements travel as one archive beside the log.
shopt -s nullglob
results=("$out"/*.json "$out"/*.jsonl)
shopt -u nullglob
[ ${#results[@]} -gt 0 ] && tar -C "$out" -cJf "$out/results.tar.xz" "${results[@]##*/}" && rm -f "${results[@]}"
# The kernel cache every step above shared (compiled kernels and autotune results).
tar -C "$NORMLAB_CACHE" -cJf "$out/kernel-cache.tar.xz" kernels
echo "== done after $(( $(date +%s) - start )) s" >>"$log"
