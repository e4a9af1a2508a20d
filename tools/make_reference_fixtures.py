#!/usr/bin/env python3
"""PyTorch reference for every normlab recipe: writes tiny-model fixtures for the Rust tests.

A short, independent re-implementation of the decoder-only Transformer and of each placement
recipe, written from KiteNorm Table 2 (and the Peri-LN and BHyT papers for Peri-LN, DyT, BHyT;
for the other schemes, their papers and reference code: ReZero's RZTXEncoderLayer,
SkipInit, CaiT's LayerScale, nanochat's x0 lambdas, HybridNorm's OLMo 2 code (per-head q, k, v
RMSNorm), CogView's Sandwich-LN (no embedding norm), Gemma 2's soft-caps, Megatron-LM's
layernorm-1p and qk_l2_norm (Llama 4's L2Norm: unit mean square per head), the Derf repository's
nanoGPT patch, Kimi K2's MuonClip), not from the Rust code. It runs in float64 and, for each
case, writes tests/fixtures/reference/<case>.safetensors with

    param/<name>   the weights (values exactly representable in f32, so both sides use the same)
    input/tokens   int64 [B, T];   input/targets int64 [B, T]
    out/logits     [B, T, V];      out/loss, out/ce, out/reg  (scalars, [1])
    grad/<name>    d loss / d param, loss = CE + lambda * R (KiteNorm eq. 24) when the recipe
                   declares the regulariser
    traj/tokens    int64 [S, M, B, T], traj/targets likewise: S optimizer steps of M micro-batches
    traj/loss      [S] the mean loss of each step (before its update), traj/grad_norm [S] the
                   global gradient norm before clipping, traj/lr [S]
    traj/param/<name>  the weights after S steps

The trajectory is trained with torch.optim.AdamW (weight decay on matrices only, none on
vectors and scalars), torch.nn.utils.clip_grad_norm_ on all parameters together, gradient
accumulation over M micro-batches (each loss / M) and a linear warm-up then cosine schedule
written from its formula (KiteNorm Table 1: warm-up from 1e-10). The Rust model config is in
the file metadata ("config"), the training settings in "train".

Run (from the repository root):
    python3 -m venv ~/.venvs/torchref && ~/.venvs/torchref/bin/pip install torch numpy safetensors
    ~/.venvs/torchref/bin/python tools/make_reference_fixtures.py [CASE ...]
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

torch.set_default_dtype(torch.float64)

V, D, H, L, FF, B, T, EPS = 32, 16, 2, 4, 24, 2, 8, 1e-6
HD = D // H
KAPPA = (1 - 0.99) ** -0.5  # the BHyT paper Remark 3.3: p = 0.99 -> kappa = 10

# ---- norm slots -----------------------------------------------------------------------------
LN = dict(kind="layernorm", gain=True, shift=True)
LN0 = dict(kind="layernorm", gain=True, shift=False)  # KEEL: LayerNorm without shift
SLN = dict(kind="scalar-ln")                           # KiteNorm eq. 4
SRMS = dict(kind="scalar-rms")                         # KiteNorm's scalar slots under RMSNorm
RMS = dict(kind="rmsnorm", gain=True)
RMS0 = dict(kind="rmsnorm", gain=False)                # weightless RMSNorm (F.rms_norm, no weight)
LN1P = dict(kind="layernorm-1p")                       # Megatron-LM's zero-centred gain
SEED = dict(kind="seednorm")                           # SeeDNorm


def dyt(alpha):
    return dict(kind="dyt", alpha=alpha)


def bhyt_star(lam, denom="std"):
    return dict(kind="bhyt-star", lam=lam, denom=denom)


def bhyt(lam):
    return dict(kind="bhyt", lam=lam)


def derf(alpha):
    return dict(kind="derf", alpha=alpha)


def gate(shape, init, per="sublayer", on="branch", scale=None):
    """A learnable residual gate: 'scalar' (ReZero, SkipInit) or 'channel' (LayerScale); on the
    branch, the skip (Admin's omega) or interpolating (nGPT's alpha). With a scale, nGPT's scaled
    parametrisation: stored from `scale`, used as stored * init / scale."""
    return dict(shape=shape, init=init, per=per, on=on, scale=scale)


L2 = dict(kind="l2")  # nGPT's justnorm: x / ||x||, no epsilon


def justnorm(x):
    return x / x.norm(p=2, dim=-1, keepdim=True)


def norm_params(spec, name, gen):
    """Parameters of one norm slot, perturbed from their init so every path is exercised."""
    if spec is None:
        return {}
    k, p = spec["kind"], {}
    n = lambda *shape: torch.randn(*shape, generator=gen)
    if k in ("layernorm", "rmsnorm") and spec.get("gain", True):
        p["gain"] = 1 + 0.2 * n(D)
    if k == "layernorm" and spec["shift"]:
        p["shift"] = 0.2 * n(D)
    if k == "scalar-ln":
        p["gain"] = 1 + 0.3 * n(1)
        p["shift"] = 0.2 * n(1)
    if k == "scalar-rms":
        p["gain"] = 1 + 0.3 * n(1)
    if k == "dyt":
        p["gain"], p["shift"], p["alpha"] = 1 + 0.2 * n(D), 0.2 * n(D), spec["alpha"] * (1 + 0.1 * n(1))
    if k in ("bhyt-star", "bhyt"):
        p["gain"], p["lambda"] = 1 + 0.2 * n(D), spec["lam"] * (1 + 0.1 * n(1))
    if k == "layernorm-1p":  # the stored gain is centred on 0
        p["gain"], p["shift"] = 0.2 * n(D), 0.2 * n(D)
    if k == "seednorm":  # beta away from 0 so that tanh(x . beta) and alpha both matter, short of
        # saturation, where 1 - tanh^2 in f32 loses the digits the trajectory compares
        p["gain"], p["alpha"], p["beta"] = 1 + 0.2 * n(D), 1 + 0.3 * n(D), 0.1 * n(D)
    if k == "derf":
        p["gain"], p["shift"] = 1 + 0.2 * n(D), 0.2 * n(D)
        p["alpha"], p["offset"] = spec["alpha"] * (1 + 0.1 * n(1)), 0.3 * n(1)
    return {f"{name}.{key}": v for key, v in p.items()}


def apply_norm(spec, P, name, x, variance=None):
    if spec is None:
        return x
    k = spec["kind"]
    g = P.get(f"{name}.gain")
    if k in ("layernorm", "scalar-ln"):
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + EPS)
        y = y * g if g is not None else y
        return y + P[f"{name}.shift"] if f"{name}.shift" in P else y
    if k in ("rmsnorm", "scalar-rms"):  # scalar-rms: one gain gamma', no centring, no shift
        y = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
        return y * g if g is not None else y
    if k == "dyt":
        return g * torch.tanh(P[f"{name}.alpha"] * x) + P[f"{name}.shift"]
    if k == "layernorm-1p":  # Megatron-LM's apply_layernorm_1p: (1 + gamma) * LN(x) + beta
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + EPS)
        return y * (1 + g) + P[f"{name}.shift"]
    if k == "l2":
        return justnorm(x)
    if k == "seednorm":  # SeeDNorm: [tanh(x beta^T) alpha + gamma] * x / RMS(x), x beta^T one number per token
        rescale = torch.tanh(x @ P[f"{name}.beta"]).unsqueeze(-1)
        return (rescale * P[f"{name}.alpha"] + g) * x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
    if k == "derf":  # Stronger Normalization-Free Transformers: gamma * erf(alpha x + s) + beta
        return g * torch.erf(P[f"{name}.alpha"] * x + P[f"{name}.offset"]) + P[f"{name}.shift"]
    lam = P[f"{name}.lambda"]
    if k == "bhyt-star":  # the BHyT paper's eq. 1 (std) or the authors' RMS denominator
        mu = x.mean(-1, keepdim=True)
        if spec["denom"] == "std":
            den = KAPPA * torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + EPS) + mu.abs()
        else:
            den = KAPPA * torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
        return g * torch.tanh(lam * x / den)
    if k == "bhyt":  # Algorithm 1: s^2 = mean(x^2) unless an approximation is supplied
        s2 = (x ** 2).mean(-1, keepdim=True) if variance is None else variance
        return g * torch.tanh(lam * x / (KAPPA * torch.sqrt(s2 + EPS)))
    raise ValueError(k)


# ---- recipes, written from KiteNorm Table 2 and the Peri-LN and BHyT papers ------------------
def sub(inp=None, out=None, outer=None, a=1.0, c=1.0, s=1.0, init_out=1.0, init_in=1.0, gate=None):
    return dict(inp=inp, out=out, outer=outer, a=a, c=c, s=s, init_out=init_out, init_in=init_in, gate=gate)


def recipe(name):
    """Returns (sublayers [2L], embedding norm, final norm, qk_norm, regulariser lambda,
    embedding scale e0 or None, extras). qk_norm: None, "head" (per head, Qwen3, HybridNorm), "full"
    (OLMo 2) or "l2" (unit mean square per head, no weight: Megatron-LM's L2Norm). extras: v_norm
    ("head" or None), attention and final soft-caps, x0 mixing (initial lambda_r, lambda_0) and
    QK-clip (tau, alpha)."""
    subs, emb, fin, qk, reg, escale = [], None, None, None, 0.0, None
    ex = dict(v=None, attn_cap=None, final_cap=None, x0=None, clip=None, ngpt=False)
    for l in range(1, 2 * L + 1):
        k, attn = (l + 1) // 2, l % 2 == 1
        if name == "post":
            subs.append(sub(outer=LN))
        elif name in ("pre", "pre-mlp"):
            subs.append(sub(inp=LN)); fin = LN
        elif name == "pre-rms":  # the BHyT paper's RMSNorm baseline (Llama-3.2): RMSNorm pre-norm
            subs.append(sub(inp=RMS)); fin = RMS
        elif name == "lns-rms":  # LayerNorm-Scaling on RMSNorm: k^-1/2 after each input RMSNorm
            subs.append(sub(inp=RMS, s=k ** -0.5)); fin = RMS
        elif name == "peri-rms":  # the Peri-LN paper (section 3): RMSNorm before and after each module
            subs.append(sub(inp=RMS, out=RMS)); emb = fin = RMS
        elif name == "gpt2-pre":
            subs.append(sub(inp=LN, init_out=1 / math.sqrt(2 * L))); fin = LN
        elif name == "lns":
            subs.append(sub(inp=LN, s=k ** -0.5)); fin = LN
        elif name == "peri":
            subs.append(sub(inp=LN, out=LN)); emb = fin = LN
        elif name == "peri-rms-frozen":  # the Peri-LN paper: RMSNorm; section 4.4.1: output gain fixed at 1
            subs.append(sub(inp=RMS, out=dict(kind="rmsnorm", gain=False))); emb = fin = RMS
        elif name == "mix":
            n_post = math.floor(0.25 * L)
            if k <= n_post:
                subs.append(sub(outer=LN))
            else:
                subs.append(sub(inp=LN, init_out=1 / math.sqrt(2 * (L - n_post))))
            fin = LN
        elif name == "keel":
            subs.append(sub(inp=LN0, outer=None if l == 1 else LN0, a=1.0 if k == 1 else 2.0 * L))
        elif name == "kitenorm-rms":
            subs.append(sub(inp=SRMS, outer=SRMS, c=1 / (2 * L))); reg = 1.0
        elif name in ("kitenorm", "kitenorm-no-reg"):
            subs.append(sub(inp=SLN, outer=SLN, c=1 / (2 * L))); reg = 1.0 if name == "kitenorm" else 0.0
        elif name == "kitenorm-no-inner":
            subs.append(sub(outer=SLN, c=1 / (2 * L))); reg = 1.0
        elif name == "kitenorm-vector-ln":
            subs.append(sub(inp=LN, outer=LN, c=1 / (2 * L))); reg = 1.0
        elif name == "dyt":  # DyT's LLaMA recipe, d <= 4096 row: 0.8 attention, 0.2 FFN and final
            subs.append(sub(inp=dyt(0.8 if attn else 0.2))); fin = dyt(0.2); escale = math.sqrt(D)
        elif name == "dyt-plain":
            subs.append(sub(inp=dyt(0.5))); fin = dyt(0.5)
        elif name == "bhyt-star":
            subs.append(sub(inp=bhyt_star(2.0 if attn else 1.0))); fin = bhyt_star(1.0)
        elif name == "bhyt":
            subs.append(sub(inp=bhyt(2.0 if attn else 1.0))); fin = bhyt(1.0)
        elif name == "olmo2":  # OLMo 2 normalises q and k over the full width, before the head split
            subs.append(sub(out=RMS)); fin = RMS; qk = "full"
        elif name == "olmo2-head":
            subs.append(sub(out=RMS)); fin = RMS; qk = "head"
        elif name == "deepnorm":
            beta = (8 * L) ** -0.25
            subs.append(sub(outer=LN, a=(2 * L) ** 0.25, init_out=beta, init_in=beta))
        elif name == "sandwich":  # CogView's Sandwich-LN / Gemma 2: LN before and after each module,
            # final LN; the embeddings go straight into the first block (CogView's
            # GPT2ParallelTransformer, Gemma2Model): no embedding norm, unlike peri
            subs.append(sub(inp=LN, out=LN)); fin = LN
        elif name == "pre-1p":
            subs.append(sub(inp=LN1P)); fin = LN1P
        elif name == "derf":  # the Derf repository's GPT-2 patch: alpha0 = 1 everywhere, shared_scale sqrt(d)
            subs.append(sub(inp=derf(1.0))); fin = derf(1.0); escale = math.sqrt(D)
        elif name == "rezero":  # ReZero: one resweight per layer for both sublayers, no norms
            subs.append(sub(gate=gate("scalar", 0.0, "layer")))
        elif name == "skipinit":  # SkipInit: a scalar at the end of every branch
            subs.append(sub(gate=gate("scalar", 0.0)))
        elif name == "layerscale":  # CaiT: pre-norm + diag(lambda), lambda0 = 0.1 for depth <= 18
            subs.append(sub(inp=LN, gate=gate("channel", 0.1))); fin = LN
        elif name == "x0-mix":  # nanochat: x0 = norm(embed); x = resid_lambda x + x0_lambda x0 per layer
            subs.append(sub(inp=RMS0)); emb = fin = RMS0; ex["x0"] = (1.0, 0.0)
        elif name in ("hybridnorm", "hybridnorm-star"):
            first = name == "hybridnorm-star" and k == 1
            if first:  # HybridNorm*: the first block in pre-norm
                subs.append(sub(inp=RMS))
            elif attn:  # Y = X + Attn_QKV(X); the FFN reads RMS(Y) and adds to it
                subs.append(sub(outer=RMS))
            else:
                subs.append(sub())
            # The authors' OLMo attention(): q, k, v RMS-normalised per head (size d/H, one gain
            # shared by the heads) after the head split, q and k before RoPE
            fin = RMS; qk = "head"; ex["v"] = "head"
        elif name == "softcap":  # Gemma 2's soft-caps, here at 2 and 3 so that they bite
            subs.append(sub(inp=RMS)); fin = RMS; ex["attn_cap"], ex["final_cap"] = 2.0, 3.0
        elif name == "qk-l2":  # Megatron-LM's qk_l2_norm: q, k per head to unit mean square
            subs.append(sub(inp=RMS)); fin = RMS; qk = "l2"
        elif name == "qk-clip":  # MuonClip with tau = 1.5 so that it clips at this size
            subs.append(sub(inp=RMS)); fin = RMS; ex["clip"] = (1.5, 0.5)
        elif name == "admin-profile":  # Admin with its profiling pass: the gates start at 1
            subs.append(sub(outer=LN, gate=gate("channel", 1.0, on="skip")))
        elif name == "admin":  # admin-torch: x * omega + f(x), then the post-LN; O(log N) default omega
            n_res = 2 * L
            omega = ((n_res + 1) / math.log(n_res + 1) - 1) ** 0.5
            subs.append(sub(outer=LN, gate=gate("channel", omega, on="skip")))
        elif name == "seednorm":
            subs.append(sub(inp=SEED)); fin = SEED
        elif name == "deepscalelm":  # the authors' Megatron block: lambda * x + beta * F(LN(x)), beta^2 = 1/L
            subs.append(sub(inp=LN, a=math.sqrt(1 - 1 / L), c=math.sqrt(1 / L))); fin = LN
        elif name == "ngpt":  # NVIDIA's nGPT model.py: h = norm(norm(h) + |alpha| (norm(F(h)) - norm(h)))
            subs.append(sub(out=L2, outer=L2, gate=gate("channel", 0.05, on="interpolate", scale=D ** -0.5)))
            ex["ngpt"] = True
        else:
            raise ValueError(name)
    return subs, emb, fin, qk, reg, escale, ex


# ---- the model ------------------------------------------------------------------------------
def rope(x):  # x [B, H, T, hd], rotate-half convention
    inv = 1.0 / (ROPE_BASE ** (torch.arange(0, HD, 2) / HD))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


# When a list, attention() appends each call's per-head largest logit (QK-clip's S_max).
LOGIT_MAXIMA = None


def attention(P, pre, x, qk, ex):
    b, t, _ = x.shape
    heads = lambda y: y.view(b, t, H, HD).transpose(1, 2)
    q, k, v = x @ P[f"{pre}.wq"], x @ P[f"{pre}.wk"], x @ P[f"{pre}.wv"]
    if qk == "full":
        q, k = apply_norm(RMS, P, f"{pre}.q_norm", q), apply_norm(RMS, P, f"{pre}.k_norm", k)
    q, k, v = heads(q), heads(k), heads(v)
    if qk == "head":  # gains of size d/H, shared by the heads
        q, k = apply_norm(RMS, P, f"{pre}.q_norm", q), apply_norm(RMS, P, f"{pre}.k_norm", k)
    if ex["v"] == "head":  # HybridNorm's QKV-norm: the values per head too (the authors' v_norm)
        v = apply_norm(RMS, P, f"{pre}.v_norm", v)
    if qk == "l2":  # Megatron-LM's L2Norm: x * rsqrt(mean(x^2) + eps) per head, no weight, before
        # RoPE (Llama 4 applies it after; a rotation keeps mean(x^2), so the two orders agree)
        q, k = apply_norm(RMS0, P, f"{pre}.q_norm", q), apply_norm(RMS0, P, f"{pre}.k_norm", k)
    q, k = rope(q), rope(k)
    scale = 1 / math.sqrt(HD)
    if ex["ngpt"]:  # after RoPE: sqk * justnorm per head; softmax scale sqrt(head_dim)
        sqk = (P[f"{pre}.sqk"] * (1.0 / D ** -0.5)).view(1, H, 1, HD)
        q, k, scale = sqk * justnorm(q), sqk * justnorm(k), math.sqrt(HD)
    att = (q @ k.transpose(-2, -1)) * scale
    causal = torch.ones(t, t, dtype=torch.bool).triu(1)
    if LOGIT_MAXIMA is not None:
        LOGIT_MAXIMA.append(att.detach().masked_fill(causal, float("-inf")).amax(dim=(0, 2, 3)))
    if ex["attn_cap"] is not None:  # Gemma 2: c * tanh(s / c) before the mask
        att = ex["attn_cap"] * torch.tanh(att / ex["attn_cap"])
    att = att.masked_fill(causal, float("-inf"))
    o = att.softmax(-1) @ v
    return o.transpose(1, 2).reshape(b, t, D) @ P[f"{pre}.wo"]


def ffn(P, pre, x):
    if f"{pre}.suv" in P:  # nGPT: uv = suv * sqrt(d) * c_fc(h); u * silu(v), u = x W3, v = x W1
        suv = P[f"{pre}.suv"] * math.sqrt(D)
        u, v = (x @ P[f"{pre}.w3"]) * suv[:FF], (x @ P[f"{pre}.w1"]) * suv[FF:]
        return (u * F.silu(v)) @ P[f"{pre}.w2"]
    if f"{pre}.w3" in P:
        return (F.silu(x @ P[f"{pre}.w1"]) * (x @ P[f"{pre}.w3"])) @ P[f"{pre}.w2"]
    return F.gelu(x @ P[f"{pre}.w1"]) @ P[f"{pre}.w2"]


def forward(P, tokens, rec):
    subs, emb, fin, qk, _, escale, ex = rec
    x = P["tok_emb"][tokens]
    if escale is not None:
        x = P["emb_scale"] * x
    x = apply_norm(emb, P, "emb_norm", x)
    x0 = x
    sums = []
    for i in range(L):
        if ex["x0"] is not None:  # modded-nanogpt / nanochat: x = lambda_r x + lambda_0 x0
            x = P[f"layers.{i}.resid_lambda"] * x + P[f"layers.{i}.x0_lambda"] * x0
        exact = None
        for j, kind in enumerate(("attn", "ffn")):
            s, pre = subs[2 * i + j], f"layers.{i}.{kind}"
            variance = None
            if s["inp"] is not None and s["inp"]["kind"] == "bhyt":
                if kind == "attn":
                    exact = variance = (x ** 2).mean(-1, keepdim=True)
                else:  # Theorem 3.5: s^2 + ||W_V W_O||_F^2 / (T d) * (lambda_attn / kappa)^2
                    a = f"layers.{i}.attn"
                    wvwo = (P[f"{a}.f.wv"] @ P[f"{a}.f.wo"]).pow(2).sum()
                    variance = exact + wvwo / (T * D) * (P[f"{a}.input_norm.lambda"] / KAPPA) ** 2
            h = s["s"] * apply_norm(s["inp"], P, f"{pre}.input_norm", x, variance)
            f = attention(P, f"{pre}.f", h, qk, ex) if kind == "attn" else ffn(P, f"{pre}.f", h)
            branch = apply_norm(s["out"], P, f"{pre}.output_norm", f)
            skip = x
            g = s["gate"]
            if g is not None:
                owner = f"layers.{i}" if g["per"] == "layer" else pre
                used = P[f"{owner}.gate"] * (g["init"] / g["scale"] if g["scale"] else 1.0)
                if g["on"] == "branch":  # z = a X + c (g * N_out(F(...)))
                    branch = used * branch
                elif g["on"] == "skip":  # Admin: z = a (omega * X) + c N_out(F(...))
                    skip = used * x
            if g is not None and g["on"] == "interpolate":  # nGPT: A + |alpha| (B - A), A = norm(h)
                a_norm = apply_norm(s["outer"], P, f"{pre}.outer_norm", x)
                z = a_norm + used.abs() * (branch - a_norm)
            else:
                z = s["a"] * skip + s["c"] * branch
            sums.append(z)
            x = apply_norm(s["outer"], P, f"{pre}.outer_norm", z)
    logits = apply_norm(fin, P, "final_norm", x) @ P["lm_head"]
    if ex["ngpt"]:  # nGPT: logits = sz * lm_head(h), sz used at stored * sqrt(d)
        logits = logits * (P["sz"] * (1.0 / D ** -0.5))
    if ex["final_cap"] is not None:  # Gemma 2: c * tanh(logits / c)
        logits = ex["final_cap"] * torch.tanh(logits / ex["final_cap"])
    return logits, sums


def admin_profile(P, tokens, rec):
    """Transformer-Clinic's adaptive-profiling, one forward: ratio = 1; at each sublayer the skip
    gate omega is set to ratio, then ratio = sqrt(var(omega * X) + var(F(X))) over every element
    (numpy's var of the flattened tensors). Returns the omegas; P's gates are overwritten."""
    subs = rec[0]
    ratio, omegas = 1.0, []
    with torch.no_grad():
        x = P["tok_emb"][tokens]
        for i in range(L):
            for j, kind in enumerate(("attn", "ffn")):
                s, pre = subs[2 * i + j], f"layers.{i}.{kind}"
                P[f"{pre}.gate"].fill_(ratio)
                omegas.append(ratio)
                h = apply_norm(s["inp"], P, f"{pre}.input_norm", x)
                f = attention(P, f"{pre}.f", h, None, rec[6]) if kind == "attn" else ffn(P, f"{pre}.f", h)
                skip = P[f"{pre}.gate"] * x
                ratio = math.sqrt(skip.var(unbiased=False).item() + f.var(unbiased=False).item())
                x = apply_norm(s["outer"], P, f"{pre}.outer_norm", skip + f)
    return omegas


def variance_regulariser(sums):  # KiteNorm eq. 24
    return torch.stack([F.relu(z.var(-1, unbiased=False) - 1).mean() for z in sums]).mean()


# ---- parameters -----------------------------------------------------------------------------
def make_params(rec, mlp, gen):
    subs, emb, fin, qk, _, escale, ex = rec
    n = lambda *shape, std: std * torch.randn(*shape, generator=gen)
    std, P = 0.25, {}
    P["tok_emb"] = n(V, D, std=1.0)
    if escale is not None:
        P["emb_scale"] = escale * (1 + 0.1 * n(1, std=1))
    P.update(norm_params(emb, "emb_norm", gen))
    for i in range(L):
        for j, kind in enumerate(("attn", "ffn")):
            s, pre = subs[2 * i + j], f"layers.{i}.{kind}"
            for slot in ("input_norm", "output_norm", "outer_norm"):
                P.update(norm_params(s[{"input_norm": "inp", "output_norm": "out", "outer_norm": "outer"}[slot]], f"{pre}.{slot}", gen))
            if kind == "attn":
                P[f"{pre}.f.wq"], P[f"{pre}.f.wk"] = n(D, D, std=std), n(D, D, std=std)
                P[f"{pre}.f.wv"] = n(D, D, std=std * s["init_in"])
                P[f"{pre}.f.wo"] = n(D, D, std=std * s["init_out"])
                if qk in ("full", "head"):
                    w = D if qk == "full" else HD
                    P[f"{pre}.f.q_norm.gain"], P[f"{pre}.f.k_norm.gain"] = 1 + 0.2 * n(w, std=1), 1 + 0.2 * n(w, std=1)
                if ex["v"] == "head":
                    P[f"{pre}.f.v_norm.gain"] = 1 + 0.2 * n(HD, std=1)
                if ex["ngpt"]:  # sqk stored from 1/sqrt(d), perturbed
                    P[f"{pre}.f.sqk"] = D ** -0.5 * (1 + 0.3 * n(D, std=1))
            else:
                hidden = 4 * D if mlp else FF
                P[f"{pre}.f.w1"] = n(D, hidden, std=std * s["init_in"])
                if not mlp:
                    P[f"{pre}.f.w3"] = n(D, hidden, std=std * s["init_in"])
                P[f"{pre}.f.w2"] = n(hidden, D, std=std * s["init_out"])
                if ex["ngpt"]:  # suv stored from 1, perturbed
                    P[f"{pre}.f.suv"] = 1 + 0.3 * n(2 * hidden, std=1)
            g = s["gate"]
            if g is not None and (g["per"] == "sublayer" or kind == "attn"):
                # Perturbed away from its init (ReZero's 0 would hide every branch gradient).
                owner = f"layers.{i}" if g["per"] == "layer" else pre
                width = D if g["shape"] == "channel" else 1
                if g["scale"]:  # stored from the scale; some entries negative, so |alpha| matters
                    P[f"{owner}.gate"] = g["scale"] * (1 + 0.8 * n(width, std=1))
                else:
                    P[f"{owner}.gate"] = g["init"] + 0.3 * n(width, std=1)
        if ex["x0"] is not None:
            P[f"layers.{i}.resid_lambda"] = ex["x0"][0] + 0.2 * n(1, std=1)
            P[f"layers.{i}.x0_lambda"] = ex["x0"][1] + 0.3 * n(1, std=1)
    P.update(norm_params(fin, "final_norm", gen))
    P["lm_head"] = n(D, V, std=std)
    if ex["ngpt"]:
        P["sz"] = D ** -0.5 * (1 + 0.3 * n(V, std=1))
        normalize_matrices(P)
    # Round to f32 so the Rust side (f32) loads exactly these values.
    return {k: v.float().double().requires_grad_(True) for k, v in P.items()}


def normalize_matrices(P):
    """NVIDIA's nGPT normalize_matrices, in normlab's [in, out] layout: every vector along
    d_model to unit norm (embedding rows, W_q/W_k/W_v/W_1/W_3/lm_head columns, W_o/W_2 rows)."""
    with torch.no_grad():
        for name, w in P.items():
            if w.dim() != 2:
                continue
            along_rows = name == "tok_emb" or name.endswith((".wo", ".w2"))
            w.copy_(justnorm(w) if along_rows else justnorm(w.T).T)


CASES = {
    # case: (Rust recipe config, ffn, rope base)
    "post": ("post", "glu", 10000.0),
    "pre": ("pre", "glu", 10000.0),
    "pre-mlp": ("pre", "mlp", 10000.0),
    "gpt2-pre": ("gpt2-pre", "glu", 10000.0),
    "lns": ("lns", "glu", 10000.0),
    "peri": ("peri", "glu", 10000.0),
    "peri-rms-frozen": (
        {"preset": "peri", "norm": "rmsnorm", "sublayer": {"output": {"kind": "ln", "gain": False}}},
        "glu",
        10000.0,
    ),
    "mix": ("mix", "glu", 10000.0),
    "keel": ("keel", "glu", 10000.0),
    "kitenorm": ("kitenorm", "glu", 500000.0),
    "kitenorm-no-inner": ("kitenorm-no-inner", "glu", 500000.0),
    "kitenorm-vector-ln": ("kitenorm-vector-ln", "glu", 500000.0),
    "kitenorm-no-reg": ("kitenorm-no-reg", "glu", 500000.0),
    "dyt": ("dyt", "glu", 10000.0),
    "bhyt-star": ("bhyt-star", "glu", 10000.0),
    "bhyt": ("bhyt", "glu", 10000.0),
    "olmo2": ("olmo2", "glu", 10000.0),
    "deepnorm": ("deepnorm", "glu", 10000.0),
    # Added later; appended so that the cases above keep their seeds.
    "dyt-plain": ("dyt-plain", "glu", 10000.0),
    "olmo2-head": ({"preset": "olmo2", "qk_norm": "head"}, "glu", 10000.0),
    "kitenorm-rms": ({"preset": "kitenorm", "norm": "rmsnorm"}, "glu", 500000.0),
    "pre-rms": ("pre-rms", "glu", 10000.0),
    "lns-rms": ("lns-rms", "glu", 10000.0),
    "peri-rms": ("peri-rms", "glu", 10000.0),
    "sandwich": ("sandwich", "glu", 10000.0),
    "pre-1p": ("pre-1p", "glu", 10000.0),
    "derf": ("derf", "glu", 10000.0),
    "rezero": ("rezero", "glu", 10000.0),
    "skipinit": ("skipinit", "glu", 10000.0),
    "layerscale": ("layerscale", "glu", 10000.0),
    "x0-mix": ("x0-mix", "glu", 10000.0),
    "hybridnorm": ("hybridnorm", "glu", 10000.0),
    "hybridnorm-star": ("hybridnorm-star", "glu", 10000.0),
    "softcap": ({"preset": "softcap", "attn_softcap": 2.0, "final_softcap": 3.0}, "glu", 10000.0),
    "qk-l2": ("qk-l2", "glu", 10000.0),
    "qk-clip": ({"preset": "qk-clip", "qk_clip": {"tau": 1.5, "alpha": 0.5}}, "glu", 10000.0),
    "admin": ("admin", "glu", 10000.0),
    "ngpt": ("ngpt", "glu", 10000.0),
    "deepscalelm": ("deepscalelm", "mlp", 10000.0),
    "seednorm": ("seednorm", "glu", 10000.0),
    "admin-profile": ("admin-profile", "glu", 10000.0),
}

# ---- the trajectory: normlab's optimizer, written from its documented rules -----------------
TRAIN = dict(steps=12, micro_batches=2, lr=3e-3, beta1=0.95, beta2=0.95, eps=1e-8, weight_decay=0.1,
             grad_clip=1.0, warmup_fraction=0.25, warmup_start_lr=1e-10, end_lr=0.0)


def lr_at(s, t=TRAIN):
    """Linear warm-up from warmup_start_lr over W = round(f * S) steps, then cosine to end_lr."""
    total = t["steps"]
    w = round(t["warmup_fraction"] * total)
    if s < w:
        return t["warmup_start_lr"] + (t["lr"] - t["warmup_start_lr"]) * s / w
    progress = (s - w) / max(total - w, 1)
    return t["end_lr"] + (t["lr"] - t["end_lr"]) * 0.5 * (1 + math.cos(math.pi * progress))


def loss_of(P, rec, tokens, targets):
    logits, sums = forward(P, tokens, rec)
    ce = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    return ce + rec[4] * variance_regulariser(sums) if rec[4] > 0 else ce


def qk_clip(P, maxima, clip):
    """MuonClip after a step: a head whose largest logit S in the step exceeded tau has its
    W_q columns scaled by (tau/S)^alpha and its W_k columns by (tau/S)^(1 - alpha)."""
    tau, alpha = clip
    with torch.no_grad():
        for i in range(L):
            s = torch.stack(maxima[i::L]).amax(0)  # over the step's micro-batches
            for h in range(H):
                if s[h] > tau:
                    gamma = tau / s[h]
                    cols = slice(h * HD, (h + 1) * HD)
                    P[f"layers.{i}.attn.f.wq"][:, cols] *= gamma ** alpha
                    P[f"layers.{i}.attn.f.wk"][:, cols] *= gamma ** (1 - alpha)


def train_settings(rec):
    """nGPT trains without weight decay and warm-up (the paper)."""
    return dict(TRAIN, weight_decay=0.0, warmup_fraction=0.0) if rec[6]["ngpt"] else TRAIN


def trajectory(P0, rec, gen):
    """Trains a copy of P0 for TRAIN["steps"] steps on fixed random batches."""
    global LOGIT_MAXIMA
    t = train_settings(rec)
    P = {k: v.detach().clone().requires_grad_(True) for k, v in P0.items()}
    decay = [v for v in P.values() if v.dim() >= 2]
    no_decay = [v for v in P.values() if v.dim() < 2]
    opt = torch.optim.AdamW(
        [dict(params=decay, weight_decay=t["weight_decay"]), dict(params=no_decay, weight_decay=0.0)],
        lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    toks = torch.randint(0, V, (t["steps"], t["micro_batches"], B, T + 1), generator=gen)
    losses, norms, lrs = [], [], []
    for s in range(t["steps"]):
        opt.zero_grad()
        total = 0.0
        LOGIT_MAXIMA = []
        for m in range(t["micro_batches"]):
            loss = loss_of(P, rec, toks[s, m, :, :T], toks[s, m, :, 1:])
            (loss / t["micro_batches"]).backward()
            total += loss.item() / t["micro_batches"]
        norm = torch.nn.utils.clip_grad_norm_(list(P.values()), t["grad_clip"])
        for g in opt.param_groups:
            g["lr"] = lr_at(s, t)
        opt.step()
        if rec[6]["ngpt"]:
            normalize_matrices(P)
        if rec[6]["clip"] is not None:
            qk_clip(P, LOGIT_MAXIMA, rec[6]["clip"])
        LOGIT_MAXIMA = None
        losses.append(total); norms.append(norm.item()); lrs.append(lr_at(s, t))
    out = {"traj/tokens": toks[..., :T].contiguous(), "traj/targets": toks[..., 1:].contiguous()}
    out["traj/loss"] = torch.tensor(losses).float()
    out["traj/grad_norm"] = torch.tensor(norms).float()
    out["traj/lr"] = torch.tensor(lrs).float()
    out.update({f"traj/param/{k}": v.detach().float() for k, v in P.items()})
    return out, losses


# ---- DeepScaleLM's moment-control standard deviations ---------------------------------------
# Written from the paper's moment formulas and the authors' Megatron-LM code (moment_control_sigma,
# sigma_attn_v_out) with dropout 0 and one embedding table; the GLU rows apply the same rule
# (unit output variance) with SiLU's moments by Gauss-Hermite quadrature (the Rust side uses a
# trapezoid rule), the authors' GeLU MLP their ReLU moments.
GH_X, GH_W = __import__("numpy").polynomial.hermite_e.hermegauss(120)
GH_W = GH_W / math.sqrt(2 * math.pi)  # E[f(z)] = sum w_i f(x_i), z ~ N(0, 1)


def silu_np(x):
    return x / (1 + __import__("numpy").exp(-x))


def silu_kernel(r):
    """E[SiLU(a) SiLU(b)], a, b standard normal with correlation r."""
    np = __import__("numpy")
    a = GH_X[:, None]
    b = r * a + math.sqrt(max(1 - r * r, 0.0)) * GH_X[None, :]
    return float((GH_W[:, None] * GH_W[None, :] * silu_np(a) * silu_np(b)).sum())


def moment_sigmas(d, dq, m, n_layers, ffn, r0, lam2, beta2):
    if ffn == "mlp":  # ReLU: E[relu^2] = 1/2, arc-cosine kernel
        ffn_in = ffn_out = (2 / (m * d)) ** 0.25
        corr = lambda r: r + (math.sqrt(1 - r * r) - r * math.acos(r)) / math.pi
    else:
        k1 = silu_kernel(1.0)
        ffn_in, ffn_out = d ** -0.5, (m * k1) ** -0.5
        corr = lambda r: r * silu_kernel(r) / k1
    attn, r, v = [], r0, 1.0
    for _ in range(n_layers):
        attn.append((1 / (r * d * dq)) ** 0.25)
        for branch_r in (1.0, None):  # attention: uniform weights make every position alike
            branch_r = corr(r) if branch_r is None else branch_r
            mixed = lam2 * v + beta2
            r, v = (lam2 * v * r + beta2 * branch_r) / mixed, mixed
    return dict(embedding=1.0, qk=d ** -0.5, attn=attn, ffn_in=ffn_in, ffn_out=ffn_out, output=d ** -0.5)


MOMENT_CASES = [
    dict(d_model=64, n_heads=4, head_dim=16, ffn="mlp", d_ff=256, n_layers=6, r0=0.221),
    dict(d_model=48, n_heads=4, head_dim=16, ffn="glu", d_ff=128, n_layers=5, r0=0.3),
    dict(d_model=32, n_heads=2, head_dim=16, ffn="mlp", d_ff=80, n_layers=24, r0=0.05),
]


def write_moment_control(out_dir):
    cases = []
    for c in MOMENT_CASES:
        beta2 = 1 / c["n_layers"]  # deepscalelm: beta^2 = k_beta / L, k_beta = 1
        dq = c["n_heads"] * c["head_dim"]
        s = moment_sigmas(c["d_model"], dq, c["d_ff"], c["n_layers"], c["ffn"], c["r0"], 1 - beta2, beta2)
        cases.append(dict(case=c, sigmas=s))
    cases.append(dict(silu_second_moment=silu_kernel(1.0), silu_kernel_half=silu_kernel(0.5)))
    with open(os.path.join(out_dir, "moment_control.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print("moment_control.json", [round(x, 6) for x in cases[0]["sigmas"]["attn"]])


def main(only):
    """Writes every case, or only the cases named on the command line."""
    global ROPE_BASE
    out_dir = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "reference")
    os.makedirs(out_dir, exist_ok=True)
    if not only or "moment_control" in only:
        write_moment_control(out_dir)
    for idx, (case, (recipe_cfg, ffn_kind, rope_base)) in enumerate(CASES.items()):
        if only and case not in only:
            continue
        ROPE_BASE = rope_base
        gen = torch.Generator().manual_seed(1000 + idx)
        rec = recipe(case)
        P = make_params(rec, ffn_kind == "mlp", gen)
        toks = torch.randint(0, V, (B, T + 1), generator=gen)
        tokens, targets = toks[:, :T], toks[:, 1:]
        logits, sums = forward(P, tokens, rec)
        ce = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        lam = rec[4]
        reg = variance_regulariser(sums)
        loss = ce + lam * reg if lam > 0 else ce
        loss.backward()
        traj, losses = trajectory(P, rec, gen)
        tensors = {f"param/{k}": v.detach().float() for k, v in P.items()}
        tensors.update(traj)
        tensors.update({f"grad/{k}": v.grad.float() for k, v in P.items()})
        tensors["input/tokens"], tensors["input/targets"] = tokens.contiguous(), targets.contiguous()
        tensors["out/logits"] = logits.detach().float()
        for k, v in (("loss", loss), ("ce", ce), ("reg", reg)):
            tensors[f"out/{k}"] = v.detach().float().reshape(1)
        if case == "admin-profile":  # the pass on the fixture's own weights and tokens, gates at 1 first
            Q = {k: v.detach().clone() for k, v in P.items()}
            tensors["profile/omega"] = torch.tensor(admin_profile(Q, tokens, rec)).float()
        config = dict(vocab_size=V, d_model=D, n_layers=L, n_heads=H, ffn=ffn_kind, d_glu=FF,
                      rope_base=rope_base, norm_eps=EPS, init_std=0.02, recipe=recipe_cfg)
        meta = {"config": json.dumps(config), "train": json.dumps(train_settings(rec))}
        save_file(tensors, os.path.join(out_dir, f"{case}.safetensors"), metadata=meta)
        print(f"{case:20s} loss {loss.item():.6f}  ce {ce.item():.6f}  reg {reg.item():.6f}  "
              f"trajectory {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main(set(sys.argv[1:]))
