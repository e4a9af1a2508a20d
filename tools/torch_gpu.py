# Parametrised PyTorch twin of tools/torch_reference.py (pre-norm RMSNorm, RoPE, SwiGLU,
# untied, no bias, AdamW) for timing on a GPU or the CPU. Prints one RESULT json line.
# With --curve N it trains N steps instead and prints a CURVE json line of every step's loss:
# --init PATH starts from normlab's weights (an f32 safetensors file in normlab's names and
# [d_in, d_out] layout, as `normlab bench curve` writes it) and --lcg trains on normlab's
# benchmark batch (the 64-bit LCG of src/bench/dims.rs, tokens modulo V), so the two
# trajectories start from the same point on the same data.
import argparse, json, math, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
p = argparse.ArgumentParser()
for k, v in dict(V=256, D=256, L=6, H=4, FF=688, B=8, T=256, warmup=5, steps=20).items():
    p.add_argument("--" + k, type=int, default=v)
p.add_argument("--device", default="cuda")
p.add_argument("--compile", action="store_true")
p.add_argument("--dtype", default="f32")
p.add_argument("--init", help="normlab's initial weights (safetensors)")
p.add_argument("--lcg", action="store_true", help="normlab's benchmark batch")
p.add_argument("--curve", type=int, default=0, help="train this many steps; print their losses")
a = p.parse_args()
if a.device == "auto": a.device = "cuda" if torch.cuda.is_available() else "cpu"
dev = torch.device(a.device)
torch.manual_seed(0)
V, D, L, H, FF, B, T = a.V, a.D, a.L, a.H, a.FF, a.B, a.T
HD = D // H
def rope(t, hd, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    f = torch.outer(torch.arange(t, dtype=torch.float32), inv)
    return f.cos().to(dev), f.sin().to(dev)
def ap(x, c, s):
    h = x.shape[-1] // 2; x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = nn.RMSNorm(D, eps=1e-5), nn.RMSNorm(D, eps=1e-5)
        s.wq, s.wk, s.wv, s.wo = [nn.Linear(D, D, bias=False) for _ in range(4)]
        s.w1, s.w3 = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
        s.w2 = nn.Linear(FF, D, bias=False)
    def forward(s, x, c, si):
        b, t, _ = x.shape; h = s.n1(x)
        q, k, v = [w(h).view(b, t, H, HD).transpose(1, 2) for w in (s.wq, s.wk, s.wv)]
        q, k = ap(q, c, si), ap(k, c, si)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.wo(o.transpose(1, 2).reshape(b, t, D)); h = s.n2(x)
        return x + s.w2(F.silu(s.w1(h)) * s.w3(h))
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.nf = nn.RMSNorm(D, eps=1e-5); s.head = nn.Linear(D, V, bias=False)
        for m in s.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)): nn.init.normal_(m.weight, std=0.02)
        s.c, s.s = rope(T, HD)
    def forward(s, idx):
        x = s.emb(idx)
        for b in s.blocks: x = b(x, s.c, s.s)
        return s.head(s.nf(x))
def read_safetensors(path):
    # The format: an 8-byte little-endian header length, a JSON header, the raw tensors.
    import numpy as np
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little"); head = json.loads(raw[8:8 + n]); body = raw[8 + n:]
    out = {}
    for name, t in head.items():
        if name == "__metadata__": continue
        assert t["dtype"] == "F32", f"{name}: {t['dtype']} (normlab writes f32)"
        lo, hi = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(body[lo:hi], dtype=np.float32).reshape(t["shape"]).copy())
    return out
def load_normlab(m, path):
    # normlab's names -> this model's; projections are stored [d_in, d_out] (nn.Linear's transpose).
    w = read_safetensors(path)
    names = {"tok_emb": ("emb.weight", False), "lm_head": ("head.weight", True), "final_norm.gain": ("nf.weight", False)}
    for i in range(L):
        names[f"layers.{i}.attn.input_norm.gain"] = (f"blocks.{i}.n1.weight", False)
        names[f"layers.{i}.ffn.input_norm.gain"] = (f"blocks.{i}.n2.weight", False)
        for k in ("wq", "wk", "wv", "wo"): names[f"layers.{i}.attn.f.{k}"] = (f"blocks.{i}.{k}.weight", True)
        for k in ("w1", "w2", "w3"): names[f"layers.{i}.ffn.f.{k}"] = (f"blocks.{i}.{k}.weight", True)
    own = dict(m.named_parameters())
    assert set(w) == set(names), f"normlab's parameters {sorted(set(w) ^ set(names))} have no twin here"
    with torch.no_grad():
        for k, (mine, t) in names.items():
            v = w[k].t() if t else w[k]
            assert own[mine].shape == v.shape, f"{k}: {tuple(v.shape)} against {mine} {tuple(own[mine].shape)}"
            own[mine].copy_(v)
def lcg_batch():
    s, out = 0x2545F4914F6CDD1D, []
    for _ in range(B * (T + 1)):
        s = (s * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out.append((s >> 33) % V)
    return torch.tensor(out, dtype=torch.long).view(B, T + 1)
m = M()
if a.init: load_normlab(m, a.init)
m = m.to(dev)
n = sum(p.numel() for p in m.parameters())
opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
f = torch.compile(m) if a.compile else m
g = torch.Generator().manual_seed(1)
toks = (lcg_batch() if a.lcg else torch.randint(0, V, (B, T + 1), generator=g)).to(dev)
xi, yt = toks[:, :T], toks[:, 1:]
ac = torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16) if a.dtype == "bf16" else torch.autocast("cpu", enabled=False)
def step():
    with ac:
        lo = F.cross_entropy(f(xi).float().view(-1, V), yt.reshape(-1))
    opt.zero_grad(set_to_none=True); lo.backward(); opt.step(); return lo
if a.curve:
    print("CURVE " + json.dumps(dict(cfg=vars(a), params=n, losses=[float(step()) for _ in range(a.curve)])))
    sys.exit(0)
for _ in range(a.warmup): step()
(torch.cuda.synchronize() if a.device.startswith("cuda") else None); t0 = time.perf_counter()
for _ in range(a.steps): lo = step()
(torch.cuda.synchronize() if a.device.startswith("cuda") else None); tr = (time.perf_counter() - t0) / a.steps
with torch.no_grad(), ac:
    for _ in range(3): f(xi)
    (torch.cuda.synchronize() if a.device.startswith("cuda") else None); t0 = time.perf_counter()
    for _ in range(a.steps): f(xi)
    (torch.cuda.synchronize() if a.device.startswith("cuda") else None); fw = (time.perf_counter() - t0) / a.steps
flops = 6 * n * B * T
print("RESULT " + json.dumps(dict(cfg=vars(a), params=n, train_ms=tr * 1e3, train_tok_s=B * T / tr,
      fwd_tok_s=B * T / fw, loss=float(lo), tflops_6N=flops / tr / 1e12)))
