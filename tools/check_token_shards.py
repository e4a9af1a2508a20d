#!/usr/bin/env python3
"""Reads the shards `normlab data prepare` wrote with numpy, as the other tools read them, and
compares them with the tokens tools/write_corpora.py computed (expected.json).

  --format npy:      np.load of every train-*.npy / val-*.npy, concatenated in name order
  --format nanogpt:  modded-nanogpt's _load_data_shard (header magic 20240520, version 1,
                     token count, uint16 tokens after the 1024-byte header)

Usage: check_token_shards.py PREPARED_DIR EXPECTED_JSON --format npy|nanogpt
Prints "ok <train tokens> <val tokens>" or exits 1 naming the first difference."""

import glob
import json
import os
import sys

import numpy as np


def load_nanogpt(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520, f"{path}: magic {header[0]}"
    assert header[1] == 1, f"{path}: version {header[1]}"
    ntok = int(header[2])
    with open(path, "rb") as f:
        f.seek(256 * 4)
        toks = np.frombuffer(f.read(), dtype=np.uint16)
    assert len(toks) == ntok, f"{path}: {len(toks)} tokens, header says {ntok}"
    return toks


def main():
    out, expected, fmt = sys.argv[1], sys.argv[2], sys.argv[4]
    want = json.load(open(expected))
    ext = {"npy": "npy", "nanogpt": "bin"}[fmt]
    got = {}
    for split in ["train", "val"]:
        files = sorted(glob.glob(os.path.join(out, f"{split}-*.{ext}")))
        arrays = [np.load(f) if fmt == "npy" else load_nanogpt(f) for f in files]
        got[split] = np.concatenate(arrays).astype(np.int64).tolist()
        if got[split] != want[split]:
            n = next((i for i, (a, b) in enumerate(zip(got[split], want[split])) if a != b), None)
            print(f"{split}: {len(got[split])} tokens vs {len(want[split])} expected; first difference at {n}")
            sys.exit(1)
    print("ok", len(got["train"]), len(got["val"]))


if __name__ == "__main__":
    main()
