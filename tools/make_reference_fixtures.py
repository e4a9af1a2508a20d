#!/usr/bin/env python3
"""PyTorch reference for every normlab recipe: writes tiny-model fixtures for the Rust tests.

A short, independent re-implementation of the decoder-only Transformer and of each placement
recipe, written from KiteNorm Table 2 (and the Peri-LN and BHyT papers for Peri-LN, DyT, BHyT;
for the other schemes, their papers and reference code: ReZero's RZTXEncoderLayer,
SkipInit, CaiT's LayerScale, nanochat's x0 lambdas, HybridNorm's OLMo 2 code (per-head q, k, v
RMSNorm), CogView's Sandwich-LN (no embedding norm), Gemma 2's soft-caps, Megatron-LM's
layernorm-1p and qk_l2_norm (Llama 4's L2Norm: unit mean square per head), the Derf repository's
nanoGPT patch, Kimi K2's MuonClip; appended later: Qwen's gated attention (the authors'
qiuzh20/gated_attention modeling_qwen3.py), gpt-oss's attention sinks (transformers'
models/gpt_oss/modeling_gpt_oss.py eager_attention_forward), Qwen3-Next's zero-centred RMSNorm
(transformers' models/qwen3_next/modeling_qwen3_next.py Qwen3NextRMSNorm), Gemma 3's block
(transformers' models/gemma3/modeling_gemma3.py Gemma3DecoderLayer, Gemma3Attention), and the
multi-stream residuals: Hyper-Connections (the hyper-connections package 0.4.11,
hyper_connections/hyper_connections.py HyperConnections), mHC (transformers' v5.24.0
models/deepseek_v4/modeling_deepseek_v4.py DeepseekV4HyperConnection, DeepseekV4HyperHead) and
mHC-lite (the authors' FFTYYY/mhc-lite hyper_conn/mhc_lite.py for H_res; the rest as mHC), and
value residual learning (ResFormer: the authors' Zcchill/Value-Residual-Learning
src/modeling/modeling_llama_resformer.py; its learnable two-lambda form from modded-nanogpt's
records/track_1_short/2024-11-09_Replicateleloykun), and Attention Residuals (Kimi's AttnRes, arXiv
2603.15031, full and block: the authors' MoonshotAI/Attention-Residuals README pseudocode, Figure 2
of the paper; checked numerically against tokenbender/nanogpt-attnres-repro
examples/nanogpt/attnres.py BlockAttnResReference, FullAttnResReference), GPAS (Gradient-Preserving
Activation Scaling, arXiv 2506.22049: the authors' dandingsky/GPAS peft_pretraining/modeling_llama.py
GPASBlock and LlamaDecoderLayer.forward's 'pre_gpas') and depth-only CompleteP (Dey et al., arXiv
2505.01618: the authors' EleutherAI/nanoGPT-mup, branch completep, model.py Block.forward's
residual_scaling and configure_optimizers' CompleteP groups) and TaperNorm (Kanavalau, Amo Alonso
& Lall, arXiv 2602.10408: the gated taper from RMSNorm to a learned linear map, its EMA
calibration and its global cosine gate schedule, from the paper's description)), not from the Rust code.
It runs in float64 and, for each case, writes
tests/fixtures/reference/<case>.safetensors with

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
vectors and scalars, except zc-rms's zero-centred gains, which are decayed with the matrices, and
the hyper-connection parameters (`.hc.`, `hc_head.`), none of which is decayed, matrices included;
one epsilon for all, except under CompleteP, where every parameter inside the Transformer layers
(names starting with `layers.`) gets eps * L_base / L and the embedding, final norm and output
projection keep eps), torch.nn.utils.clip_grad_norm_ on all parameters together, gradient
accumulation over M micro-batches (each loss / M) and a linear warm-up then cosine schedule
written from its formula (KiteNorm Table 1: warm-up from 1e-10). The Rust model config is in
the file metadata ("config"), the training settings in "train".

Run (from the repository root):
    python3 -m venv ~/.venvs/torchref && ~/.venvs/torchref/bin/pip install torch numpy safetensors
    ~/.venvs/torchref/bin/python tools/make_reference_fixtures.py [CASE ...]
"""
import itertools
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
ZCRMS = dict(kind="rmsnorm-zc")                        # Qwen3-Next's zero-centred RMSNorm: (1 + w) x / rms
TAPER = dict(kind="tapernorm")                         # TaperNorm: g RMSNorm(x) + (1 - g) c gamma~ x

# TaperNorm's buffers: held in P (and written to the fixtures) but not learnable, not given to the
# optimizer nor to gradient clipping; the trajectory's post-step hook (taper_step) sets them.
TAPER_BUFFERS = ("taper_gate", "taper_scale", "taper_ema_scaled", "taper_ema_energy")


def is_buffer(name):
    return name.rsplit(".", 1)[-1] in TAPER_BUFFERS


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
    if k == "rmsnorm-zc":  # Qwen3NextRMSNorm's weight, initialised at 0 there, perturbed here
        p["centred_gain"] = 0.2 * n(D)
    if k == "seednorm":  # beta away from 0 so that tanh(x . beta) and alpha both matter, short of
        # saturation, where 1 - tanh^2 in f32 loses the digits the trajectory compares
        p["gain"], p["alpha"], p["beta"] = 1 + 0.2 * n(D), 1 + 0.3 * n(D), 0.1 * n(D)
    if k == "derf":
        p["gain"], p["shift"] = 1 + 0.2 * n(D), 0.2 * n(D)
        p["alpha"], p["offset"] = spec["alpha"] * (1 + 0.1 * n(1)), 0.3 * n(1)
    if k == "tapernorm":  # gate 0.5 so both branches carry gradient; taper_gain and c (the
        # calibrated scale, c ~ 1 / rms at calibration) perturbed about 1 and 0.8; EMAs from 0
        p["gain"], p["taper_gain"] = 1 + 0.2 * n(D), 1 + 0.1 * n(D)
        p["taper_gate"], p["taper_scale"] = torch.full((1,), 0.5), 0.8 + 0.05 * n(1)
        p["taper_ema_scaled"], p["taper_ema_energy"] = torch.zeros(1), torch.zeros(1)
    return {f"{name}.{key}": v for key, v in p.items()}


# When a dict, apply_norm appends, per TaperNorm (by name), each call's detached calibration
# statistics (mean over tokens of ||gamma h||^2 / r(h), mean over tokens of ||gamma h||^2).
TAPER_STATS = None


def apply_norm(spec, P, name, x, variance=None):
    if spec is None:
        return x
    k = spec["kind"]
    g = P.get(f"{name}.gain")
    if k == "tapernorm":  # TaperNorm: g gamma * x / r(x) + (1 - g) c gamma~ * x, r = sqrt(mean x^2 + eps)
        r = torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
        gate = P[f"{name}.taper_gate"]
        if TAPER_STATS is not None:
            with torch.no_grad():
                energy = ((g * x) ** 2).sum(-1)  # ||gamma h_t||^2 per token
                TAPER_STATS.setdefault(name, []).append(
                    ((energy / r.squeeze(-1)).mean(), energy.mean()))
        return gate * (g * x / r) + (1 - gate) * P[f"{name}.taper_scale"] * (P[f"{name}.taper_gain"] * x)
    if k in ("layernorm", "scalar-ln"):
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + EPS)
        y = y * g if g is not None else y
        return y + P[f"{name}.shift"] if f"{name}.shift" in P else y
    if k in ("rmsnorm", "scalar-rms"):  # scalar-rms: one gain gamma', no centring, no shift
        y = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
        return y * g if g is not None else y
    if k == "rmsnorm-zc":  # transformers' (v5.24.0) Qwen3NextRMSNorm, lines 126-143: _norm(x) * (1 + weight)
        y = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + EPS)
        return y * (1 + P[f"{name}.centred_gain"])
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
    QK-clip (tau, alpha); appended later: the attention output gate ("elementwise" or "headwise"),
    attention sinks, a constant (parameter-free) embedding multiplier, the multi-stream residual
    kind (hc) and value residual learning (value_res); Attention Residuals (attn_res: the block
    size S in sublayers, 1 for full AttnRes); GPAS (gpas: one learnable gate per layer after each
    residual addition), CompleteP (completep: the base depth L_base in layers, or None) and
    TaperNorm's gate schedule (taper: the post-step hook taper_step)."""
    subs, emb, fin, qk, reg, escale = [], None, None, None, 0.0, None
    ex = dict(v=None, attn_cap=None, final_cap=None, x0=None, clip=None, ngpt=False,
              attn_gate=None, sinks=False, embed_mult=None, hc=None, value_res=False,
              attn_res=None, gpas=False, completep=None, taper=False)
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
        elif name in ("gated-attn", "gated-attn-head"):
            # Gated Attention for LLMs (Qiu et al., NeurIPS 2025), position G1: the SDPA output of
            # each head times sigmoid(X W_gate), X the normalised sublayer input that q, k, v read;
            # the authors' modeling_qwen3.py (qiuzh20/gated_attention) Qwen3Attention: the gate
            # scores come out of the widened q_proj (lines 271-276, 304-313), and
            # attn_output * torch.sigmoid(gate_score) before o_proj (lines 352-359). Here W_gate is
            # its own [D, H*HD] (elementwise) or [D, H] (headwise) matrix. On pre-rms, no QK-norm.
            subs.append(sub(inp=RMS)); fin = RMS
            ex["attn_gate"] = "elementwise" if name == "gated-attn" else "headwise"
        elif name == "attn-sink":  # gpt-oss's learned sinks, on pre-rms
            subs.append(sub(inp=RMS)); fin = RMS; ex["sinks"] = True
        elif name == "zc-rms":  # Qwen3-Next's zero-centred RMSNorm in every RMSNorm slot of pre-rms
            # (transformers' Qwen3NextDecoderLayer input_layernorm, post_attention_layernorm and
            # Qwen3NextModel.norm are all Qwen3NextRMSNorm); the centred gains are weight-decayed
            subs.append(sub(inp=ZCRMS)); fin = ZCRMS
        elif name == "gemma3":
            # transformers' (v5.24.0) Gemma3DecoderLayer (lines 367-370, 380-402): input_layernorm
            # -> attention -> post_attention_layernorm -> + residual, pre_feedforward_layernorm
            # -> MLP -> post_feedforward_layernorm -> + residual; Gemma3Attention: q_norm, k_norm
            # (RMSNorm over head_dim, one gain shared by the heads) before RoPE (lines 310-311,
            # 329-333); Gemma3TextModel: embeddings times hidden_size**0.5 (line 468, a buffer of
            # Gemma3TextScaledWordEmbedding, not a parameter), no embedding norm, final norm
            # (line 473). Gemma3RMSNorm (lines 119-135) computes x/rms * (1 + w), w initialised at 0
            # (line 430); here gamma * x/rms with gamma = 1 + w under
            # the ordinary "gain" names: the map is affine with unit slope, so gradients and Adam
            # moments coincide, and with no weight decay on vectors AdamW trains both identically.
            # GLU FFN kept (Gemma's GeGLU activation is a model choice outside the recipe), no
            # soft-caps, full causal attention, scale 1/sqrt(head_dim) (query_pre_attn_scalar = HD).
            subs.append(sub(inp=RMS, out=RMS)); fin = RMS; qk = "head"; ex["embed_mult"] = math.sqrt(D)
        elif name == "value-residual":
            # Value residual learning (ResFormer, Zhou et al.) on pre-rms: in every layer i >= 1 the
            # attention values become v = lambda[0] v + lambda[1] v_1, v_1 layer 0's values (after
            # its projection, before attention; layer 0 itself unchanged), lambda = value_lambda
            # of layer i, learnable, from [0.5, 0.5]. The authors' modeling_llama_resformer.py
            # (commit 95652f6) LlamaAttention.forward, lines 375-381 (LlamaFlashAttention2 likewise,
            # lines 479-485): value_states = v_proj(h); layer 0 appends them to
            # formal_layer_values, every later layer takes 0.5 * formal_layer_values[0] +
            # 0.5 * value_states, before the head split (line 386; per head the same), RoPE on
            # q and k only (line 398); LlamaModel.forward starts the list empty per pass
            # (lines 876-888). The fixed 0.5/0.5 made learnable and untied as in modded-nanogpt
            # (records/track_1_short/2024-11-09_Replicateleloykun/1621af10-...txt lines 170,
            # 177-179: lambdas = [0.5, 0.5], v = lambdas[0] v + lambdas[1] v1, v1 layer 0's raw
            # v; scalars trained by Adam without decay, line 426). modded-nanogpt gives layer 0
            # lambdas too (there v1 = v, so its values are scaled by lambda[0] + lambda[1]);
            # here layer 0 has none, as in the authors' code.
            subs.append(sub(inp=RMS)); fin = RMS; ex["value_res"] = True
        elif name in ("hc", "mhc", "mhc-lite"):
            # Multi-stream residuals on pre-rms: n = HC_STREAMS streams, each sublayer's branch keeps
            # its input RMSNorm (it reads the stream mix x_in), the final RMSNorm reads the collapse.
            subs.append(sub(inp=RMS)); fin = RMS; ex["hc"] = name
        elif name in ("attnres", "attnres-block"):
            # Attention Residuals on pre-rms: each sublayer's input RMSNorm reads the depth-attention
            # mix h_j of the sources instead of the running sum, the final RMSNorm reads the final
            # mix; see attnres_forward. Full AttnRes: S = 1; block: S = ceil(2L / N) sublayers.
            subs.append(sub(inp=RMS)); fin = RMS
            ex["attn_res"] = 1 if name == "attnres" else math.ceil(2 * L / ATTNRES_BLOCKS)
        elif name == "gpas":
            # GPAS (Gradient-Preserving Activation Scaling) on pre-rms: the authors' modeling_llama.py
            # (dandingsky/GPAS, commit 3198068) GPASBlock.forward: x - act_fn(gate) * x.detach(),
            # act_fn SiLU, gate a scalar initialised at 0 and trained (not decayed); norm_type
            # 'pre_gpas' in LlamaDecoderLayer.forward: one GPASBlock per decoder layer, applied
            # after the attention's residual addition and again after the FFN's. Forward value
            # (1 - SiLU(a)) x; the gradient reaches x unscaled through the undetached term.
            subs.append(sub(inp=RMS)); fin = RMS; ex["gpas"] = True
        elif name == "completep":
            # Depth-only CompleteP (alpha = 1) on pre-rms: the authors' nanoGPT-mup (EleutherAI,
            # branch completep) Block.forward: x = x + residual_scaling * attn(ln_1(x)), likewise
            # the MLP, residual_scaling = depth_multiplier ** -depth_alpha_exp, depth_multiplier =
            # L / L_base. Here L_base = 2 layers, so m = L / L_base = 2 and each branch is scaled
            # by 1/2. The learning rates are unchanged (m ** (alpha - 1) = 1); Adam's epsilon of the
            # hidden (layer) parameters is scaled by m ** -alpha (trajectory).
            ex["completep"] = 2
            subs.append(sub(inp=RMS, c=ex["completep"] / L)); fin = RMS
        elif name == "tapernorm":
            # TaperNorm (Kanavalau, Amo Alonso & Lall, arXiv 2602.10408) on pre-rms: every input norm
            # is y = g gamma * h / r(h) + (1 - g) c gamma~ * h, gamma and gamma~ learnable, the
            # global gate g and the scale c buffers; the final norm stays an ordinary RMSNorm. The
            # gate follows taper_step after every optimizer step.
            subs.append(sub(inp=TAPER)); fin = RMS; ex["taper"] = True
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


def attention(P, pre, x, qk, ex, values=None):
    """values: for value residual learning, a dict shared by the layers of one pass; the first
    attention sublayer (layer 0, no value_lambda) stores its values there as v_1, each later one
    mixes them into its own."""
    b, t, _ = x.shape
    heads = lambda y: y.view(b, t, H, HD).transpose(1, 2)
    q, k, v = x @ P[f"{pre}.wq"], x @ P[f"{pre}.wk"], x @ P[f"{pre}.wv"]
    if qk == "full":
        q, k = apply_norm(RMS, P, f"{pre}.q_norm", q), apply_norm(RMS, P, f"{pre}.k_norm", k)
    q, k, v = heads(q), heads(k), heads(v)
    if ex.get("value_res") and values is not None:  # ResFormer: v = lambda[0] v + lambda[1] v_1
        lam = P.get(f"{pre}.value_lambda")
        if lam is None:  # layer 0: its values, as they are, become v_1
            values["v1"] = v
        else:
            v = lam[0] * v + lam[1] * values["v1"]
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
    if ex["sinks"]:
        # transformers' gpt_oss eager_attention_forward (v5.24.0 lines 227-255; GptOssAttention.sinks,
        # one per head, line 285): the head's sink logit appended to every
        # (scaled, masked) row as one more column, the row max subtracted, softmax over keys and
        # sink, the sink column dropped (probs[..., :-1]), so each row sums to less than 1
        sinks = P[f"{pre}.sinks"].reshape(1, -1, 1, 1).expand(b, -1, t, -1)
        combined = torch.cat([att, sinks], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        o = combined.softmax(-1)[..., :-1] @ v
    else:
        o = att.softmax(-1) @ v
    o = o.transpose(1, 2)  # [B, T, H, HD]
    if ex["attn_gate"] is not None:  # the gated-attention paper's G1: o * sigmoid(X W_gate), X = x
        width = HD if ex["attn_gate"] == "elementwise" else 1  # column h*HD + j, or h
        o = o * torch.sigmoid(x @ P[f"{pre}.w_gate"]).view(b, t, H, width)
    return o.reshape(b, t, D) @ P[f"{pre}.wo"]


def ffn(P, pre, x):
    if f"{pre}.suv" in P:  # nGPT: uv = suv * sqrt(d) * c_fc(h); u * silu(v), u = x W3, v = x W1
        suv = P[f"{pre}.suv"] * math.sqrt(D)
        u, v = (x @ P[f"{pre}.w3"]) * suv[:FF], (x @ P[f"{pre}.w1"]) * suv[FF:]
        return (u * F.silu(v)) @ P[f"{pre}.w2"]
    if f"{pre}.w3" in P:
        return (F.silu(x @ P[f"{pre}.w1"]) * (x @ P[f"{pre}.w3"])) @ P[f"{pre}.w2"]
    return F.gelu(x @ P[f"{pre}.w1"]) @ P[f"{pre}.w2"]


# ---- multi-stream residuals: Hyper-Connections, mHC, mHC-lite -------------------------------
HC_STREAMS = 4          # n, the expansion rate (hc_mult)
HC_EPS = 1e-6           # DeepseekV4Config.hc_eps: added to pre (and to comb before and in Sinkhorn)
HC_NORM_EPS = EPS       # the RMSNorms that read the streams (a module constant so checks can zero it)
HC_SINKHORN_ITERS = 20  # DeepseekV4Config.hc_sinkhorn_iters


def hc_rms(x):
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + HC_NORM_EPS)


def hc_permutations(n):
    """The n! permutation matrices in itertools.permutations order (the identity first), P_k with
    P_k[i, pi_k(i)] = 1: row i of P_k is e_{pi_k(i)} (the authors' get_all_permutations, eye[perms])."""
    return torch.eye(n)[torch.tensor(list(itertools.permutations(range(n))))]


def hc_width(P, pre, Hs):
    """Hyper-Connections (Zhu et al., ICLR 2025), dynamic, tanh: the hyper-connections package
    0.4.11, hyper_connections.py HyperConnections.width_connection and depth_connection (lines
    263-372; num_fracs 1, one input view). Hs [..., n, D]. Returns the branch input x_in and the
    function that writes H_new from the branch output y.
    The stream norm: lucidrains' RMSNorm (lines 86-93) is F.normalize(x) * sqrt(D) * (gamma + 1)
    with gamma at 0, i.e. gain * x / max(rms(x), 1e-12 / sqrt(D)); normlab's is
    gain * x / sqrt(mean(x^2) + 1e-6) (the stored gain = lucidrains' gamma + 1): the same up to
    that epsilon."""
    c = f"{pre}.hc"
    N = hc_rms(Hs) * P[f"{c}.norm.gain"]  # each stream normalised over D
    alpha = P[f"{c}.static_alpha"] + P[f"{c}.dynamic_alpha_scale"] * torch.tanh(N @ P[f"{c}.dynamic_alpha"])
    beta = P[f"{c}.static_beta"] + P[f"{c}.dynamic_beta_scale"] * torch.tanh(N @ P[f"{c}.dynamic_beta"])
    # einsum(alpha, residuals, '... s t, ... s d -> ... t d') (line 315): mix[t] = sum_s alpha[s, t] H[s]
    mix = torch.einsum("...st,...sd->...td", alpha, Hs)
    x_in, residual = mix[..., 0, :], mix[..., 1:, :]
    # depth connection (lines 357, 370): H_new[s] = residual[s] + beta[s] * y
    return x_in, lambda y: residual + beta.unsqueeze(-1) * y.unsqueeze(-2)


def mhc_width(P, pre, Hs, lite):
    """mHC as transformers' (v5.24.0) DeepseekV4HyperConnection.forward (modeling_deepseek_v4.py
    lines 952-996) and DeepseekV4DecoderLayer.forward (lines 1175-1200): the streams flattened
    stream-major to n*D, an unweighted RMSNorm (eps 1e-6), one projection to (pre, post, comb);
    pre = sigmoid(w s0 + b) + eps, post = 2 sigmoid(w s1 + b), comb = softmax over its last axis
    of (w s2 + b) + eps, then Sinkhorn: columns, then (iters - 1) x (rows, columns), each
    denominator + eps; x_in = sum_s pre[s] H[s]; H_new[k] = post[k] y + sum_j comb[j, k] H[j]
    (comb used transposed, lines 1191-1192). mHC-lite (Yang & Gao 2026): comb = sum_k a_k P_k,
    a = softmax(w s2 + b) over the n! permutations (the authors' hyper_conn/mhc_lite.py lines
    361-363, used transposed like comb, line 389): exactly doubly stochastic, no eps, no Sinkhorn."""
    h_pre, post, comb = mhc_coeffs(P, pre, Hs, lite)
    x_in = (h_pre.unsqueeze(-1) * Hs).sum(dim=-2)
    return x_in, lambda y: post.unsqueeze(-1) * y.unsqueeze(-2) + comb.transpose(-1, -2) @ Hs


def mhc_coeffs(P, pre, Hs, lite):
    """(pre [..., n], post [..., n], comb [..., n, n]) of one sublayer, as mhc_width describes."""
    c = f"{pre}.hc"
    n = Hs.shape[-2]
    flat = hc_rms(Hs.reshape(*Hs.shape[:-2], n * D))  # H.view(..., n * D): stream-major
    mixes = flat @ P[f"{c}.proj"]                      # HF's F.linear(flat, fn): proj = fn^T
    m = math.factorial(n) if lite else n * n
    pre_w, post_w, comb_w = mixes.split([n, n, m], dim=-1)
    pre_b, post_b, comb_b = P[f"{c}.base"].split([n, n, m])
    s = P[f"{c}.scale"]
    h_pre = torch.sigmoid(pre_w * s[0] + pre_b) + HC_EPS
    post = 2 * torch.sigmoid(post_w * s[1] + post_b)
    if lite:
        a = torch.softmax(comb_w * s[2] + comb_b, dim=-1)
        comb = torch.einsum("...k,kij->...ij", a, hc_permutations(n))
    else:
        comb = torch.softmax(comb_w.view(*comb_w.shape[:-1], n, n) * s[2] + comb_b.view(n, n), dim=-1) + HC_EPS
        comb = comb / (comb.sum(dim=-2, keepdim=True) + HC_EPS)
        for _ in range(HC_SINKHORN_ITERS - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + HC_EPS)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + HC_EPS)
    return h_pre, post, comb


def mhc_head(P, Hs):
    """transformers' DeepseekV4HyperHead.forward (lines 1011-1015), the final collapse:
    x = sum_s (sigmoid(RMS(flat H) proj[:, s] * scale + base[s]) + eps) H[s]."""
    n = Hs.shape[-2]
    flat = hc_rms(Hs.reshape(*Hs.shape[:-2], n * D))
    h_pre = torch.sigmoid((flat @ P["hc_head.proj"]) * P["hc_head.scale"] + P["hc_head.base"]) + HC_EPS
    return (h_pre.unsqueeze(-1) * Hs).sum(dim=-2)


def hc_forward(P, tokens, rec):
    """pre-rms with the residual stream widened to n streams [B, T, n, D]: the embedding copied
    into each (lucidrains' expand_stream; DeepseekV4Model.forward line 1363); sublayer l reads
    x_in, runs its branch y = F_l(RMS_l(x_in)) and writes H_new; after the last one the streams
    are summed (hc: lucidrains' reduce_stream) or collapsed by the HyperHead (mhc, mhc-lite,
    line 1380), then the final RMSNorm. The regulariser's 'sums' are the streams after each
    sublayer (no case here has the regulariser)."""
    subs, _, fin, qk, _, _, ex = rec
    x = P["tok_emb"][tokens]
    n = P["layers.0.attn.hc.static_beta"].shape[0] if ex["hc"] == "hc" else HC_STREAMS
    Hs = x.unsqueeze(-2).expand(*x.shape[:-1], n, D)
    sums = []
    for i in range(L):
        for j, kind in enumerate(("attn", "ffn")):
            s, pre = subs[2 * i + j], f"layers.{i}.{kind}"
            if ex["hc"] == "hc":
                x_in, write = hc_width(P, pre, Hs)
            else:
                x_in, write = mhc_width(P, pre, Hs, lite=ex["hc"] == "mhc-lite")
            h = apply_norm(s["inp"], P, f"{pre}.input_norm", x_in)
            y = attention(P, f"{pre}.f", h, qk, ex) if kind == "attn" else ffn(P, f"{pre}.f", h)
            Hs = write(y)
            sums.append(Hs)
    x = Hs.sum(dim=-2) if ex["hc"] == "hc" else mhc_head(P, Hs)
    return apply_norm(fin, P, "final_norm", x) @ P["lm_head"], sums


def hc_params(kind, l, pre, gen, n=HC_STREAMS, perturb=True):
    """The hyper-connection parameters of sublayer l (0-based over all 2L sublayers), perturbed
    from their init: lucidrains' HyperConnections.__init__ (lines 229-247) for hc; for mhc and
    mhc-lite HF's _init_weights (lines 1287-1294: fn normal(0, initializer_range), base 0,
    scale 1). perturb=False gives the init itself (proj at 0 there).
    hc's unconstrained mixing is kept mild (static_alpha noise 0.1, dynamic scales about 0.1, ten
    times their init): with 0.2 and 0.5 the branch input of some tokens cancels to an RMS of 6e-4
    (its RMSNorm then works in the eps regime) and the streams grow to an RMS of 345 in 8
    sublayers, and f32 gradients drift 10-20 times further from f64 than in the other cases.
    mHC's proj at 0.3 leaves Sinkhorn unconverged for some tokens (row sums off by up to 2e-2
    after 20 iterations): that is HF's algorithm as written, and it pins the iteration schedule."""
    r = lambda *shape: torch.randn(*shape, generator=gen) if perturb else torch.zeros(*shape)
    p = {}
    if kind == "hc":
        alpha0 = torch.zeros(n, 1)
        alpha0[l % n, 0] = 1.0  # init_alpha0[layer_index % n, :] = 1
        p["static_alpha"] = torch.cat([alpha0, torch.eye(n)], dim=1) + 0.1 * r(n, n + 1)
        p["static_beta"] = 1 + 0.2 * r(n)
        p["norm.gain"] = 1 + 0.2 * r(D)
        p["dynamic_alpha"] = 0.3 * r(D, n + 1)
        p["dynamic_alpha_scale"] = (0.1 if perturb else 0.01) + 0.05 * r(1)
        p["dynamic_beta"] = 0.3 * r(D)
        p["dynamic_beta_scale"] = (0.1 if perturb else 0.01) + 0.05 * r(1)
    else:
        width = 2 * n + (math.factorial(n) if kind == "mhc-lite" else n * n)
        p["proj"] = 0.3 * r(n * D, width)
        p["base"] = 0.3 * r(width)
        p["scale"] = 1 + 0.2 * r(3)
    return {f"{pre}.hc.{k}": v for k, v in p.items()}


def is_hc_param(name):
    return ".hc." in name or name.startswith("hc_head.")


# ---- Attention Residuals (Kimi's AttnRes), full and block -----------------------------------
ATTNRES_BLOCKS = 3      # N of the attnres-block case: S = ceil(2L / N) = 3 sublayers per block
# The queries' spread about their zero init in the fixtures: N(0, 0.25^2) per entry, so that q . K
# (K of unit RMS, |K| = sqrt(D) = 4) has a spread of about 1: the depth weights are clearly
# non-uniform without saturating. At 0.5 (weights from 2e-5 to 0.999 per position) the f32
# softmax backward of the near-saturated weights moves the trajectory's gradient norm by up to
# 7e-5 relative from float64's while losses and weights still agree to 1e-6.
ATTNRES_QUERY_STD = 0.25


def attnres_mix(query, sources):
    """The authors' block_attn_res (README pseudocode, Figure 2): V = stack(sources) [N, B, T, D],
    K = V / sqrt(mean(V^2) + eps) (parameter-free RMSNorm), alpha = softmax over the N sources of
    q . K per position, h = sum_n alpha_n V_n. Returns (h, alpha [N, B, T])."""
    v = torch.stack(sources)
    k = v / torch.sqrt((v ** 2).mean(-1, keepdim=True) + EPS)
    alpha = torch.einsum("d,nbtd->nbt", query, k).softmax(0)
    return torch.einsum("nbt,nbtd->btd", alpha, v), alpha


def attnres_stack(P, x, size, branch, record=None):
    """The depth bookkeeping over the 2L sublayers j (layer i's attention 2i, its FFN 2i + 1):
    blocks = [x] (the token embedding), partial = None. Before sublayer j the sources are blocks
    plus partial (when there is one) and h_j their mix under the query of sublayer j; sublayer 0
    sees the embedding alone and has no query (h_0 = x). y_j = branch(j, h_j) is added to partial
    (or starts it), and after every size-th sublayer ((j + 1) % size == 0) partial closes into a
    block. After the last sublayer the sources are mixed once more by attn_res_head.query.
    Returns (that final mix, the running partial after each sublayer). record: a list that gets
    (h_j, alpha_j) per sublayer (None for sublayer 0) and the final (h, alpha)."""
    blocks, partial, sums = [x], None, []
    for j in range(2 * L):
        sources = blocks + ([partial] if partial is not None else [])
        if j == 0:
            h, alpha = x, None
        else:
            kind = ("attn", "ffn")[j % 2]
            h, alpha = attnres_mix(P[f"layers.{j // 2}.{kind}.attn_res.query"], sources)
        if record is not None:
            record.append((h, alpha))
        y = branch(j, h)
        partial = y if partial is None else partial + y
        sums.append(partial)
        if (j + 1) % size == 0:
            blocks.append(partial)
            partial = None
    out, alpha = attnres_mix(P["attn_res_head.query"], blocks + ([partial] if partial is not None else []))
    if record is not None:
        record.append((out, alpha))
    return out, sums


def attnres_forward(P, tokens, rec):
    """pre-rms with the residual sum replaced by depth attention (attnres_stack): sublayer j's
    branch is y_j = F_j(RMSNorm_in(h_j)); the final RMSNorm reads the final mix. The
    regulariser's 'sums' are the running partial block after each sublayer (no case here has the
    regulariser)."""
    subs, _, fin, qk, _, _, ex = rec

    def branch(j, h):
        s, pre = subs[j], f"layers.{j // 2}.{('attn', 'ffn')[j % 2]}"
        h = apply_norm(s["inp"], P, f"{pre}.input_norm", h)
        return attention(P, f"{pre}.f", h, qk, ex) if j % 2 == 0 else ffn(P, f"{pre}.f", h)

    x, sums = attnres_stack(P, P["tok_emb"][tokens], ex["attn_res"], branch)
    return apply_norm(fin, P, "final_norm", x) @ P["lm_head"], sums


def forward(P, tokens, rec):
    subs, emb, fin, qk, _, escale, ex = rec
    if ex["hc"] is not None:
        return hc_forward(P, tokens, rec)
    if ex["attn_res"] is not None:
        return attnres_forward(P, tokens, rec)
    x = P["tok_emb"][tokens]
    if escale is not None:
        x = P["emb_scale"] * x
    if ex["embed_mult"] is not None:  # Gemma3TextScaledWordEmbedding: a constant sqrt(d_model)
        x = x * ex["embed_mult"]
    x = apply_norm(emb, P, "emb_norm", x)
    x0 = x
    sums = []
    values = {} if ex["value_res"] else None  # value residual: layer 0's values, per pass
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
            f = attention(P, f"{pre}.f", h, qk, ex, values) if kind == "attn" else ffn(P, f"{pre}.f", h)
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
            if ex["gpas"]:  # GPASBlock: x - SiLU(a) x.detach(), a shared by the layer's two additions
                x = x - F.silu(P[f"layers.{i}.gpas"]) * x.detach()
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
                if ex["attn_gate"] is not None:  # drawn like the other matrices
                    P[f"{pre}.f.w_gate"] = n(D, D if ex["attn_gate"] == "elementwise" else H, std=std)
                if ex["sinks"]:  # gpt-oss initialises them normal(0, initializer_range); large
                    # enough here that the sink takes a real share of each row
                    P[f"{pre}.f.sinks"] = n(H, std=0.5)
                if ex["value_res"] and i >= 1:  # [0.5, 0.5] (ResFormer's fixed mix), perturbed
                    P[f"{pre}.f.value_lambda"] = 0.5 + 0.2 * n(2, std=1)
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
            if ex["hc"] is not None:
                P.update(hc_params(ex["hc"], 2 * i + j, pre, gen))
            if ex["attn_res"] is not None and (i, kind) != (0, "attn"):
                # zero at init (uniform weights, as the paper requires), perturbed so that the
                # depth softmax is clearly non-uniform and every gradient path is exercised
                P[f"{pre}.attn_res.query"] = n(D, std=ATTNRES_QUERY_STD)
        if ex["gpas"]:  # the gate, 0 at init in the authors' code; perturbed so that SiLU(a) and
            # SiLU'(a) are both nonzero, with alternating signs (SiLU(a) < 0 scales x up)
            P[f"layers.{i}.gpas"] = (-1) ** i * (0.1 + 0.3 * n(1, std=1).abs())
        if ex["x0"] is not None:
            P[f"layers.{i}.resid_lambda"] = ex["x0"][0] + 0.2 * n(1, std=1)
            P[f"layers.{i}.x0_lambda"] = ex["x0"][1] + 0.3 * n(1, std=1)
    P.update(norm_params(fin, "final_norm", gen))
    P["lm_head"] = n(D, V, std=std)
    if ex["hc"] in ("mhc", "mhc-lite"):  # DeepseekV4HyperHead's hc_fn (transposed), hc_base, hc_scale
        P["hc_head.proj"] = n(HC_STREAMS * D, HC_STREAMS, std=0.3)
        P["hc_head.base"] = n(HC_STREAMS, std=0.3)
        P["hc_head.scale"] = 1 + 0.2 * n(1, std=1)
    if ex["attn_res"] is not None:  # the final query, zero at init, perturbed like the others
        P["attn_res_head.query"] = n(D, std=ATTNRES_QUERY_STD)
    if ex["ngpt"]:
        P["sz"] = D ** -0.5 * (1 + 0.3 * n(V, std=1))
        normalize_matrices(P)
    # Round to f32 so the Rust side (f32) loads exactly these values. Buffers carry no gradient.
    return {k: v.float().double().requires_grad_(not is_buffer(k)) for k, v in P.items()}


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
    "gated-attn": ("gated-attn", "glu", 10000.0),
    "gated-attn-head": ({"preset": "gated-attn", "attn_gate": "headwise"}, "glu", 10000.0),
    "attn-sink": ("attn-sink", "glu", 10000.0),
    "zc-rms": ("zc-rms", "glu", 10000.0),
    "gemma3": ("gemma3", "glu", 10000.0),
    "hc": ("hc", "glu", 10000.0),
    "mhc": ("mhc", "glu", 10000.0),
    "mhc-lite": ("mhc-lite", "glu", 10000.0),
    "value-residual": ("value-residual", "glu", 10000.0),
    "attnres": ("attnres", "glu", 10000.0),
    "attnres-block": ({"preset": "attnres", "attn_res": {"blocks": 3}}, "glu", 10000.0),
    "gpas": ("gpas", "glu", 10000.0),
    "completep": ("completep", "glu", 10000.0),
    "tapernorm": ("tapernorm", "glu", 10000.0),
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


def taper_step(P, k, stats, t):
    """TaperNorm's global schedule after optimizer step k (1-based, completed steps). S = the LR
    warm-up length W (the gate is held at 1 through it), E = round(0.5 * steps) (taper end).
    k <= S: each norm's EMAs take the step's statistics (the means over its micro-batches of the
    per-pass token means that apply_norm recorded, under the weights before update k), decay 0.99;
    k == S: c = ema_scaled / ema_energy (least squares c gamma h ~ gamma h / r) and gamma~ = gamma
    (the value only; its AdamW moments are untouched); then the gate for the next step's forward:
    1 up to S, 0.5 (1 + cos(pi (k - S) / (E - S))) between, 0 from E on."""
    total = t["steps"]
    s_end, e_end = round(t["warmup_fraction"] * total), round(0.5 * total)
    if k >= e_end:
        gate = 0.0
    elif k <= s_end:
        gate = 1.0
    else:
        gate = 0.5 * (1 + math.cos(math.pi * (k - s_end) / (e_end - s_end)))
    with torch.no_grad():
        for name in sorted({n.rsplit(".", 1)[0] for n in P if n.endswith(".taper_gate")}):
            if k <= s_end:
                scaled = torch.stack([a for a, _ in stats[name]]).mean()
                energy = torch.stack([b for _, b in stats[name]]).mean()
                P[f"{name}.taper_ema_scaled"].mul_(0.99).add_(0.01 * scaled)
                P[f"{name}.taper_ema_energy"].mul_(0.99).add_(0.01 * energy)
            if k == s_end:
                P[f"{name}.taper_scale"].copy_(P[f"{name}.taper_ema_scaled"] / P[f"{name}.taper_ema_energy"])
                P[f"{name}.taper_gain"].copy_(P[f"{name}.gain"])
            P[f"{name}.taper_gate"].fill_(gate)


def train_settings(rec):
    """nGPT trains without weight decay and warm-up (the paper). CompleteP's case trains with
    eps = 1e-4, so that its per-group eps (eps x L_base/L inside the layers) moves the final
    weights by ~8e-4 against one eps for all: at 1e-8 the split is below f32 rounding."""
    if rec[6]["ngpt"]:
        return dict(TRAIN, weight_decay=0.0, warmup_fraction=0.0)
    if rec[6].get("completep"):
        return dict(TRAIN, eps=1e-4)
    return TRAIN


def trajectory(P0, rec, gen):
    """Trains a copy of P0 for TRAIN["steps"] steps on fixed random batches."""
    global LOGIT_MAXIMA, TAPER_STATS
    t = train_settings(rec)
    P = {k: v.detach().clone().requires_grad_(not is_buffer(k)) for k, v in P0.items()}
    params = [v for k, v in P.items() if not is_buffer(k)]  # TaperNorm's buffers stay out
    # Matrices are decayed; so are zc-rms's zero-centred gains (the Qwen3-Next release applies
    # weight decay to its zero-centred norm weights: with (1 + w), decay pulls the gain towards 1).
    # No hyper-connection parameter is decayed, not even the 2-D static_alpha, dynamic_alpha, proj.
    decayed = lambda k, v: (v.dim() >= 2 or k.endswith(".centred_gain")) and not is_hc_param(k)
    decay = [(k, v) for k, v in P.items() if decayed(k, v) and not is_buffer(k)]
    no_decay = [(k, v) for k, v in P.items() if not decayed(k, v) and not is_buffer(k)]
    groups = [(decay, t["weight_decay"]), (no_decay, 0.0)]
    base = rec[6]["completep"]
    if base is None:
        groups = [dict(params=[v for _, v in ps], weight_decay=wd) for ps, wd in groups]
    else:
        # CompleteP (the authors' configure_optimizers, fixed January 19 2025): the hidden
        # parameters (block norms, attention and FFN weights) get eps * m ** -alpha with
        # m = L / L_base, alpha = 1; the embedding, the final norm and the unembedding keep eps.
        hidden_eps = t["eps"] * base / L
        groups = [dict(params=[v for k, v in ps if k.startswith("layers.") == hidden], weight_decay=wd,
                       eps=hidden_eps if hidden else t["eps"])
                  for ps, wd in groups for hidden in (True, False)]
    opt = torch.optim.AdamW(groups, lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    toks = torch.randint(0, V, (t["steps"], t["micro_batches"], B, T + 1), generator=gen)
    losses, norms, lrs = [], [], []
    for s in range(t["steps"]):
        opt.zero_grad()
        total = 0.0
        LOGIT_MAXIMA = []
        TAPER_STATS = {} if rec[6]["taper"] else None
        for m in range(t["micro_batches"]):
            loss = loss_of(P, rec, toks[s, m, :, :T], toks[s, m, :, 1:])
            (loss / t["micro_batches"]).backward()
            total += loss.item() / t["micro_batches"]
        norm = torch.nn.utils.clip_grad_norm_(params, t["grad_clip"])
        for g in opt.param_groups:
            g["lr"] = lr_at(s, t)
        opt.step()
        if rec[6]["ngpt"]:
            normalize_matrices(P)
        if rec[6]["clip"] is not None:
            qk_clip(P, LOGIT_MAXIMA, rec[6]["clip"])
        if rec[6]["taper"]:
            taper_step(P, s + 1, TAPER_STATS, t)
        LOGIT_MAXIMA = TAPER_STATS = None
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
        # Buffers (TaperNorm's gate, scale and EMAs) get zero gradients: one entry per parameter.
        tensors.update({f"grad/{k}": (torch.zeros_like(v) if is_buffer(k) else v.grad).float()
                        for k, v in P.items()})
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
