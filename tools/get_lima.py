"""Fetches LIMA (Zhou et al., 2023: "LIMA: Less Is More for Alignment") in its published layout:
`train.jsonl` (1,000 conversations) and `test.jsonl` (300 prompts) from the Hugging Face hub's
`GAIR/lima`, each line `{"conversations": [user, assistant, ...], "source": ...}`, which
`normlab finetune --data` and `[sweep.finetune] data` read as they are (the `conversations`
layout with plain strings: user, assistant, user, ...). The dataset is gated: accept its terms on
the hub and set HF_TOKEN. Needs `pip install huggingface_hub` and a reachable hub.

    python tools/get_lima.py data/lima
"""

import os
import sys

from huggingface_hub import hf_hub_download


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "data/lima"
    os.makedirs(out, exist_ok=True)
    for name in ["train.jsonl", "test.jsonl"]:
        path = hf_hub_download("GAIR/lima", name, repo_type="dataset", local_dir=out, token=os.environ.get("HF_TOKEN"))
        with open(path) as f:
            print(f"{path}: {sum(1 for line in f if line.strip())} records")


if __name__ == "__main__":
    main()
