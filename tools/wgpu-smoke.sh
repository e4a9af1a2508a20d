#!/usr/bin/env bash
# The GPU code path on a software Vulkan device (lavapipe) against the CPU: the same tiny
# language-model run and pairs run (masked loss, padded batches, KV-cache decoding) on
# `run.device = cpu` (fused kernels) and the GPU device (composite ops), whose per-step training
# losses must agree within 1e-5 relative. tests/gpu.rs (in .ci/run) is the language-model half
# as a cargo test, in f32 and f16; this script adds the pairs run, in an optimised build (≈30
# min to build on 2 cores).
#   tools/wgpu-smoke.sh            # --features wgpu, run.device = wgpu
#   tools/wgpu-smoke.sh vulkan     # --features vulkan, run.device = vulkan (SPIR-V); Debian 12's
#                                  # lavapipe (Mesa 22.3) segfaults compiling cubek's matmul
#                                  # pipeline from SPIR-V, so this needs a newer Mesa or a GPU
# Installs mesa-vulkan-drivers when missing (Debian, root).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/lavapipe.sh
gpu="${1:-wgpu}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/$gpu}"
cargo build --release --features "$gpu"
bin="$CARGO_TARGET_DIR/release/normlab"
work=$(mktemp -d)
python3 - "$work" <<'PY'
import sys
w = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine']
d = sys.argv[1]
open(f'{d}/text.txt', 'w').write('Fellow citizens of the Senate and House of Representatives. ' * 400)
open(f'{d}/pairs.tsv', 'w').write(''.join(f'{i // 10} {i % 10}\t{w[i // 10]} {w[i % 10]}\n' for i in range(100)))
PY
common=(--quiet --force --set model.d_model=32 --set model.n_layers=2 --set model.n_heads=2 --set train.steps=20
    --set train.seq_len=32 --set run.eval_every=10 --set probe.every=10 --set "data.cache_dir=$work/cache")
lm=(--set "data.corpus=$work/text.txt" --set train.batch_size=4 --set run.eval_windows=2)
pairs=(--set data.task=pairs --set "data.corpus=$work/pairs.tsv" --set data.heldout=none --set train.batch_size=8
    --set train.micro_batch_size=4)
for dev in cpu "$gpu"; do
    "$bin" train --set "run.dir=$work/lm-$dev" --set "run.device=$dev" "${common[@]}" "${lm[@]}"
    "$bin" train --set "run.dir=$work/pairs-$dev" --set "run.device=$dev" "${common[@]}" "${pairs[@]}"
done
python3 - "$work" "$gpu" <<'PY'
import json, sys
d, gpu = sys.argv[1], sys.argv[2]
def losses(run):
    return [r['loss'] for r in map(json.loads, open(f'{d}/{run}/metrics.jsonl')) if r['type'] == 'train']
for kind in ('lm', 'pairs'):
    a, b = losses(f'{kind}-cpu'), losses(f'{kind}-{gpu}')
    err = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    print(f'{kind}: {len(a)} steps, largest relative loss difference {gpu} vs cpu {err:.1e}')
    assert len(a) == len(b) == 20 and err < 1e-5, kind
PY
