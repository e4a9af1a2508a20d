"""Tiny random Llama, Qwen2, Qwen3, OLMo-2, Mixtral, Qwen3-MoE and OLMoE checkpoints made with
`transformers`, and their logits on fixed tokens: the independent truth for normlab's import
and export (`src/hf/tests.rs`).

    python3 -m venv ~/.venvs/torchref && ~/.venvs/torchref/bin/pip install torch transformers safetensors
    ~/.venvs/torchref/bin/python tools/make_hf_fixtures.py [CASE ...]    # from the repository root

Each case is written with `save_pretrained` to tests/fixtures/hf/<case>/ (config.json,
model.safetensors or shards with an index, tokenizer.json) plus expected.safetensors: the
token ids of a fixed text, the model's logits on them (computed after reloading the saved
files, float32), and the ids of a text encoded by the tokenizer. Seeded: rerunning
reproduces the files. With case names, only those are written.
"""

import os
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
import sys
from transformers import (AutoModelForCausalLM, LlamaConfig, MixtralConfig, Olmo2Config, OlmoeConfig,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen3Config, Qwen3MoeConfig)

OUT = "tests/fixtures/hf"
TEXT = "The State of the Union is strong. Fellow citizens, we meet again in 1790 and 2021."


def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TEXT] * 20, trainer=trainer)
    return tok


COMMON = dict(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=10000.0,
              max_position_embeddings=128)

CASES = {
    # name: (config, dtype, max_shard_size)
    "llama": (LlamaConfig(**COMMON, tie_word_embeddings=False), torch.bfloat16, None),
    "qwen2": (Qwen2Config(**COMMON, tie_word_embeddings=True), torch.float32, "60KB"),
    "qwen3": (Qwen3Config(**COMMON, head_dim=32, tie_word_embeddings=False), torch.float32, None),
    "olmo2": (Olmo2Config(**COMMON, tie_word_embeddings=False), torch.float32, None),
    # Mixture of experts: 4 experts, top 2, renormalised (Mixtral always; Qwen3-MoE by
    # norm_topk_prob); Qwen3-MoE's layer 0 dense (mlp_only_layers) beside experts of width 48;
    # OLMoE's 8 experts of width 32 without renormalisation.
    "mixtral": (MixtralConfig(**COMMON, num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
                              tie_word_embeddings=False), torch.float32, None),
    "qwen3_moe": (Qwen3MoeConfig(**COMMON, head_dim=32, num_experts=4, num_experts_per_tok=2,
                                 moe_intermediate_size=48, norm_topk_prob=True, mlp_only_layers=[0],
                                 tie_word_embeddings=False), torch.float32, None),
    "olmoe": (OlmoeConfig(**{**COMMON, "intermediate_size": 32}, num_experts=8, num_experts_per_tok=2,
                          norm_topk_prob=False, pad_token_id=None, eos_token_id=None, tie_word_embeddings=False),
              torch.float32, None),
}


def randomize(model, seed):
    """Weights far from their init: N(0, 0.2²) matrices, norm gains 1 + N(0, 0.2²), biases N(0, 0.1²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name:
                p.copy_(1.0 + 0.2 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def main():
    tok = tokenizer()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    ids = tok.encode(TEXT).ids
    only = set(sys.argv[1:])
    for i, (name, (cfg, dtype, shard)) in enumerate(CASES.items()):
        if only and name not in only:
            continue
        torch.manual_seed(i)
        model = AutoModelForCausalLM.from_config(cfg).eval()
        randomize(model, 100 + i)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        model.to(dtype).save_pretrained(d, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
        fast.save_pretrained(d)
        for extra in ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
            p = os.path.join(d, extra)
            if os.path.exists(p):
                os.remove(p)
        reloaded = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
        x = torch.tensor([ids[:24]])
        with torch.no_grad():
            logits = reloaded(x).logits.float()
        save_file({"tokens": x.to(torch.int64), "logits": logits.contiguous(),
                   "encoded": torch.tensor(tok.encode("Fellow citizens, 2021").ids, dtype=torch.int64)},
                  os.path.join(d, "expected.safetensors"))
        print(name, sorted(os.listdir(d)), tuple(logits.shape))


if __name__ == "__main__":
    main()
