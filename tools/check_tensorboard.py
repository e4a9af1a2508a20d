#!/usr/bin/env python3
"""Reads a normlab run's TensorBoard event files with TensorBoard's own loader (PyPI
`tensorboard`) and prints what it found, checking the values against probes.jsonl and
metrics.jsonl (and alerts.jsonl), and that the histograms are well formed. This is the check
that `tensorboard --logdir runs/` shows normlab's scalars and histograms.

    ~/.venvs/torchref/bin/pip install tensorboard
    ~/.venvs/torchref/bin/python tools/check_tensorboard.py runs/default
"""
import json
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(run):
    acc = EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0, "histograms": 0})
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
    hist_tags = acc.Tags()["histograms"]
    if hist_tags:
        grad = [t for t in hist_tags if t.startswith("hist/grad/")]
        x = [t for t in hist_tags if t.startswith("hist/x/")]
        h = acc.Histograms(x[0])
        # The histogram of X_1 at a probe step: its count is the probed batch's B*T*d (or the
        # 65,536 sampled), and its bucket counts add up to it.
        first = h[0].histogram_value
        assert sum(first.bucket) == first.num, (sum(first.bucket), first.num)
        assert first.min <= first.max and len(first.bucket_limit) == len(first.bucket)
        print(f"{len(grad)} gradient and {len(x)} hidden-state histogram tags; {x[0]} at steps "
              f"{[e.step for e in h]}: {int(first.num)} values in [{first.min:.3g}, {first.max:.3g}]")
    if "alert/grad_norm_ratio" in tags:
        ratio = acc.Scalars("alert/grad_norm_ratio")
        alerts = [json.loads(l) for l in open(os.path.join(run, "alerts.jsonl"))]
        active = {e.step for e in acc.Scalars("alert/active") if e.value == 1.0}
        assert active == {a["step"] for a in alerts}, (sorted(active), [a["step"] for a in alerts])
        print(f"alert/grad_norm_ratio: {len(ratio)} points; {len(alerts)} alerts, the same steps as alerts.jsonl")
    print("TensorBoard reads every scalar and histogram normlab wrote")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
