"""Fetches the papers' downstream tasks from the Hugging Face hub into the layout normlab's
task suites read: OUT/TASK/SPLIT.parquet (`[eval] dir = OUT`, default data/tasks).

    pip install datasets
    python3 tools/get_tasks.py --out data/tasks                 # every task of both suites
    python3 tools/get_tasks.py --out data/tasks --suite periln-table2
    python3 tools/get_tasks.py --out data/tasks --dry-run       # what it would fetch

Each task is lm-evaluation-harness 0.4's dataset (`dataset_path`, `dataset_name`), written as
the hub's `datasets` library reads it, so normlab reads the same records lm-eval does. The
splits are those `src/tasks/papers.rs` names: the split evaluated and the split few-shot
examples come from. Existing files are kept (delete one to fetch it again).
"""

import argparse
import os
import sys

# (task, hub dataset, configuration): lm-eval's task YAMLs (src/tasks/layouts.rs `hub`).
HUB = {
    "arc_easy": ("allenai/ai2_arc", "ARC-Easy"),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge"),
    "hellaswag": ("Rowan/hellaswag", None),
    "piqa": ("baber/piqa", None),
    "social_iqa": ("lighteval/siqa", None),
    "winogrande": ("allenai/winogrande", "winogrande_xl"),
    "openbookqa": ("allenai/openbookqa", "main"),
    "boolq": ("aps/super_glue", "boolq"),
    "lambada_openai": ("EleutherAI/lambada_openai", "default"),
    "mmlu": ("cais/mmlu", "all"),
}

# The suites of src/tasks/papers.rs: (task, split evaluated, split of the examples, shots).
SUITES = {
    "periln-table2": [("arc_easy", "test", "train", 0), ("hellaswag", "validation", "train", 0),
                      ("piqa", "validation", "train", 0), ("social_iqa", "validation", "train", 0),
                      ("winogrande", "validation", "train", 0)],
    "bhyt-table1": [("arc_easy", "test", "train", 5), ("piqa", "validation", "train", 5),
                    ("hellaswag", "validation", "train", 5), ("openbookqa", "test", "train", 5),
                    ("winogrande", "validation", "train", 5), ("mmlu", "test", "dev", 5),
                    ("boolq", "validation", "train", 5)],
}


def wanted(suites):
    """{(task, split)} to fetch: each task's evaluated split, and its examples' split with shots."""
    out = set()
    for name in suites:
        for task, split, fewshot_split, shots in SUITES[name]:
            out.add((task, split))
            if shots:
                out.add((task, fewshot_split))
    return sorted(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--suite", choices=sorted(SUITES), action="append")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args()
    todo = [(t, s) for t, s in wanted(a.suite or sorted(SUITES))
            if not os.path.isfile(os.path.join(a.out, t, f"{s}.parquet"))]
    for task, split in todo:
        path, name = HUB[task]
        out = os.path.join(a.out, task, f"{split}.parquet")
        print(f"{path}{' (' + name + ')' if name else ''} split {split} -> {out}")
        if a.dry_run:
            continue
        import datasets
        os.makedirs(os.path.dirname(out), exist_ok=True)
        datasets.load_dataset(path, name, split=split).to_parquet(out + ".part")
        os.replace(out + ".part", out)
    if not todo:
        print(f"every file is in {a.out}")


if __name__ == "__main__":
    sys.exit(main())
