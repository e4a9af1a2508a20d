"""LoRA reference fixture from Hugging Face `transformers` + `peft` (independent of normlab's code).

Builds a tiny float32 `LlamaForCausalLM` (vocab 61, hidden 16, MLP 40, 2 layers, 4 query heads,
2 KV heads, head_dim 4, RMSNorm eps 1e-6, RoPE theta 1e4, untied head, no biases), re-draws every
weight as N(0, 0.2) (norm weights as 1 + N(0, 0.1)), wraps it with
`peft.get_peft_model(LoraConfig(r=2, lora_alpha=6, lora_dropout=0, all seven projections))` and
re-draws every lora_A / lora_B as N(0, 0.3) so that the adapter is not a no-op (peft inits B = 0).

Batch: 2 rows x 12 random tokens. Logits at position j predict token j+1 (shift done here, not by
HF). Row 0 learns targets j in [5, 9) u [10, 12), row 1 learns j in [3, 12) -- j counts token
positions, so target index j means token j predicted from position j-1. The loss is the mean
cross-entropy over learned targets; it is backpropagated to the LoRA factors. `loss_base` is the
same loss with `model.disable_adapter()`.

Writes tests/fixtures/reference/lora/llama_lora.safetensors (float32 unless noted):
  <hf name>                      every base parameter, HF `LlamaForCausalLM.state_dict()` names
  <hf module>.lora_A.weight      [r, in];   <hf module>.lora_B.weight   [out, r]
  grad.<hf module>.lora_{A,B}.weight   d loss / d factor
  tokens int64 [2, 12]; targets int64 [2, 11] (token j+1 where learned, else -1);
  loss [1]; loss_base [1]; scaling [1] (= lora_alpha / r, effective W' = W + scaling * B @ A)

Regenerate (byte-identical on rerun; about 5 s on one CPU thread):
  /root/.venvs/nl/bin/python tools/make_lora_fixtures.py
(any venv with torch, transformers 5.x, peft >= 0.21 and safetensors will do.)
"""
import json
import os

import peft
import torch
import torch.nn.functional as F
import transformers
from peft import LoraConfig, get_peft_model
from peft.tuners.lora import LoraLayer
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests/fixtures/reference/lora/llama_lora.safetensors")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
R, ALPHA, V, T = 2, 6, 61, 12
LEARN = [list(range(5, 9)) + list(range(10, 12)), list(range(3, 12))]  # learned target indices j


def hf_name(peft_name):
    """`base_model.model.X.base_layer.weight` -> `X.weight` (the plain HF name)."""
    return peft_name.removeprefix("base_model.model.").replace(".base_layer", "")


def sort_metadata(path):
    """safetensors writes __metadata__ in HashMap order; sort it so reruns are byte-identical."""
    raw = bytearray(open(path, "rb").read())
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    head["__metadata__"] = dict(sorted(head["__metadata__"].items()))
    new = json.dumps(head, separators=(",", ":")).encode().ljust(n)
    assert len(new) == n
    raw[8:8 + n] = new
    open(path, "wb").write(raw)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=40, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=4, rms_norm_eps=1e-6,
                      rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    base = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in base.named_parameters():  # all 1-D params are RMSNorm gains (no biases)
            p.copy_(1 + 0.1 * torch.randn_like(p) if p.ndim == 1 else 0.2 * torch.randn_like(p))
    base_names = list(base.state_dict().keys())

    lcfg = LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS,
                      bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, lcfg)
    model.eval()
    torch.manual_seed(1)
    lora = {}  # hf module name -> peft LoraLayer
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, LoraLayer):
                for fac in (mod.lora_A["default"], mod.lora_B["default"]):
                    fac.weight.copy_(0.3 * torch.randn_like(fac.weight))
                lora[hf_name(name)] = mod
    assert len(lora) == 7 * cfg.num_hidden_layers, len(lora)
    scaling = next(iter(lora.values())).scaling["default"]
    assert scaling == ALPHA / R, scaling

    torch.manual_seed(2)
    tokens = torch.randint(0, V, (2, T), dtype=torch.int64)
    targets = torch.full((2, T - 1), -1, dtype=torch.int64)
    for row, js in enumerate(LEARN):
        for j in js:
            targets[row, j - 1] = tokens[row, j]  # position j-1 predicts token j

    def loss_of(m):
        logits = m(input_ids=tokens).logits[:, :-1, :]  # [2, 11, V]
        logp = torch.log_softmax(logits.float(), dim=-1)
        mask = targets >= 0
        nll = -logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return (nll * mask).sum() / mask.sum()

    loss = loss_of(model)
    loss.backward()
    with torch.no_grad(), model.disable_adapter():
        loss_base = loss_of(model)
    # cross-check against HF's own shifted CE with -100 labels (adapters on)
    labels = torch.cat([torch.full((2, 1), -100), targets.masked_fill(targets < 0, -100)], 1)
    with torch.no_grad():
        hf_loss = model(input_ids=tokens, labels=labels).loss
    print(f"loss (adapters on)  = {loss.item():.8f}  (HF labels loss {hf_loss.item():.8f})")
    print(f"loss (adapters off) = {loss_base.item():.8f}")
    assert abs(hf_loss.item() - loss.item()) < 1e-5
    assert abs(loss.item() - loss_base.item()) > 1e-3, "adapter does not change the loss"

    # Self-check: merged weight W + scaling * B @ A as a plain Linear == peft layer.
    name, mod = "model.layers.0.self_attn.q_proj", lora["model.layers.0.self_attn.q_proj"]
    x = torch.randn(3, 5, mod.in_features)
    with torch.no_grad():
        w = mod.base_layer.weight + scaling * mod.lora_B["default"].weight @ mod.lora_A["default"].weight
        diff = (F.linear(x, w) - mod(x)).abs().max().item()
    print(f"merged-weight check on {name}: max |diff| = {diff:.3e}")
    assert diff < 1e-5

    sd = model.get_base_model().state_dict()
    out = {hf_name(k): v for k, v in sd.items() if "lora_" not in k}
    assert sorted(out) == sorted(base_names), set(out) ^ set(base_names)
    for hf, mod in lora.items():
        for fac, lin in (("lora_A", mod.lora_A["default"]), ("lora_B", mod.lora_B["default"])):
            out[f"{hf}.{fac}.weight"] = lin.weight
            out[f"grad.{hf}.{fac}.weight"] = lin.weight.grad
    out = {k: v.detach().float().contiguous().clone() for k, v in out.items()}
    out.update(tokens=tokens, targets=targets, loss=loss.detach().reshape(1),
               loss_base=loss_base.reshape(1), scaling=torch.tensor([scaling], dtype=torch.float32))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    meta = {"generator": "tools/make_lora_fixtures.py", "peft": peft.__version__,
            "transformers": transformers.__version__, "torch": torch.__version__}
    save_file(out, OUT, metadata=meta)
    sort_metadata(OUT)
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(out)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
