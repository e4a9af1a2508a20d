"""The device's ceilings through PyTorch, for `normlab bench profile`: one n x n x n matrix
product in the compute type (cuBLAS on CUDA; TF32 allowed in f32, as burn's autotuner promotes
f32 to TF32) and one elementwise pass x += 1 over `--copy-len` f32 values (read once, written once, in
place). Each is the median of `--reps` timed calls after two untimed ones, the device
synchronised around each call. Prints one JSON line: {"gemm_tflops", "copy_gbs", ...}.
"""
import argparse
import json
import statistics
import time

import torch


def timed(fn, reps, sync):
    for _ in range(2):
        fn()
        sync()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--gemm-n", type=int, default=4096)
    ap.add_argument("--copy-len", type=int, default=1 << 28)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "auto":  # CUDA where PyTorch sees it, else the CPU (beside lavapipe)
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    n = a.gemm_n
    x, y = torch.randn(n, n, device=dev, dtype=dt), torch.randn(n, n, device=dev, dtype=dt)
    gemm = timed(lambda: torch.matmul(x, y), a.reps, sync)
    del x, y
    v = torch.randn(a.copy_len, device=dev, dtype=torch.float32)
    copy = timed(lambda: v.add_(1.0), a.reps, sync)
    name = torch.cuda.get_device_name(dev) if cuda else "cpu"
    print(json.dumps({
        "gemm_tflops": 2.0 * n ** 3 / gemm / 1e12,
        "copy_gbs": 8.0 * a.copy_len / copy / 1e9,
        "device_name": name,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
