"""transformers' `generate()` on a fine-tuned chat run's export without an attention mask, as a
user calls it (`model.generate(input_ids)`), against the same call with the mask and against
`normlab serve`'s `/v1/chat/completions` through OpenAI's client:

1. the export names no pad token (`tokenizer.pad_token` is None, `config.pad_token_id` null), so
   transformers cannot take a content token (a ChatML prompt's newlines) for padding and mask
   it out of the prompt;
2. for conversations whose rendered prompts hold newlines (a system turn, earlier turns), greedy
   `generate(input_ids)` gives the tokens `generate(input_ids, attention_mask=ones)` gives;
3. each answer, cut at the template's turn end (a trailing part of it held back, as the server
   does when the token limit cuts it), is the server's greedy answer to the same messages
   (`temperature 0`, the same number of new tokens).

Prints one JSON summary; exit status 1 when any answer differs.

    normlab export SFT --hf OUT
    python tools/check_hf_chat_generate.py --run SFT --hf OUT [--normlab target/release/normlab]
"""

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request

import torch
from openai import OpenAI
from transformers import AutoModelForCausalLM, AutoTokenizer

CONVERSATIONS = [
    [{"role": "user", "content": "Write this in words: 47"}],
    [{"role": "system", "content": "You spell numbers.\nAnswer in words only."},
     {"role": "user", "content": "Write this in words: 3.5 kg"}],
    [{"role": "user", "content": "Write this in words: 12"}, {"role": "assistant", "content": "twelve"},
     {"role": "user", "content": "And this one: 78"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write this in words: 1,250"}],
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(normlab, run):
    """`normlab serve` on a free port, returned once /health answers."""
    port = free_port()
    p = subprocess.Popen([normlab, "serve", "--checkpoint", run, "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5).close()
            return p, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if p.poll() is not None:
                sys.exit(f"normlab serve exited: {p.stderr.read()}")
            time.sleep(0.1)
    p.kill()
    sys.exit("normlab serve did not start in 60 s")


def held_back(text, stop):
    """`text` without a trailing prefix of the stop marker (a turn end cut by the token limit), as
    the server holds it back."""
    for k in range(len(stop) - 1, 0, -1):
        if text.endswith(stop[:k]):
            return text[:-k]
    return text


def greedy(model, ids, new, mask):
    kw = {"attention_mask": torch.ones_like(ids)} if mask else {}
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new, do_sample=False, **kw)
    return out[0, ids.shape[1]:].tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--hf", required=True)
    p.add_argument("--normlab", default="target/release/normlab")
    p.add_argument("--new", type=int, default=24)
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(a.hf)
    model = AutoModelForCausalLM.from_pretrained(a.hf, trust_remote_code=True, dtype=torch.float32).eval()
    stop = json.load(open(f"{a.run}/run.json"))["data"]["chat"]["template"]["stop"]
    server, url = serve(a.normlab, a.run)
    client = OpenAI(base_url=url, api_key="none")
    rows = []
    try:
        for m in CONVERSATIONS:
            text = tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
            ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
            bare, masked = greedy(model, ids, a.new, mask=False), greedy(model, ids, a.new, mask=True)
            answer = held_back(tok.decode(bare).split(stop)[0], stop)
            r = client.chat.completions.create(model="normlab", messages=m, max_tokens=a.new, temperature=0)
            rows.append({"prompt_newlines": text.count("\n"), "prompt_tokens": ids.shape[1],
                         "answer": answer, "server": r.choices[0].message.content,
                         "unmasked_equals_masked": bare == masked,
                         "equals_server": answer == r.choices[0].message.content})
    finally:
        server.terminate()
        server.wait(timeout=30)
    cfg = json.load(open(f"{a.hf}/config.json"))
    summary = {"pad_token": tok.pad_token, "config_pad_token_id": cfg.get("pad_token_id"),
               "generation_pad_token_id": model.generation_config.pad_token_id, "stop": stop, "rows": rows}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    ok = tok.pad_token is None and all(r["unmasked_equals_masked"] and r["equals_server"] for r in rows)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
