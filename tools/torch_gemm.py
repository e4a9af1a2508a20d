"""PyTorch twin of `normlab bench gemm`: times each matmul case it reads as JSON on stdin
({"threads", "warmup", "reps", "cases": [{"batch", "m", "k", "n", "ta", "tb", ...}]}) the way
normlab does (operands as transposed views where ta/tb, median of `reps` after `warmup`) and
prints one JSON line: {"torch": version, "threads": n, "ms": [median ms per case]}."""
import json
import statistics
import sys
import time

import torch


def operand(batch, rows, cols, t):
    x = torch.rand(batch, cols, rows) * 2 - 1 if t else torch.rand(batch, rows, cols) * 2 - 1
    return x.transpose(1, 2) if t else x


def time_case(c, warmup, reps):
    a = operand(c["batch"], c["m"], c["k"], c["ta"])
    b = operand(c["batch"], c["k"], c["n"], c["tb"])
    if c["batch"] == 1:
        a, b = a[0], b[0]
    for _ in range(warmup):
        torch.matmul(a, b)
    ms = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.matmul(a, b)
        ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms)


def main():
    spec = json.load(sys.stdin)
    torch.manual_seed(0)
    torch.set_num_threads(spec["threads"])
    ms = [time_case(c, spec["warmup"], spec["reps"]) for c in spec["cases"]]
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "ms": ms}))


if __name__ == "__main__":
    main()
