"""lm-evaluation-harness against normlab: one trained run scored four ways on the same local
tasks, per item, against lm-eval's `hf` model at batch size 1 (the reference):

1. `lm_eval --model hf` on the run exported with `normlab export --hf` at batch size 8;
2. `lm_eval --model local-completions` through `normlab serve` (OpenAI completions with echo
   and logprobs; the server's /tokenize and /tokenizer_info as the remote tokenizer), at batch
   sizes 1 and 8;
3. `normlab evaluate` on the same task files (multiple-choice and cloze tasks).

Tasks, all made from held-out text of the built-in corpus (the validation addresses, never
trained on):
- the nine published layouts (tools/task_layouts.py: ARC-Easy, ARC-Challenge, HellaSwag,
  PIQA, SIQA, Winogrande, OpenBookQA, BoolQ, LAMBADA, MMLU), each lm-eval's own task YAML
  reading a local file, zero-shot and with --shots examples (LAMBADA zero-shot only);
- `normlab_mc`, a 4-way multiple choice in the generic JSON-lines form, and `normlab_gen`,
  `generate_until` on sentence starts (greedy, until "." or a newline).

Prints one JSON summary: per way and task, the accuracy, the largest per-item difference of
log-likelihood (absolute, and relative to max(1, |reference|)), the count of differing greedy
flags and of differing generations. Exit status 1 when a relative difference exceeds 1e-4 or
an answer differs.

    python3 -m venv ~/.venvs/nl && ~/.venvs/nl/bin/pip install "lm-eval[hf,api]==0.4.13" transformers torch pyarrow
    HF_DATASETS_OFFLINE=1 ~/.venvs/nl/bin/python tools/check_lm_eval.py --run RUN --normlab target/release/normlab
"""

import argparse
import glob
import json
import urllib.request
import os
import random
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_layouts as tl  # noqa: E402

TOLERANCE = 1e-4


def write_custom_tasks(tasks_dir, sentences, items, seed):
    """`normlab_mc` and `normlab_gen` (JSON lines) and their lm-eval YAML."""
    rng = random.Random(seed)
    pool = [" ".join(s) for s in sentences]
    rng.shuffle(pool)
    halves = [(" ".join(s.split()[: len(s.split()) // 2]), " ".join(s.split()[len(s.split()) // 2:])) for s in pool]
    mc, gen = [], []
    for i in range(items):
        ctx, true = halves[i]
        others = [halves[(i + 1 + k * 97) % len(halves)][1] for k in range(3)]
        answer = rng.randrange(4)
        mc.append({"context": ctx, "choices": others[:answer] + [true] + others[answer:], "answer": answer})
        gen.append({"context": ctx, "continuation": true})
    for name, rows in (("mc", mc), ("gen", gen)):
        with open(os.path.join(tasks_dir, f"{name}.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    common = "dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {path}\ntest_split: test\n"
    with open(os.path.join(tasks_dir, "normlab_mc.yaml"), "w") as f:
        f.write("task: normlab_mc\n" + common.format(path=os.path.join(tasks_dir, "mc.jsonl")) +
                "output_type: multiple_choice\ndoc_to_text: \"{{context}}\"\ndoc_to_choice: \"{{choices}}\"\n"
                "doc_to_target: \"{{answer}}\"\ntarget_delimiter: \" \"\n"
                "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    with open(os.path.join(tasks_dir, "normlab_gen.yaml"), "w") as f:
        f.write("task: normlab_gen\n" + common.format(path=os.path.join(tasks_dir, "gen.jsonl")) +
                "output_type: generate_until\ndoc_to_text: \"{{context}}\"\ndoc_to_target: \"{{continuation}}\"\n"
                "generation_kwargs:\n  until: [\".\", \"\\n\"]\n  max_gen_toks: 24\n  do_sample: false\n"
                "metric_list:\n  - metric: exact_match\n")
    return os.path.join(tasks_dir, "mc.jsonl")


def write_normlab_configs(work, files, mc, shots):
    """`[eval]` files for `normlab evaluate --config`: the layouts zero-shot (and the generic
    `normlab_mc`), and with `shots` examples."""
    paths = {}
    for k in (0, shots):
        rows = []
        for layout in tl.LAYOUTS:
            if k and layout == "lambada_openai":
                continue
            row = f'{{ name = "{layout}", path = "{files[layout]["test"]}", num_fewshot = {k}'
            if layout == "mmlu" and k:
                row += f', fewshot_path = "{files[layout]["dev"]}"'
            rows.append(row + " }")
        if k == 0:
            rows.append(f'{{ name = "normlab_mc", layout = "multiple_choice", path = "{mc}" }}')
        paths[k] = os.path.join(work, f"normlab-{k}shot.toml")
        with open(paths[k], "w") as f:
            f.write("[eval]\ntasks = [\n  " + ",\n  ".join(rows) + ",\n]\n")
    return paths


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def lm_eval(args, out, tasks, include, reuse=False):
    if reuse and os.path.isdir(out):
        return None
    cmd = [sys.executable, "-m", "lm_eval", *args, "--tasks", ",".join(tasks), "--include_path", include,
           "--log_samples", "--output_path", out, "--seed", "1234"]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lm_eval failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    return time.time() - t0


def samples(out, task):
    path = sorted(glob.glob(os.path.join(out, "**", f"samples_{task}_*.jsonl"), recursive=True))[-1]
    return {r["doc_id"]: r for r in map(json.loads, open(path))}


def flag(x):
    """A greedy flag as lm-eval's samples log writes it (a bool, or its text)."""
    return x if isinstance(x, bool) else str(x) == "True"


def rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


class Diff:
    """The largest differences of one way against the reference on one task."""

    def __init__(self):
        self.abs = self.rel = 0.0
        self.flags = self.generations = self.items = self.correct = 0

    def lls(self, ref, got):
        for (a, ga), (b, gb) in zip(ref, got):
            self.abs = max(self.abs, abs(float(a) - float(b)))
            self.rel = max(self.rel, rel(float(b), float(a)))
            self.flags += flag(ga) != flag(gb)

    def summary(self):
        return {"items": self.items, "acc": self.correct / max(1, self.items), "max_abs_loglik_diff": self.abs,
                "max_rel_loglik_diff": self.rel, "greedy_flags_differing": self.flags,
                "generations_differing": self.generations}


def compare_lm_eval(ref_dir, other_dir, task):
    ref, got = samples(ref_dir, task), samples(other_dir, task)
    d = Diff()
    for k, r in ref.items():
        d.items += 1
        if "filtered_resps" in r and isinstance(r["filtered_resps"][0], str):
            d.generations += r["filtered_resps"] != got[k]["filtered_resps"]
            continue
        d.lls([x[0] for x in r["resps"]], [x[0] for x in got[k]["resps"]])
        d.correct += got[k].get("acc", 0)
    return d.summary()


def lm_eval_task(layout, shots, subject=None):
    return f"nl_mmlu_{subject}_{shots}shot" if layout == "mmlu" else tl.task_name(layout, shots)


def compare_normlab(ref_dir, evaluation, shots):
    """normlab evaluate's items against lm-eval's, task by task (MMLU subject by subject)."""
    out = {}
    for r in json.load(open(evaluation))["results"]:
        layout = "multiple_choice" if r["task"] == "normlab_mc" else r["task"]
        by_task = {}
        for item in r["items"]:
            name = "normlab_mc" if layout == "multiple_choice" else lm_eval_task(layout, shots, item.get("category"))
            by_task.setdefault(name, []).append(item)
        for name, items in by_task.items():
            ref = samples(ref_dir, name)
            d = Diff()
            for k, item in enumerate(items):
                d.items += 1
                d.lls([x[0] for x in ref[k]["resps"]], list(zip(item["lls"], item["greedy"])))
                if item.get("answer") is not None:
                    d.correct += max(range(len(item["lls"])), key=lambda i: item["lls"][i]) == item["answer"]
                else:
                    d.correct += all(item["greedy"])
            out[name] = d.summary()
    return out


def serve(normlab, run):
    port = free_port()
    server = subprocess.Popen([normlab, "serve", "--checkpoint", run, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    server.stdout.readline()
    url = f"http://127.0.0.1:{port}"
    # The name requests must give: the one model the server lists (vLLM's rule).
    with urllib.request.urlopen(f"{url}/v1/models") as r:
        model = json.load(r)["data"][0]["id"]
    return server, url, model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--normlab", default="target/release/normlab")
    p.add_argument("--work", default="/tmp/normlab-lm-eval")
    p.add_argument("--items", type=int, default=100, help="items per task file")
    p.add_argument("--shots", type=int, default=5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--reuse", action="store_true", help="keep lm-eval outputs already in --work")
    a = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    hf = os.path.join(work, "hf")
    if not os.path.isdir(hf):
        subprocess.run([a.normlab, "export", a.run, "--hf", hf], check=True)
    context = json.load(open(os.path.join(hf, "tokenizer_config.json")))["model_max_length"]
    sentences = tl.held_out_sentences(tl.corpus_tar(repo))
    tasks_dir = os.path.join(work, "tasks")
    files = tl.write_layouts(tasks_dir, sentences, a.items, a.seed)
    mc = write_custom_tasks(tasks_dir, sentences, a.items, a.seed)
    names = ["normlab_mc", "normlab_gen"] + tl.write_yamls(tasks_dir, files, 0)
    names += tl.write_yamls(tasks_dir, files, a.shots, [l for l in tl.LAYOUTS if l != "lambada_openai"])
    results, times = {}, {}
    server, url, model = serve(a.normlab, a.run)
    try:
        for bs in (1, 8):
            out = os.path.join(work, f"hf-bs{bs}")
            times[f"hf-bs{bs}"] = lm_eval(["--model", "hf", "--model_args",
                # No max_length: lm-eval reads the limit from the export's max_position_embeddings.
                f"pretrained={hf},trust_remote_code=True,dtype=float32",
                "--batch_size", str(bs), "--device", "cpu"], out, names, tasks_dir, a.reuse)
            # max_length = context + 2: lm-eval's API models keep max_length − 1 tokens of a long
            # request, its hf model max_length + 1 (the last only predicted); so both cut alike.
            out = os.path.join(work, f"serve-bs{bs}")
            times[f"serve-bs{bs}"] = lm_eval(["--model", "local-completions", "--model_args",
                f"base_url={url}/v1/completions,model={model},max_length={context + 2},tokenizer_backend=remote,"
                f"tokenized_requests=True,max_gen_toks=24", "--batch_size", str(bs)], out, names, tasks_dir, a.reuse)
    finally:
        server.terminate()
        server.wait()
    ref = os.path.join(work, "hf-bs1")
    for way in ("hf-bs1", "hf-bs8", "serve-bs1", "serve-bs8"):
        results[way] = {t: compare_lm_eval(ref, os.path.join(work, way), t) for t in names}
    results["normlab-evaluate"] = {}
    for k, cfg in write_normlab_configs(work, files, mc, a.shots).items():
        out = os.path.join(work, f"normlab-{k}shot.json")
        t0 = time.time()
        subprocess.run([a.normlab, "evaluate", "--checkpoint", a.run, "--config", cfg, "--samples", "--out", out],
                       check=True, capture_output=True)
        times[f"normlab-evaluate-{k}shot"] = time.time() - t0
        results["normlab-evaluate"].update(compare_normlab(ref, out, k))
    print(json.dumps({"context": context, "items": a.items, "shots": a.shots, "results": results,
                      "seconds": times}, indent=1))
    bad = any(r["max_rel_loglik_diff"] > TOLERANCE or r["generations_differing"] or r["greedy_flags_differing"]
              for way in results.values() for r in way.values())
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
