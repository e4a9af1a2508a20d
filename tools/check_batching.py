"""Batched serving against solo answers, through `normlab serve` over HTTP:

1. the minimal case: a 60-token prompt and `{"prompt": "We must", "max_tokens": 40,
   "temperature": 0}` sent together, TRIALS times; the short request's text must equal its
   solo text every time;
2. twelve greedy completions (prompts of 2 to 60 tokens, `max_tokens` 40) sent concurrently,
   ROUNDS rounds, against the same requests sent one at a time.

Prints one JSON summary (answers that differ from their solo text, of how many); exit status 1
when any differs.

    python3 tools/check_batching.py --run RUN [--normlab target/release/normlab] [--trials 20]
"""

import argparse
import json
import os
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_layouts as tl  # noqa: E402
from check_lm_eval import serve  # noqa: E402


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["text"]


def tokens(url, text):
    req = urllib.request.Request(url + "/tokenize", json.dumps({"prompt": text}).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["tokens"]


def together(url, bodies):
    """Sends every body at once (one thread each); returns the texts in order."""
    out = [None] * len(bodies)
    gate = threading.Barrier(len(bodies))

    def send(i):
        gate.wait()
        out[i] = post(url, bodies[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def prompt_of(url, words, n_tokens):
    """The longest start of `words` of at most `n_tokens` tokens, as token ids."""
    ids = tokens(url, " ".join(words))
    return ids[:n_tokens]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--normlab", default="target/release/normlab")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sents = tl.held_out_sentences(tl.corpus_tar(repo))
    long_words = [w for s in sents[:40] for w in s]
    server, url = serve(a.normlab, a.run)
    try:
        greedy = {"max_tokens": 40, "temperature": 0}
        long = {"prompt": prompt_of(url, long_words, 60), **greedy}
        short = {"prompt": "We must", **greedy}
        solo = post(url, short)
        minimal = sum(together(url, [long, short])[1] != solo for _ in range(a.trials))
        bodies = [{"prompt": prompt_of(url, sents[50 + i], 2 + i * 58 // 11), **greedy} for i in range(12)]
        alone = [post(url, b) for b in bodies]
        differing = sum(x != y for _ in range(a.rounds) for x, y in zip(together(url, bodies), alone))
    finally:
        server.terminate()
        server.wait()
    summary = {"minimal_case": {"trials": a.trials, "short_differs_from_solo": minimal},
               "twelve_concurrent": {"answers": 12 * a.rounds, "differ_from_sequential": differing,
                                     "prompt_tokens": [len(b["prompt"]) for b in bodies]}}
    print(json.dumps(summary, indent=1))
    sys.exit(1 if minimal or differing else 0)


if __name__ == "__main__":
    main()
