#!/usr/bin/env python3
"""Reads a normlab run's TensorBoard event files with TensorBoard's own loader (PyPI
`tensorboard`) and prints what it found, checking the values against probes.jsonl and
metrics.jsonl. This is the check that `tensorboard --logdir runs/` shows normlab's scalars.

    ~/.venvs/torchref/bin/pip install tensorboard
    ~/.venvs/torchref/bin/python tools/check_tensorboard.py runs/default
"""
import json
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(run):
    acc = EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    print(f"{len(tags)} scalar tags, e.g. {sorted(tags)[:5]}")
    metrics = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    train = {r["step"]: r for r in metrics if r["type"] == "train"}
    loss = acc.Scalars("train/loss")
    assert len(loss) == len(train), (len(loss), len(train))
    worst = max(abs(e.value - train[e.step]["loss"]) for e in loss)
    print(f"train/loss: {len(loss)} points, max |TensorBoard − metrics.jsonl| = {worst:.2e}")
    probes = [json.loads(l) for l in open(os.path.join(run, "probes.jsonl"))]
    z = acc.Scalars("hidden_var/z/l001")
    by_step = {p["step"]: p["sublayers"][0]["z"]["var"] for p in probes}
    worst = max(abs(e.value - by_step[e.step]) / max(abs(by_step[e.step]), 1e-30) for e in z)
    print(f"hidden_var/z/l001: {len(z)} points at steps {[e.step for e in z]}, max relative difference {worst:.2e}")
    assert worst < 1e-6
    print("TensorBoard reads every scalar normlab wrote")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
