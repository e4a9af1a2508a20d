#!/usr/bin/env python3
"""The corpus `normlab bench data` tokenizes: documents made of the State of the Union
addresses' sentences (the built-in corpus, unpacked by `normlab data fetch`), drawn with a
seeded generator: 1-12 paragraphs of 3-8 sentences (about 4 KB a document, near FineWeb's
mean), until the text reaches the size asked for; written by
pyarrow as parquet (row groups of 10,000 documents, snappy) and by the zstandard package as
JSON lines (level 3), the layouts of FineWeb and SlimPajama.

Usage: make_data_bench_corpus.py SOTU_DIR OUT_DIR GB
Writes OUT_DIR/corpus.parquet, OUT_DIR/corpus.jsonl.zst and OUT_DIR/corpus.json (the sizes)."""

import glob
import json
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard


def sentences(sotu):
    out = []
    for f in sorted(glob.glob(os.path.join(sotu, "*.txt"))):
        text = open(f, encoding="utf-8").read()
        out.extend(s.strip() + "." for s in text.split(". ") if len(s.strip()) > 20)
    return out


def document(rng, units):
    paras = [" ".join(rng.choice(units) for _ in range(rng.randint(3, 8))) for _ in range(rng.randint(1, 12))]
    return "\n\n".join(paras)


def main():
    sotu, out, gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    units = sentences(sotu)
    rng = random.Random(1234)
    target = int(gb * 1e9)
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    pw = pq.ParquetWriter(os.path.join(out, "corpus.parquet"), schema, compression="snappy")
    zf = open(os.path.join(out, "corpus.jsonl.zst"), "wb")
    zw = zstandard.ZstdCompressor(level=3).stream_writer(zf)
    total, n, batch = 0, 0, []
    while total < target:
        doc = document(rng, units)
        batch.append(doc)
        total += len(doc.encode("utf-8"))
        if len(batch) == 10000 or total >= target:
            ids = list(range(n, n + len(batch)))
            pw.write_table(pa.table({"id": ids, "text": batch}, schema=schema))
            zw.write("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, batch)).encode())
            n += len(batch)
            batch = []
    pw.close()
    zw.close()
    json.dump({"documents": n, "text_bytes": total}, open(os.path.join(out, "corpus.json"), "w"))
    print(f"{n} documents, {total / 1e9:.3f} GB of text")


if __name__ == "__main__":
    main()
