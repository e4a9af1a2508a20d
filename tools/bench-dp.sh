#!/usr/bin/env bash
# Data parallelism on this machine, in one invocation (writes bench/dp.json and
# bench/allreduce.json):
#   1. the gradient all-reduce over 2 ranks, 4 KiB to 64 MiB, beside one blocking
#      MPI_Allreduce (`mpirun -np 2 normlab bench allreduce`);
#   2. one train step of a 4-layer d = 256 model (seq 128, batch 16 in two micro-batches of 8,
#      3.3 M parameters) as one process with 1 thread, one process with 2 threads, and 2 ranks
#      with 1 thread each; ROUNDS rounds (default 3) interleaved, each the median step time
#      over steps 6–40 of a run, reported as the median over rounds.
# Needs a build with --features mpi (target/release/normlab) and Open MPI's mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/normlab
rounds=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl_vader_single_copy_mechanism none -np 2)
RAYON_NUM_THREADS=1 "${mpi[@]}" "$bin" bench allreduce --warmup 3 --steps 21 --out bench/allreduce.json
python3 -c "open('$work/text.txt','w').write(' '.join(f'Item {i % 97} of the report concerns the {[\"north\",\"south\",\"east\",\"west\"][i % 4]} district.' for i in range(20000)))"
args=(train --quiet --set model.d_model=256 --set model.n_layers=4 --set model.n_heads=4 --set train.seq_len=128
    --set train.batch_size=16 --set train.micro_batch_size=8 --set train.steps=40 --set run.eval_every=1000
    --set probe.every=100000 --set run.checkpoint_every=0 --set "data.corpus=\"$work/text.txt\""
    --set "data.cache_dir=\"$work/cache\"")
for r in $(seq "$rounds"); do
    RAYON_NUM_THREADS=1 "$bin" "${args[@]}" --set "run.dir=\"$work/one-thread-$r\"" 2>/dev/null
    RAYON_NUM_THREADS=2 "$bin" "${args[@]}" --set "run.dir=\"$work/two-threads-$r\"" 2>/dev/null
    RAYON_NUM_THREADS=1 "${mpi[@]}" "$bin" "${args[@]}" --set "run.dir=\"$work/two-ranks-$r\"" 2>/dev/null
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys, platform, os
work, rounds = sys.argv[1], int(sys.argv[2])
def step_ms(run):
    recs = [json.loads(l) for l in open(f'{work}/{run}/metrics.jsonl') if '"type":"train"' in l]
    return statistics.median(r['tokens'] / r['step'] / r['tokens_per_s'] * 1e3 for r in recs if r['step'] > 5)
res = {}
for kind in ['one-thread', 'two-threads', 'two-ranks']:
    per = [step_ms(f'{kind}-{r}') for r in range(1, rounds + 1)]
    res[kind] = {'step_ms_median': statistics.median(per), 'step_ms_rounds': per}
base = res['one-thread']['step_ms_median']
for k in res:
    res[k]['speedup_vs_one_thread'] = base / res[k]['step_ms_median']
out = {'machine': {'cpus': os.cpu_count(), 'processor': platform.processor() or platform.machine()},
       'model': 'd 256, 4 layers, seq 128, batch 16 = 2 micro-batches of 8, pre', 'rounds': rounds, 'results': res,
       'allreduce': json.load(open('bench/allreduce.json'))}
json.dump(out, open('bench/dp.json', 'w'), indent=1)
for k, v in res.items():
    print(f"{k:12} {v['step_ms_median']:8.1f} ms/step  ×{v['speedup_vs_one_thread']:.2f} vs one thread  rounds {[round(x, 1) for x in v['step_ms_rounds']]}")
PY
