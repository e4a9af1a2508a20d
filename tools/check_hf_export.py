"""Loads directories written by `normlab export` with `transformers` and checks their logits
against the original checkpoint's (tests/fixtures/hf/<case>/expected.safetensors).

    for c in llama qwen2 qwen3 olmo2; do
      normlab import tests/fixtures/hf/$c --out /tmp/imp-$c --set data.corpus=SOME_TEXT
      normlab export /tmp/imp-$c --hf /tmp/exp-$c
    done
    ~/.venvs/torchref/bin/python tools/check_hf_export.py /tmp/exp-{} llama qwen2 qwen3 olmo2
"""

import sys
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast


def main():
    pattern, cases = sys.argv[1], sys.argv[2:]
    worst = 0.0
    for case in cases:
        d = pattern.format(case)
        exp = load_file(f"tests/fixtures/hf/{case}/expected.safetensors")
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(exp["tokens"]).logits
        err = ((logits - exp["logits"]).abs().max() / exp["logits"].abs().max()).item()
        tok = PreTrainedTokenizerFast(tokenizer_file=f"{d}/tokenizer.json")
        same_ids = tok("Fellow citizens, 2021")["input_ids"] == exp["encoded"].tolist()
        print(f"{case}: relative logit error {err:.2e}, tokenizer ids equal: {same_ids}")
        worst = max(worst, err)
        assert same_ids and err < 1e-5, case
    print(f"all {len(cases)} reload in transformers; worst relative error {worst:.2e}")


if __name__ == "__main__":
    main()
