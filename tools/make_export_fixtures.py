#!/usr/bin/env python3
"""Every preset exported by `normlab export --hf` and run by `transformers`: the fixtures of
src/hf/tests.rs (`every_preset_exports_and_transformers_gives_normlabs_logits`).

For each preset in src/recipe/catalog.rs this trains a tiny byte-level run with normlab (d 8,
2 layers (8 for attnres-block), 8 steps at lr 1e-2, so that every gain, shift, alpha and lambda has moved from its
initial value), exports it, loads the export with
`AutoModelForCausalLM.from_pretrained(OUT, trust_remote_code=True)` (recipes without a
Hugging Face layout: through the shipped modeling_normlab.py), and writes into
tests/fixtures/export/<preset>/ the export's config.json and model.safetensors plus
expected.safetensors: 16 fixed tokens, transformers' logits on them, and its greedy
`generate()` continuation of their first 8, which must equal `normlab generate --temperature 0`
(checked here). The metadata records the SHA-256 of the modeling_normlab.py that ran, so the
Rust test fails when that file changes without new fixtures.

    pip install torch transformers safetensors
    cargo build --release && python3 tools/make_export_fixtures.py [PRESET ...]   # from the repository root

With preset names, only their fixtures are written. The mixture-of-experts runs `moe-mixtral`,
`moe-qwen3-moe` and `moe-olmoe` (configs/moe/'s routers at d 16, 4 query heads and 2
key/value heads) are exported the same way, in transformers' own Mixtral, Qwen3-MoE and OLMoE
classes.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

NORMLAB = os.environ.get("NORMLAB", "target/release/normlab")
OUT = "tests/fixtures/export"
TEXT = "Item 7 of the re"  # 16 bytes = 16 tokens
# Presets whose scheme needs more depth to show: Block AttnRes's 8 blocks are single sublayers
# below 8 layers (16 sublayers make blocks of 2); CompleteP at its base depth of 2 is pre-rms
# exactly (branches x 2/L = 1), at 4 layers its branches are halved.
LAYERS = {"attnres-block": 8, "completep": 4}
CORPUS = "".join(f"Item {i % 97} of the report concerns the {['north', 'south', 'east', 'west'][i % 4]} district. "
                 for i in range(2000))


# name: (the [model] table's extra lines, its recipe table, its [model.moe] table)
MOE = {
    "moe-mixtral": ("n_layers = 2", 'preset = "pre-rms"',
                    'experts = 4\ntop_k = 2\nrouter = { kind = "topk-softmax" }\naux_loss = 0.001'),
    # Layers 0 and 2 MoE, layer 1 dense (Qwen's mlp_only_layers = [1]).
    "moe-qwen3-moe": ("n_layers = 3", 'preset = "pre-rms"\n[model.recipe.attention]\nqk_norm = "head"',
                      'experts = 4\ntop_k = 2\nd_expert = 8\nevery = 2\n'
                      'router = { kind = "softmax-topk", normalize = true }\naux_loss = 0.001'),
    "moe-olmoe": ("n_layers = 2", 'preset = "pre-rms"\n[model.recipe.attention]\nqk_norm = "full"',
                  'experts = 8\ntop_k = 2\nd_expert = 8\nrouter = { kind = "softmax-topk", normalize = false }\n'
                  'aux_loss = 0.01\nz_loss = 0.001'),
}


def model_table(name):
    """The [model] section of fixture `name`: a preset's, or a MoE run's."""
    if name in MOE:
        layers, recipe, moe = MOE[name]
        return f"""[model]
d_model = 16
{layers}
n_heads = 4
n_kv_heads = 2
ffn = "glu"
[model.recipe]
{recipe}
[model.moe]
{moe}
"""
    return f"""[model]
d_model = 8
n_layers = {LAYERS.get(name, 2)}
n_heads = 2
recipe = "{name}"
"""


def presets():
    """The names of the one preset table, `PRESETS` in src/recipe/catalog.rs."""
    src = open("src/recipe/catalog.rs").read()
    names = re.findall(r'Preset \{ name: "([a-z0-9-]+)"', src)
    assert names, "no presets found in src/recipe/catalog.rs"
    return names


def train_and_export(name, tmp):
    run, out = os.path.join(tmp, name), os.path.join(OUT, name)
    cfg = os.path.join(tmp, f"{name}.toml")
    with open(cfg, "w") as f:
        f.write(f"""[run]
dir = "{run}"
eval_every = 100
eval_windows = 2
checkpoint_every = 100
{model_table(name)}[data]
corpus = "{tmp}/corpus.txt"
cache_dir = "{tmp}/cache"
[train]
batch_size = 4
seq_len = 16
steps = 8
[optim]
lr = 0.01
""")
    subprocess.run([NORMLAB, "train", "--quiet", "--config", cfg], check=True)
    shutil.rmtree(out, ignore_errors=True)
    # --force: the fixture directory also holds expected.safetensors, which export leaves alone.
    subprocess.run([NORMLAB, "export", run, "--hf", out, "--force"], check=True)
    return run, out


def greedy_normlab(run, prompt, n):
    o = subprocess.run([NORMLAB, "generate", "--checkpoint", run, "--prompt", prompt, "--max-new-tokens", str(n),
                        "--temperature", "0"], check=True, capture_output=True, text=True)
    return o.stdout[len(prompt):].rstrip("\n")


def main():
    modeling = open("src/hf/modeling_normlab.py", "rb").read()
    sha = hashlib.sha256(modeling).hexdigest()
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "corpus.txt"), "w") as f:
        f.write(CORPUS)
    tokens = torch.tensor([list(TEXT.encode())], dtype=torch.int64)
    only = set(sys.argv[1:])
    for name in presets() + list(MOE):
        if only and name not in only:
            continue
        run, out = train_and_export(name, tmp)
        model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(tokens).logits
            gen = model.generate(tokens[:, :8], max_new_tokens=8, do_sample=False)
        theirs = bytes(gen[0, 8:].tolist()).decode("utf-8", errors="replace")
        ours = greedy_normlab(run, TEXT[:8], 8)
        assert theirs == ours, f"{name}: transformers generated {theirs!r}, normlab {ours!r}"
        save_file({"tokens": tokens, "logits": logits.float().contiguous(), "generated": gen[:, 8:].contiguous()},
                  os.path.join(out, "expected.safetensors"), metadata={"modeling_sha256": sha})
        for extra in ("tokenizer.json", "modeling_normlab.py"):  # rewritten by the test's export
            if os.path.exists(os.path.join(out, extra)):
                os.remove(os.path.join(out, extra))
        print(f"{name:20s} {type(model).__name__:22s} greedy {ours!r} equal in both")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
