# Parametrised PyTorch twin of tools/torch_reference.py (pre-norm RMSNorm, RoPE, SwiGLU,
# untied, no bias, AdamW) for timing on a GPU or the CPU. Prints one RESULT json line.
import argparse, json, math, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
p = argparse.ArgumentParser()
for k, v in dict(V=256, D=256, L=6, H=4, FF=688, B=8, T=256, warmup=5, steps=20).items():
    p.add_argument("--" + k, type=int, default=v)
p.add_argument("--device", default="cuda")
p.add_argument("--compile", action="store_true")
p.add_argument("--dtype", default="f32")
a = p.parse_args()
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
m = M().to(dev)
n = sum(p.numel() for p in m.parameters())
opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
f = torch.compile(m) if a.compile else m
g = torch.Generator().manual_seed(1)
toks = torch.randint(0, V, (B, T + 1), generator=g).to(dev)
xi, yt = toks[:, :T], toks[:, 1:]
ac = torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16) if a.dtype == "bf16" else torch.autocast("cpu", enabled=False)
def step():
    with ac:
        lo = F.cross_entropy(f(xi).float().view(-1, V), yt.reshape(-1))
    opt.zero_grad(set_to_none=True); lo.backward(); opt.step(); return lo
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
