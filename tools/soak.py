"""A soak of `normlab serve`: 16 clients on 127.0.0.1 for a bounded time (and at most a
bounded number of requests), each sending one kind of request over and over: completions,
streamed completions read whole, streamed completions dropped after their first chunk,
log-likelihood requests (echo, logprobs, four prompts), bad requests (each a known 4xx), and,
for a pairs run, `/v1/normalize`. The server's RSS is sampled every 5 s.

Prints one JSON summary and exits 1 unless: no answer other than a 503 was an unexpected
error, the RSS after warm-up stayed within 5 % of its median, and the server's `/metrics`
counters equal the clients' counts (requests, errors).

    tools/soak.sh RUN [SECONDS] [MAX_REQUESTS]
"""

import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

BAD = [
    (b"{\"prompt\": ", 400),
    (b"not json", 400),
    (b"{\"prompt\": \"a\", \"suffix\": \"b\"}", 400),
    (b"{\"prompt\": \"a\", \"max_tokens\": 100000}", 400),
    (b"{\"prompt\": [1, -2]}", 400),
    (b"{\"prompt\": \"a\", \"logprobs\": 99}", 400),
]


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.expected_errors = 0
        self.busy = 0
        self.unexpected = []
        self.by_kind = {}

    def add(self, kind, status, expected):
        with self.lock:
            self.requests += 1
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            if status == 503:
                self.busy += 1
            elif status != expected:
                self.unexpected.append((kind, status))
            elif status >= 400:
                self.expected_errors += 1


def post(port, path, body, stream_first_chunk=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    if stream_first_chunk and r.status == 200:
        r.read(64)  # the first bytes of the stream, then the client goes away
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        return r.status
    r.read()
    c.close()
    return r.status


def client(i, port, pairs, deadline, budget, counts, rng):
    kinds = ["complete", "stream", "drop", "loglik", "bad"] + (["normalize"] if pairs else ["complete"])
    kind = kinds[i % len(kinds)]
    words = "the people of the united states congress nation government law year war peace".split()
    while time.time() < deadline and budget():
        text = " ".join(rng.choice(words) for _ in range(rng.randint(2, 20)))
        if kind == "complete":
            s = post(port, "/v1/completions", json.dumps({"prompt": text, "max_tokens": rng.randint(1, 24)}))
            counts.add(kind, s, 200)
        elif kind in ("stream", "drop"):
            body = json.dumps({"prompt": text, "max_tokens": 24, "stream": True})
            counts.add(kind, post(port, "/v1/completions", body, stream_first_chunk=kind == "drop"), 200)
        elif kind == "loglik":
            prompts = [text + " " + rng.choice(words) for _ in range(4)]
            body = json.dumps({"prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0})
            counts.add(kind, post(port, "/v1/completions", body), 200)
        elif kind == "bad":
            body, want = rng.choice(BAD)
            counts.add(kind, post(port, "/v1/completions", body), want)
        else:
            counts.add(kind, post(port, "/v1/normalize", json.dumps({"input": f"It weighs {rng.randint(1, 99)} kg."})), 200)


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l and not l.startswith("#")}


def main():
    exe, run = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 600
    max_requests = int(sys.argv[4]) if len(sys.argv) > 4 else 1_000_000
    server = subprocess.Popen([exe, "serve", "--checkpoint", run, "--host", "127.0.0.1", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = server.stdout.readline().decode()
    port = int(line.split("http://")[1].split(":")[1].split(":")[0])
    pairs = "/v1/normalize" in line
    counts, t0 = Counts(), time.time()
    deadline = t0 + seconds
    budget = lambda: counts.requests < max_requests
    threads = [threading.Thread(target=client, args=(i, port, pairs, deadline, budget, counts, random.Random(i)))
               for i in range(16)]
    for t in threads:
        t.start()
    samples, scrapes = [], 0
    while any(t.is_alive() for t in threads):
        samples.append((time.time() - t0, rss_kib(server.pid)))
        time.sleep(5)
    for t in threads:
        t.join()
    m = metrics(port)
    scrapes += 1
    server.terminate()
    server.wait(timeout=60)
    warm = [r for (s, r) in samples if s >= min(60, seconds / 5)] or [r for _, r in samples]
    median = statistics.median(warm)
    drift = max(abs(r - median) for r in warm) / median
    served = int(m.get("normlab_requests_total", -1)) - scrapes
    errors = int(m.get("normlab_request_errors_total", -1))
    summary = {
        "seconds": round(time.time() - t0, 1), "clients": 16, "requests": counts.requests, "by_kind": counts.by_kind,
        "unexpected_errors": counts.unexpected[:10], "busy_503": counts.busy,
        "rss_mib": {"first": samples[0][1] / 1024, "median_after_warmup": median / 1024,
                    "max_after_warmup": max(warm) / 1024, "max_drift": round(drift, 4)},
        "metrics": {"requests_total": served, "errors_total": errors, "clients_counted_errors": counts.expected_errors + counts.busy},
        "server_exit": server.returncode,
    }
    print(json.dumps(summary, indent=1))
    ok = (not counts.unexpected and drift <= 0.05 and served == counts.requests
          and errors == counts.expected_errors + counts.busy)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
