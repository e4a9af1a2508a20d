#!/usr/bin/env python3
"""Reads runs back from an MLflow tracking server with MLflow's own client (PyPI `mlflow`)
and prints them as JSON: for each run id given, its status, name, tags, params, every
metric's full history (step, value) and its artifact paths; with --children, the runs whose
`mlflow.parentRunId` is the given run. The tests compare this against the run directories.

    python3 tools/read_mlflow.py http://127.0.0.1:5000 RUN_ID [--children]
"""
import json
import sys

from mlflow import MlflowClient


def artifacts(c, run_id, path=None):
    out = []
    for a in c.list_artifacts(run_id, path):
        out.extend(artifacts(c, run_id, a.path) if a.is_dir else [a.path])
    return out


def describe(c, run_id):
    r = c.get_run(run_id)
    return {
        "run_id": run_id,
        "status": r.info.status,
        "name": r.info.run_name,
        "experiment_id": r.info.experiment_id,
        "tags": dict(r.data.tags),
        "params": dict(r.data.params),
        "metrics": {k: [[m.step, m.value] for m in c.get_metric_history(run_id, k)] for k in r.data.metrics},
        "artifacts": sorted(artifacts(c, run_id)),
    }


def main(url, run_id, children):
    c = MlflowClient(url)
    out = describe(c, run_id)
    if children:
        found = c.search_runs([out["experiment_id"]], filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
        out["children"] = sorted((describe(c, r.info.run_id) for r in found), key=lambda d: d["name"])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--children" in sys.argv[3:])
