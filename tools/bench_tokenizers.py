#!/usr/bin/env python3
"""The Hugging Face `tokenizers` package tokenizing a corpus file, the reference beside
`normlab bench data`: the documents are read (pyarrow for parquet, the zstandard package and
json for .jsonl.zst) and encoded with `Tokenizer.encode_batch` (add_special_tokens=False) in
batches of 1,000, on RAYON_RS_NUM_THREADS threads (the package's own thread pool).

Prints one JSON object: documents, text_bytes, tokens, read_s (reading and decoding the file),
encode_s (encode_batch alone), total_s, max_rss_bytes.

Usage: RAYON_RS_NUM_THREADS=N bench_tokenizers.py FILE TOKENIZER_JSON [TEXT_FIELD]"""

import io
import json
import resource
import sys
import time

import tokenizers


def batches(path, field, size=1000):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        for b in f.iter_batches(batch_size=size, columns=[field]):
            yield b.column(0).to_pylist()
    else:
        import zstandard

        with open(path, "rb") as fh:
            reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(fh), encoding="utf-8")
            batch = []
            for line in reader:
                if line.strip():
                    batch.append(json.loads(line)[field])
                if len(batch) == size:
                    yield batch
                    batch = []
            if batch:
                yield batch


def main():
    path, tok_path = sys.argv[1], sys.argv[2]
    field = sys.argv[3] if len(sys.argv) > 3 else "text"
    tok = tokenizers.Tokenizer.from_file(tok_path)
    docs = text_bytes = tokens = 0
    read_s = encode_s = 0.0
    start = time.perf_counter()
    it = batches(path, field)
    while True:
        t0 = time.perf_counter()
        b = next(it, None)
        t1 = time.perf_counter()
        read_s += t1 - t0
        if b is None:
            break
        b = [t for t in b if t and t.strip()]
        enc = tok.encode_batch(b, add_special_tokens=False)
        encode_s += time.perf_counter() - t1
        docs += len(b)
        text_bytes += sum(len(t.encode("utf-8")) for t in b)
        tokens += sum(len(e.ids) for e in enc)
    total = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"documents": docs, "text_bytes": text_bytes, "tokens": tokens, "read_s": read_s,
                      "encode_s": encode_s, "total_s": total, "max_rss_bytes": rss}))


if __name__ == "__main__":
    main()
