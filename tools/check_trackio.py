#!/usr/bin/env python3
"""Brings a normlab run's TensorBoard logs into Trackio with Trackio's own importer
(`trackio.import_tf_events`, PyPI `trackio[tensorboard]`; local, no account) and checks what
Trackio stored against the run's metrics.jsonl: every training step's loss and the
SpikeScore, as Trackio's SQLite storage returns them.

    TRACKIO_DIR=/tmp/trackio python3 tools/check_trackio.py RUN PROJECT
"""
import json
import os
import shutil
import sys
import tempfile

import trackio
from trackio.sqlite_storage import SQLiteStorage


def main(run, project):
    name = os.path.basename(os.path.abspath(run))
    with tempfile.TemporaryDirectory() as logs:
        # One subdirectory per run: the importer makes each a Trackio run.
        shutil.copytree(os.path.join(run, "tb"), os.path.join(logs, name))
        trackio.import_tf_events(logs, project=project)
    train = {r["step"]: r for r in map(json.loads, open(os.path.join(run, "metrics.jsonl"))) if r["type"] == "train"}
    for tag, field in [("train/loss", "loss"), ("spike/SpikeScore (total)", "spike_score")]:
        got = {v["step"]: v["value"] for v in SQLiteStorage.get_metric_values(project, name, tag)}
        want = {s: r[field] for s, r in train.items() if r.get(field) is not None}
        assert got.keys() == want.keys(), (tag, len(got), len(want))
        # TensorBoard stores f32.
        worst = max(abs(got[s] - want[s]) / max(abs(want[s]), 1e-30) for s in want)
        assert worst < 1e-6, (tag, worst)
        print(f"{tag}: {len(got)} steps in Trackio, max relative |Trackio − metrics.jsonl| = {worst:.1e}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
