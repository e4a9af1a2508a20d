"""transformers' `generate()` on a run exported with `normlab export --hf`, batched and left
padded, against each prompt alone and against `normlab generate`:

1. the tokenizer loads with `AutoTokenizer.from_pretrained(OUT)` (no remote code) and names
   BOS and EOS, and no pad token (the batch below is padded with EOS under its mask);
2. greedy `generate()` of N prompts of different lengths in one left-padded batch (with its
   `attention_mask`) gives every prompt the tokens it gets alone, and the largest difference of
   the last prompt position's logits between the batch and alone is printed;
3. with the KV cache (`use_cache=True`, transformers' DynamicCache) and without it the tokens
   are the same;
4. each prompt's greedy continuation equals `normlab generate --temperature 0`.

Prints one JSON summary; exit status 1 when any text differs or a logit differs by more than
1e-4 relative to the largest.

    ~/.venvs/nl/bin/python tools/check_hf_generate.py --run RUN [--normlab target/release/normlab]
"""

import argparse
import json
import os
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_layouts as tl  # noqa: E402


def prompts(n, repo):
    """Sentence starts of 2 to 60 words from the held-out addresses."""
    sents = tl.held_out_sentences(tl.corpus_tar(repo))
    out = []
    for i in range(n):
        s = sents[(i * 37) % len(sents)]
        k = 2 + (i * 13) % min(len(s) - 1, 59)
        out.append(" ".join(s[:k]))
    return out


def normlab_generate(normlab, run, prompt, new):
    """What `normlab generate` prints: the prompt, its continuation and a newline."""
    r = subprocess.run([normlab, "generate", "--checkpoint", run, "--prompt", prompt, "--max-new-tokens", str(new),
                        "--temperature", "0"], capture_output=True, text=True, check=True)
    return r.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--normlab", default="target/release/normlab")
    p.add_argument("--out", default="/tmp/normlab-hf-generate")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--new", type=int, default=24)
    a = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(a.out):
        subprocess.run([a.normlab, "export", a.run, "--hf", a.out], check=True)
    tok = AutoTokenizer.from_pretrained(a.out, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(a.out, trust_remote_code=True, dtype=torch.float32).eval()
    texts = prompts(a.prompts, repo)
    greedy = dict(max_new_tokens=a.new, do_sample=False, pad_token_id=tok.pad_token_id)
    alone, last_alone = [], []
    for t in texts:
        ids = tok(t, return_tensors="pt")
        with torch.no_grad():
            alone.append(model.generate(**ids, **greedy)[0, ids["input_ids"].shape[1]:].tolist())
            last_alone.append(model(**ids).logits[0, -1])
    # The export names no pad token (as Llama's checkpoints): a batch is padded with EOS, as
    # transformers' users do for those, the padding masked by the attention mask.
    exported_pad = tok.pad_token
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    greedy["pad_token_id"] = tok.pad_token_id
    tok.padding_side = "left"
    batch = tok(texts, return_tensors="pt", padding=True)
    width = batch["input_ids"].shape[1]
    with torch.no_grad():
        together = model.generate(**batch, **greedy)[:, width:].tolist()
        uncached = model.generate(**batch, use_cache=False, **greedy)[:, width:].tolist()
        last_batch = model(**batch).logits[:, -1]
    scale = max(float(x.abs().max()) for x in last_alone)
    logit_gap = max(float((last_batch[i] - last_alone[i]).abs().max()) for i in range(len(texts))) / scale
    trim = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    rows = []
    for i, t in enumerate(texts):
        ours = normlab_generate(a.normlab, a.run, t, a.new)
        rows.append({"prompt_tokens": len(tok(t)["input_ids"]), "batched_equals_alone": together[i] == alone[i],
                     "uncached_equals_cached": uncached[i] == together[i],
                     "equals_normlab_generate": ours == t + trim(alone[i]) + "\n"})
    summary = {"tokenizer": {"bos": tok.bos_token, "eos": tok.eos_token, "pad": exported_pad,
                             "class": type(tok).__name__},
               "prompts": len(texts), "padded_width": width, "max_relative_last_logit_gap": logit_gap, "rows": rows}
    print(json.dumps(summary, indent=1))
    bad = logit_gap > 1e-4 or not all(all(v for k, v in r.items() if k != "prompt_tokens") for r in rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
