"""Checks a fine-tuned run's exports against `transformers` and `peft`:

1. the merged export (`normlab export SFT --hf MERGED`) and the parent's export with the
   LoRA adapter (`normlab export PARENT --hf BASE`, `normlab export SFT --peft ADAPTER`,
   loaded with `PeftModel.from_pretrained`) give the same logits (relative gap);
2. `apply_chat_template(..., tokenize=True)` of the merged export's tokenizer, with the loss over
   the assistant turns only (located here by rendering the turns before each assistant turn with
   the generation prompt, as the template defines them), reproduces the SFT run's final
   validation loss from its metrics.jsonl on its held-out conversations (every
   `data.val_every`-th record of its data file).

    normlab export PARENT --hf BASE
    normlab export SFT --hf MERGED
    normlab export SFT --peft ADAPTER
    python tools/check_sft_export.py SFT BASE MERGED ADAPTER
"""

import json
import sys
import tomllib

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def messages(r):
    """A record of any layout normlab reads (OpenAI, ShareGPT, LIMA, Alpaca) as OpenAI messages."""
    if "messages" in r:
        return r["messages"]
    if "conversations" in r:
        turns = r["conversations"]
        if turns and isinstance(turns[0], str):
            return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        return [{"role": ROLES[t.get("from", t.get("role"))], "content": t.get("value", t.get("content"))} for t in turns]
    user = r["instruction"] + ("\n\n" + r["input"] if r.get("input", "").strip() else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": r["output"]}]


def conversations(path, val_every):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(l) for l in open(path) if l.strip()]
    held = [r for i, r in enumerate(rows) if (i + 1) % val_every == 0]
    return [messages(r) for r in held]


def ids_and_mask(tok, messages):
    """The tokens of the whole conversation and, per token, whether it is an assistant token."""
    text = tok.apply_chat_template(messages, tokenize=False)
    ids = tok.apply_chat_template(messages, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True) if i else ""
        through = tok.apply_chat_template(messages[: i + 1], tokenize=False)
        assert text.startswith(before) and text.startswith(through)
        spans.append((len(before.encode()), len(through.encode())))
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == list(ids), "apply_chat_template's ids differ from tokenizing its text"
    starts = [len(text[:a].encode()) for a, _ in enc["offset_mapping"]]
    mask = [any(s <= b < e for s, e in spans) for b in starts]
    return list(ids), mask


def masked_loss(model, pairs):
    total, count = 0.0, 0
    with torch.no_grad():
        for ids, mask in pairs:
            x = torch.tensor([ids])
            logp = torch.log_softmax(model(x).logits[0, :-1].double(), -1)
            nll = -logp[torch.arange(len(ids) - 1), x[0, 1:]]
            keep = torch.tensor(mask[1:])
            total += nll[keep].sum().item()
            count += int(keep.sum())
    return total / count, count


def main():
    run, base_dir, merged_dir, adapter_dir = sys.argv[1:5]
    cfg = tomllib.load(open(f"{run}/config.toml", "rb"))
    val = [json.loads(l)["val_loss"] for l in open(f"{run}/metrics.jsonl") if '"val_loss"' in l]
    tok = AutoTokenizer.from_pretrained(merged_dir, trust_remote_code=True)
    convs = conversations(cfg["data"]["corpus"], cfg["data"]["val_every"])
    pairs = [ids_and_mask(tok, c) for c in convs]
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32, trust_remote_code=True).eval()
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, trust_remote_code=True).eval()
    peft = PeftModel.from_pretrained(base, adapter_dir).eval()
    x = torch.tensor([pairs[0][0]])
    with torch.no_grad():
        a, b = merged(x).logits, peft(x).logits
    gap = ((a - b).abs().max() / a.abs().max()).item()
    m_loss, n = masked_loss(merged, pairs)
    p_loss, _ = masked_loss(peft, pairs)
    rel = abs(m_loss - val[-1]) / val[-1]
    print(f"{len(convs)} held-out conversations, {n} assistant tokens")
    print(f"merged vs base+peft adapter: relative logit gap {gap:.2e}")
    print(f"assistant-only loss: normlab {val[-1]:.6f}, transformers merged {m_loss:.6f}, base+peft {p_loss:.6f}; "
          f"relative gap {rel:.2e}")
    assert gap < 1e-5 and rel < 1e-5, "exports disagree"


if __name__ == "__main__":
    main()
