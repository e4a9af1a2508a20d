#!/usr/bin/env bash
# One run over two MPI ranks on the GPU code path, on a software Vulkan device (lavapipe),
# against the same run in one CPU process: a 2-layer d = 32 byte model, batch 8 in
# micro-batches of 4, 8 steps; the per-step training losses must agree within 1e-5 relative
# (the CPU's fused kernels and wgpu's sum in different orders, as in tests/gpu.rs). Both ranks
# take lavapipe (CUBECL_WGPU_DEFAULT_DEVICE=Cpu; on a machine with GPUs each rank takes its
# node-local GPU instead). Builds --profile gpu-ci --features wgpu,mpi (≈10 min on 2 cores);
# installs lavapipe and Open MPI when missing (Debian, root). Kept out of CI for its time.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/lavapipe.sh
command -v mpirun >/dev/null || { apt-get update -qq && apt-get install -y -qq openmpi-bin libopenmpi-dev libclang-dev; }
cargo build --profile gpu-ci --features wgpu,mpi
bin=target/gpu-ci/normlab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "open('$work/text.txt','w').write('Fellow citizens of the Senate and House of Representatives. ' * 400)"
common=(train --quiet --set model.d_model=32 --set model.n_layers=2 --set model.n_heads=2 --set train.steps=8
    --set train.seq_len=32 --set train.batch_size=8 --set train.micro_batch_size=4 --set run.eval_every=1000
    --set probe.every=1000 --set "data.cache_dir=\"$work/cache\"" --set "data.corpus=\"$work/text.txt\"")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RAYON_NUM_THREADS=1
t0=$(date +%s)
"$bin" "${common[@]}" --set "run.dir=\"$work/cpu\"" --set run.device='"cpu"'
t1=$(date +%s)
CUBECL_WGPU_DEFAULT_DEVICE=Cpu mpirun --oversubscribe -np 2 -x CUBECL_WGPU_DEFAULT_DEVICE \
    "$bin" "${common[@]}" --set "run.dir=\"$work/wgpu\"" --set run.device='"wgpu"'
t2=$(date +%s)
echo "cpu, one process: $((t1 - t0)) s; wgpu, two ranks on lavapipe: $((t2 - t1)) s"
python3 - "$work" <<'PY'
import json, sys
d = sys.argv[1]
loss = lambda r: [json.loads(l)['loss'] for l in open(f'{d}/{r}/metrics.jsonl') if '"type":"train"' in l]
cpu, gpu = loss('cpu'), loss('wgpu')
assert len(cpu) == len(gpu) == 8, (len(cpu), len(gpu))
gap = max(abs(a - b) / abs(b) for a, b in zip(gpu, cpu))
print(f'two wgpu ranks vs one CPU process: largest relative loss gap {gap:.1e} over {len(cpu)} steps')
sys.exit(0 if gap < 1e-5 else 1)
PY
