#!/usr/bin/env python3
"""Serving latency of two normlab binaries on one run, in interleaved rounds.

Each round starts `BEFORE serve` and then `AFTER serve` as their own processes on 127.0.0.1
and measures each with `AFTER bench serve RUN --url ...` (the same client and the same
loads for both); the table gives, per load and client count, the median over the rounds
(these machines drift by ±15 % within a minute, so one measurement each is not a comparison).
The loglik load is left out for a server that refuses `echo` (shown as refused).

    python3 tools/serve_rounds.py --before OLD/normlab --after target/release/normlab \
        --run RUN --rounds 3 --out DIR [--loads fixed,mixed,loglik]

Writes DIR/{before,after}-R.json (bench::serve::ServeBench) and DIR/table.md.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port, proc, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"error: the server exited with {proc.returncode} before answering")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit("error: the server did not answer /health within 120 s")


def echoes(port):
    """Whether the server scores prompts (`echo`), which the loglik load needs."""
    body = json.dumps({"prompt": "a b", "max_tokens": 0, "echo": True, "logprobs": 1}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30).read()
        return True
    except urllib.error.HTTPError:
        return False


def measure(a, server_bin, label, rnd):
    """One server, one bench; returns the path written, or None if the bench failed."""
    port = free_port()
    # The queue holds every row 64 clients can send (a log-likelihood request is four rows).
    server = subprocess.Popen(
        [server_bin, "serve", "--checkpoint", a.run, "--port", str(port), "--queue", "512"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, server)
        loads = [x for x in a.loads.split(",") if x != "loglik" or echoes(port)]
        out = os.path.join(a.out, f"{label}-{rnd}.json")
        bench = subprocess.run(
            [a.after, "bench", "serve", a.run, "--url", f"http://127.0.0.1:{port}",
             "--loads", ",".join(loads), "--clients", a.clients, "--requests", str(a.requests),
             "--out", out], capture_output=True, text=True)
        failed = bench.returncode != 0
        said = (bench.stderr.strip().splitlines() or ["no message"])[-1] if failed else "ok"
        print(f"{label} round {rnd} ({','.join(loads)}): {said}")
        return None if failed else out
    finally:
        server.terminate()
        server.wait()


def levels(paths):
    by_key = {}
    for path in paths:
        for lv in json.load(open(path))["levels"]:
            by_key.setdefault((lv["load"], lv["clients"]), []).append(lv)
    return by_key


def table(before, after):
    cell = lambda lvs, k, p: f"{statistics.median(x[k] for x in lvs):.{p}f}" if lvs else "refused"
    head = ("| load | clients | p50 ms | p95 ms | p99 ms | tokens/s | prompt tokens/s "
            "| before: p50 ms | p95 ms | tokens/s |\n|---|---|---|---|---|---|---|---|---|---|\n")
    order = {"fixed": 0, "mixed": 1, "loglik": 2}
    rows = []
    for key in sorted(after, key=lambda k: (order.get(k[0], 9), k[1])):
        a, b = after[key], before.get(key, [])
        rows.append(f"| {key[0]} | {key[1]} | {cell(a, 'p50_ms', 1)} | {cell(a, 'p95_ms', 1)} "
                    f"| {cell(a, 'p99_ms', 1)} | {cell(a, 'tokens_per_s', 0)} "
                    f"| {cell(a, 'prompt_tokens_per_s', 0)} | {cell(b, 'p50_ms', 1)} "
                    f"| {cell(b, 'p95_ms', 1)} | {cell(b, 'tokens_per_s', 0)} |")
    return head + "\n".join(rows) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--loads", default="fixed,mixed,loglik")
    p.add_argument("--clients", default="1,4,16,64")
    p.add_argument("--requests", type=int, default=200)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    got = {"before": [], "after": []}
    for rnd in range(1, a.rounds + 1):
        for label, binary in (("before", a.before), ("after", a.after)):
            path = measure(a, binary, label, rnd)
            if path:
                got[label].append(path)
    text = table(levels(got["before"]), levels(got["after"]))
    text += f"\nmedians over {len(got['after'])} rounds (after) and {len(got['before'])} (before)\n"
    open(os.path.join(a.out, "table.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
