#!/usr/bin/env python3
"""Loads a normlab run's weights with PyTorch's safetensors loader and re-computes its
validation loss with the independent PyTorch model of make_reference_fixtures.py (float64).

The number must match `normlab perplexity --checkpoint RUN` (same fixed validation windows), which
shows the checkpoint is usable from PyTorch with the documented names and layouts.

    ~/.venvs/torchref/bin/python tools/check_checkpoint.py runs/default
Works for runs whose recipe is a preset name (custom recipe tables are not re-implemented here).
"""
import json
import os
import sys
import tomllib

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(__file__))
import make_reference_fixtures as ref  # noqa: E402


def tokens(path):
    raw = open(path, "rb").read()
    assert raw[:8] == b"NLTOK001", "not a normlab token file"
    width = int.from_bytes(raw[8:12], "little")
    n = int.from_bytes(raw[16:24], "little")
    return np.frombuffer(raw[24:24 + n * width], dtype=np.uint16 if width == 2 else np.uint32).astype(np.int64)


def main(run):
    cfg = tomllib.load(open(os.path.join(run, "config.toml"), "rb"))
    info = json.load(open(os.path.join(run, "run.json")))
    m, t = cfg["model"], cfg["train"]
    assert isinstance(m["recipe"], str), "this check handles preset recipes only"
    d, h = m["d_model"], m["n_heads"]
    ref.V, ref.D, ref.H, ref.L, ref.HD = m["vocab_size"], d, h, m["n_layers"], d // h
    ref.EPS, ref.ROPE_BASE, ref.T = m["norm_eps"], m["rope_base"], t["seq_len"]
    weights = os.path.join(run, "model.safetensors")
    P = {k: v.double() for k, v in load_file(weights).items()}
    rec = ref.recipe(m["recipe"])
    val = tokens(info["data"]["val_token_file"])
    seq, count = t["seq_len"], cfg["run"]["eval_windows"]
    last = len(val) - seq - 1
    count = max(1, min(count, last // seq + 1))
    starts = [0] if count == 1 else [i * last // (count - 1) for i in range(count)]
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(starts), 16):
            chunk = starts[i:i + 16]
            x = torch.tensor(np.stack([val[s:s + seq] for s in chunk]))
            y = torch.tensor(np.stack([val[s + 1:s + seq + 1] for s in chunk]))
            logits, _ = ref.forward(P, x, rec)
            total += F.cross_entropy(logits.reshape(-1, ref.V), y.reshape(-1), reduction="sum").item()
            n += y.numel()
    print(f"{weights}: {len(P)} tensors; PyTorch float64 val_loss {total / n:.4f} over {len(starts)} windows")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
