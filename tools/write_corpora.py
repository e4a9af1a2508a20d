#!/usr/bin/env python3
"""Writes one small corpus in the formats the large corpora ship in, each by its own writer,
and the token shards other training stacks keep, for tests/data.rs:

  DIR/docs.parquet       pyarrow (3 row groups, snappy), columns id, text
  DIR/docs.jsonl.gz      Python's gzip, JSON lines {"id", "text"}
  DIR/docs.jsonl.zst     the zstandard package, JSON lines
  DIR/docs.json          a JSON array of {"id", "text"}
  DIR/bad/…              damaged copies: a truncated parquet, a zstd frame with flipped bytes,
                         JSON lines whose third line is not JSON, a truncated nanoGPT shard
  DIR/expected.json      the byte tokens of the training and validation splits, computed here:
                         every 10th non-empty document is validation, each document's UTF-8
                         bytes followed by "\\n\\n" (10, 10)
  DIR/nanogpt/docs_{train,val}_00000{0,1}.bin   modded-nanogpt's write_datafile (uint16)
  DIR/npy/{train,val}_{0,1}.npy                 np.save, uint16
  DIR/memmap/{train,val}_{0,1}.npy              np.memmap, uint32 (OLMo-core's layout)

Usage: write_corpora.py DIR [DOCS]
"""

import gzip
import json
import os
import random
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

WORDS = "the report east district river budget école naïve 中文 growth union state law court".split()


def documents(n):
    rng = random.Random(0)
    docs = []
    for i in range(n):
        if i == 7:
            docs.append("")  # an empty document: skipped, not counted
            continue
        k = rng.randint(5, 120)
        docs.append(" ".join(rng.choice(WORDS) for _ in range(k)) + f" ({i}).")
    return docs


def expected(docs):
    train, val, kept = [], [], 0
    for d in docs:
        if not d.strip():
            continue
        kept += 1
        toks = list(d.encode("utf-8")) + [10, 10]
        (val if kept % 10 == 0 else train).extend(toks)
    return train, val


def write_datafile(filename, toks):
    """modded-nanogpt's data/fineweb.py writer: 256 int32 header (magic, version, count),
    then the tokens as uint16."""
    header = np.zeros(256, dtype=np.int32)
    header[0] = 20240520
    header[1] = 1
    header[2] = len(toks)
    toks_np = np.array(toks, dtype=np.uint16)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())


def halves(toks):
    h = len(toks) // 2
    return [toks[:h], toks[h:]]


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    for d in ["bad", "nanogpt", "npy", "memmap"]:
        os.makedirs(os.path.join(out, d), exist_ok=True)
    docs = documents(n)
    records = [{"id": i, "text": t} for i, t in enumerate(docs)]
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    pq.write_table(pa.table({"id": list(range(n)), "text": docs}), os.path.join(out, "docs.parquet"),
                   row_group_size=n // 3 + 1)
    with gzip.open(os.path.join(out, "docs.jsonl.gz"), "wb") as f:
        f.write(lines)
    zst = zstandard.ZstdCompressor().compress(lines)
    with open(os.path.join(out, "docs.jsonl.zst"), "wb") as f:
        f.write(zst)
    with open(os.path.join(out, "docs.json"), "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)

    parquet = open(os.path.join(out, "docs.parquet"), "rb").read()
    open(os.path.join(out, "bad", "truncated.parquet"), "wb").write(parquet[: len(parquet) // 2])
    broken = bytearray(zst)
    for i in range(len(broken) // 2, len(broken) // 2 + 16):
        broken[i] ^= 0xFF
    open(os.path.join(out, "bad", "corrupt.jsonl.zst"), "wb").write(bytes(broken))
    bad_lines = lines.split(b"\n")
    bad_lines[2] = b'{"id": 2, "text": "unterminated'
    open(os.path.join(out, "bad", "badline.jsonl"), "wb").write(b"\n".join(bad_lines))

    train, val = expected(docs)
    json.dump({"train": train, "val": val}, open(os.path.join(out, "expected.json"), "w"))
    for split, toks in [("train", train), ("val", val)]:
        for k, part in enumerate(halves(toks)):
            write_datafile(os.path.join(out, "nanogpt", f"docs_{split}_{k:06d}.bin"), part)
            np.save(os.path.join(out, "npy", f"{split}_{k}.npy"), np.array(part, dtype=np.uint16))
            m = np.memmap(os.path.join(out, "memmap", f"{split}_{k}.npy"), mode="w+", dtype=np.uint32,
                          shape=(len(part),))
            m[:] = part
            m.flush()
    shard = open(os.path.join(out, "nanogpt", "docs_train_000000.bin"), "rb").read()
    open(os.path.join(out, "bad", "cut_train_000000.bin"), "wb").write(shard[:-7])


if __name__ == "__main__":
    main()
