"""normlab's decoder-only Transformer in PyTorch, for `transformers` (`trust_remote_code=True`).

Written by `normlab export RUN --hf OUT` beside `config.json`, whose `recipe` entry says where
every norm sits and which kind it is. Each sublayer l (attention, then feed-forward, L times)
is the equation

    X_{l+1} = N_outer(a * X_l + c * N_out(F_l(s * N_in(X_l))))

with absent norms the identity. Before the first sublayer X_1 = N_emb(e * m * Embed(tokens))
(e: the learnable embedding scale, m: the constant `embedding_multiplier`, when the recipe has
them); the logits are
N_final(X_{2L+1}) W_out. Parameter names and orientations are normlab's own (`x @ W`, W of
shape [in, out]), so `model.safetensors` is normlab's checkpoint unchanged.

Norm kinds (x: one position's d-vector, mean over the hidden dimension):
    layernorm       gain * (x - mean x) / sqrt(var x + eps) + shift      (gain, shift optional)
    rmsnorm         gain * x / sqrt(mean x^2 + eps)                        (gain optional)
    scalar-layernorm, scalar-rmsnorm: the same with one scalar gain (and shift) (KiteNorm eq. 4)
    dyt             gain * tanh(alpha * x) + shift                         (DyT)
    bhyt-star       gain * tanh(lambda * x / D), D = kappa sqrt(var x + eps) + |mean x| ("std")
                    or kappa sqrt(mean x^2 + eps) ("rms"); kappa = (1 - p)^(-1/2)   (BHyT*)
    bhyt            gain * tanh(lambda * x / (kappa sqrt(s^2 + eps)))      (BHyT, Algorithm 1)
    rmsnorm-approx  gain * x / sqrt(s^2 + eps)                             (the BHyT paper's Table 5)
    layernorm-1p    (1 + gain) * (x - mean x) / sqrt(var x + eps) + shift  (Megatron-LM; gain stored at 0)
    zc-rms          (1 + centred_gain) * x / sqrt(mean x^2 + eps)           (Qwen3-Next; stored at 0)
    derf            gain * erf(alpha * x + offset) + shift                 (Derf)
    seednorm        (tanh(x . beta) * alpha + gain) * x / rms(x)           (SeeDNorm)
    l2              x / ||x||                                               (nGPT's justnorm)
    tapernorm       g * gain * x / sqrt(mean x^2 + eps) + (1 - g) * c * taper_gain * x   (TaperNorm;
                    g = taper_gate, c = taper_scale: stored values the training schedule set)

A sublayer may carry a learnable gate g on its branch, X_{l+1} = N_outer(a X_l + c g N_out(F(...))):
a scalar (ReZero, SkipInit) or one value per channel (LayerScale), owned by the sublayer
(`layers.i.attn.gate`) or shared by the layer's two sublayers (`layers.i.gate`, ReZero). With
`x0_mix`, each layer first mixes in the embedding stream, X = resid_lambda X + x0_lambda X_1.
With `gpas` (GPAS), after each of layer i's two residual additions X = X - silu(gpas) X, one
scalar `layers.i.gpas` per layer (the stop-gradient of training does not change the forward).
A gate with `"on": "skip"` scales the skip instead, N_outer(a g X_l + c N_out(F(...))) (Admin);
with `"on": "interpolate"` the sublayer steps from A = N_outer(X_l) towards the branch,
N_outer(A + |g| (N_out(F(...)) - A)) (nGPT). A gate with a `factor` is used as stored * factor.

`hypersphere` (nGPT): after RoPE each head's query and key is scaled to unit L2 norm times
`sqk` (used as stored * sqk_factor), the softmax scale is sqrt(head_dim); the GLU's
pre-activations x w3 and x w1 are multiplied by the halves of `suv` (used as stored *
suv_factor * sqrt(hidden_size)); the logits by `sz` (used as stored * sz_factor).

For `bhyt` and `rmsnorm-approx`, s^2 is mean(x^2) of the block input in the attention input
norm; the feed-forward input norm does not measure its input but uses Theorem 3.5's
s^2 + ||W_V W_O||_F^2 / (T d) * sigma^2, with T the training sequence length
(`bhyt_seq_len`) and sigma^2 = (lambda_attn / kappa)^2 for BHyT, 1 for RMSNorm-Approx.

Attention: causal, rotary position embedding (rotate-half, base `rope_theta`) on queries and
keys, grouped-query heads, optional query/key/value biases, optional QK-norm (RMSNorm over the
full width before the head split, "full", or per head, "head"; without a gain, per head, unit
mean square, "l2", or unit L2 norm, "unit-l2"), optional V-norm (`v_norm`, RMSNorm of the values), optional soft-capping of the
attention logits (`attn_softcap`: c tanh(s / c) before the mask) and of the output logits
(`final_softcap`), optional learned sinks (`attn_sink`: one logit `sinks[h]` per head joins
each softmax's denominator and its share is dropped, gpt-oss) and an optional output gate
(`attn_gate`: each head's output times sigmoid(x w_gate) before w_o, one value per head,
"headwise", or per head and feature, "elementwise"; Qwen's gated attention) and value residual
learning (`value_residual`: every layer after the first mixes the first layer's values into its
own, v = value_lambda[0] v + value_lambda[1] v_1, ResFormer). Feed-forward: SiLU-gated GLU
(w1, w3, w2) or a GELU MLP (w1, w2).

`streams` (Hyper-Connections, mHC, mHC-lite): the residual state is n streams H [B, T, n, d],
each starting as X_1. Sublayer l reads x = sum_s p_s H[s], computes y = N_out(F(s * N_in(x))) and
writes H[k] = sum_j R[j, k] H[j] + w_k y. "hc": [p | R] = static_alpha + dynamic_alpha_scale *
tanh(rms(H) @ dynamic_alpha), w = static_beta + dynamic_beta_scale * tanh(rms(H) @ dynamic_beta)
(rms per stream, with `norm.gain`), and X_{2L+1} = sum_s H[s]. "mhc": from u = vec(H)/rms(vec H),
m = u @ proj, p = sigmoid(m_p * scale[0] + base_p) + 1e-6, w = 2 sigmoid(m_w * scale[1] + base_w),
R = Sinkhorn(softmax(m_r * scale[2] + base_r)) (columns first, then rows and columns, each sum
+ 1e-6, `sinkhorn_iters` in all), and X_{2L+1} = sum_s q_s H[s] with hc_head's own
q = sigmoid(u @ proj * scale + base) + 1e-6 (transformers' DeepseekV4HyperConnection and
DeepseekV4HyperHead). "mhc-lite": R = sum_k a_k P_k, a = softmax over the n! permutation
matrices in itertools.permutations order.

`attn_res` (Attention Residuals, Kimi Team 2026): sublayer l reads x = sum_s alpha_s V_s over the
sources V = [X_1, closed blocks' sums, the open block's sum], alpha = softmax_s(query . rms(V_s))
(rms without gain, eps `qk_norm_eps`), adds y = N_out(F(s * N_in(x))) to the open block, and
closes the block after every `block` sublayers (1: every output its own source); the first
sublayer reads X_1 (no query), and X_{2L+1} is the same read with attn_res_head's query.

Batches and decoding: `attention_mask` (1 = token, 0 = padding; left padding for generation)
hides padding keys, and each row is rotated at its own positions (`position_ids`, by default
the count of real tokens before each one), so a padded row gives the logits it gives alone, as
`normlab serve` does. `generate()` keeps keys and values in transformers' `DynamicCache`, so
each step feeds one token.
"""

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache, GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

# The additive score of a padding key: finite, so that a padding query (which sees only
# padding) has a defined softmax, and far enough below any score to weigh exactly 0 in f32
# (normlab's PAD_MASK).
PAD_MASK = -1e9


class NormlabConfig(PretrainedConfig):
    model_type = "normlab"

    def __init__(self, vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=None, head_dim=None, intermediate_size=176, ffn="glu",
                 attention_bias=False, tie_word_embeddings=False, rope_theta=10000.0, bhyt_seq_len=64,
                 max_position_embeddings=2048, recipe=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.intermediate_size = intermediate_size
        self.ffn = ffn
        self.attention_bias = attention_bias
        self.rope_theta = rope_theta
        self.bhyt_seq_len = bhyt_seq_len
        self.max_position_embeddings = max_position_embeddings
        self.recipe = recipe or {}
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)


# ---- norms -------------------------------------------------------------------------------------

class Norm(nn.Module):
    """One norm slot of the recipe; `spec` is its entry in config.json's `recipe`."""

    def __init__(self, spec, width):
        super().__init__()
        self.kind, self.spec = spec["kind"], spec
        self.eps = spec.get("eps", 0.0)
        vector = lambda: nn.Parameter(torch.ones(width))
        scalar = lambda: nn.Parameter(torch.ones(1))
        k = self.kind
        if k in ("layernorm", "rmsnorm", "rmsnorm-approx") and spec["gain"]:
            self.gain = vector()
        if k == "layernorm" and spec["shift"]:
            self.shift = nn.Parameter(torch.zeros(width))
        if k in ("scalar-layernorm", "scalar-rmsnorm"):
            self.gain = scalar()
        if k == "scalar-layernorm" and spec["shift"]:
            self.shift = nn.Parameter(torch.zeros(1))
        if k == "dyt":
            self.gain, self.shift, self.alpha = vector(), nn.Parameter(torch.zeros(width)), scalar()
        if k in ("bhyt", "bhyt-star"):
            self.gain = vector()
            self.register_parameter("lambda", scalar())
            self.kappa = (1.0 - spec["p"]) ** -0.5
        if k == "layernorm-1p":
            self.gain = nn.Parameter(torch.zeros(width))
            if spec["shift"]:
                self.shift = nn.Parameter(torch.zeros(width))
        if k == "derf":
            self.gain, self.shift = vector(), nn.Parameter(torch.zeros(width))
            self.alpha, self.offset = scalar(), nn.Parameter(torch.zeros(1))
        if k == "seednorm":
            self.gain, self.alpha, self.beta = vector(), vector(), nn.Parameter(torch.zeros(width))
        if k == "zc-rms":
            self.centred_gain = nn.Parameter(torch.zeros(width))
        if k == "tapernorm":  # the gate, the scale and the calibration averages are not learned
            self.gain, self.taper_gain = vector(), vector()
            for name in ("taper_gate", "taper_scale", "taper_ema_scaled", "taper_ema_energy"):
                setattr(self, name, nn.Parameter(torch.ones(1), requires_grad=False))

    def affine(self, y):
        y = y * self.gain if hasattr(self, "gain") else y
        return y + self.shift if hasattr(self, "shift") else y

    def forward(self, x, variance=None):
        k = self.kind
        if k in ("layernorm", "scalar-layernorm"):
            mu = x.mean(-1, keepdim=True)
            return self.affine((x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + self.eps))
        if k in ("rmsnorm", "scalar-rmsnorm", "rmsnorm-approx"):
            s2 = x.pow(2).mean(-1, keepdim=True) if variance is None else variance
            return self.affine(x / torch.sqrt(s2 + self.eps))
        if k == "dyt":
            return self.affine(torch.tanh(self.alpha * x))
        if k == "layernorm-1p":
            mu = x.mean(-1, keepdim=True)
            y = (1 + self.gain) * (x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + self.eps)
            return y + self.shift if hasattr(self, "shift") else y
        if k == "derf":
            return self.affine(torch.erf(self.alpha * x + self.offset))
        if k == "l2":
            return x / x.norm(p=2, dim=-1, keepdim=True)
        if k == "zc-rms":
            return (1 + self.centred_gain) * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if k == "tapernorm":
            normed = self.gain * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.taper_gate * normed + (1 - self.taper_gate) * self.taper_scale * self.taper_gain * x
        if k == "seednorm":  # one tanh(x . beta) per token, from the un-normalised input
            rescale = torch.tanh((x * self.beta).sum(-1, keepdim=True))
            return (rescale * self.alpha + self.gain) * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        lam = getattr(self, "lambda")
        if k == "bhyt-star":
            mu = x.mean(-1, keepdim=True)
            if self.spec["denominator"] == "std":
                den = self.kappa * torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + self.eps) + mu.abs()
            else:
                den = self.kappa * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.gain * torch.tanh(lam * x / den)
        if k == "bhyt":
            s2 = x.pow(2).mean(-1, keepdim=True) if variance is None else variance
            return self.gain * torch.tanh(lam * x / (self.kappa * torch.sqrt(s2 + self.eps)))
        raise ValueError(f"unknown norm kind {k!r}")

    def approximates(self):
        """Whether this input norm uses the block statistic (Algorithm 1) instead of its own."""
        return self.kind in ("bhyt", "rmsnorm-approx")


def optional_norm(spec, width):
    return Norm(spec, width) if spec else None


def apply(norm, x, variance=None):
    return x if norm is None else norm(x, variance)


# ---- branch functions --------------------------------------------------------------------------

def rotate(x, theta, positions):
    """Rotary position embedding, rotate-half convention; x [B, H, T, hd], positions [B, T]."""
    hd = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64, device=x.device) / hd)
    ang = (positions.to(torch.float64)[..., None] * inv)[:, None]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention_bias(attention_mask, b, t, past, device):
    """Additive scores [B, 1, t, past + t]: -inf above the causal diagonal (query i sits at
    cache position past + i), PAD_MASK on padding keys (attention_mask 0)."""
    total = past + t
    causal = torch.ones(t, total, dtype=torch.bool, device=device).triu(past + 1)
    bias = torch.zeros(b, 1, t, total, device=device).masked_fill(causal, float("-inf"))
    if attention_mask is not None:
        pad = (attention_mask[:, -total:] == 0)[:, None, None, :]
        bias = bias + torch.zeros_like(bias).masked_fill(pad, PAD_MASK)
    return bias


class Attention(nn.Module):
    def __init__(self, cfg, i=0):
        super().__init__()
        d, hd, h, kv = cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        self.h, self.kv, self.hd, self.theta = h, kv, hd, cfg.rope_theta
        self.wq, self.wk = nn.Parameter(torch.empty(d, h * hd)), nn.Parameter(torch.empty(d, kv * hd))
        self.wv, self.wo = nn.Parameter(torch.empty(d, kv * hd)), nn.Parameter(torch.empty(h * hd, d))
        if cfg.attention_bias:
            self.bq, self.bk = nn.Parameter(torch.zeros(h * hd)), nn.Parameter(torch.zeros(kv * hd))
            self.bv = nn.Parameter(torch.zeros(kv * hd))
        self.qk = cfg.recipe.get("qk_norm", "none")
        self.vn = cfg.recipe.get("v_norm", "none")
        self.eps = cfg.recipe["qk_norm_eps"]
        self.softcap = cfg.recipe.get("attn_softcap")
        self.sphere = cfg.recipe.get("hypersphere")
        if self.sphere:
            self.sqk = nn.Parameter(torch.ones(h * hd))
        gate = cfg.recipe.get("attn_gate")
        if gate:
            self.w_gate = nn.Parameter(torch.empty(d, h if gate == "headwise" else h * hd))
        if cfg.recipe.get("attn_sink"):
            self.sinks = nn.Parameter(torch.zeros(h))
        self.value_source = bool(cfg.recipe.get("value_residual")) and i == 0
        if cfg.recipe.get("value_residual") and i > 0:
            self.value_lambda = nn.Parameter(torch.full((2,), 0.5))
        rms = dict(kind="rmsnorm", gain=True, eps=self.eps)
        if self.qk in ("head", "full"):
            width = lambda n: n * hd if self.qk == "full" else hd
            self.q_norm, self.k_norm = Norm(rms, width(h)), Norm(rms, width(kv))
        if self.vn in ("head", "full"):
            self.v_norm = Norm(rms, kv * hd if self.vn == "full" else hd)

    def project(self, x, w, b):
        y = x @ getattr(self, w)
        return y + getattr(self, b) if hasattr(self, b) else y

    def forward(self, x, positions, bias, cache=None, layer=0, values=None):
        if getattr(self, "keep_vo", False):
            # BHyT's FFN-input statistic reads ||W_V W_O||²; taken here, inside the forward, so that a
            # wrapper that patches the weights for the forward (peft's LoRA on parameters) patches it too.
            self.vo_sq = self.value_output_frobenius_sq()
        b, t, _ = x.shape
        q, k, v = self.project(x, "wq", "bq"), self.project(x, "wk", "bk"), self.project(x, "wv", "bv")
        if self.qk == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.vn == "full":
            v = self.v_norm(v)
        heads = lambda y, n: y.view(b, t, n, self.hd).transpose(1, 2)
        q, k, v = heads(q, self.h), heads(k, self.kv), heads(v, self.kv)
        if self.qk == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.qk == "l2":  # Megatron-LM's qk_l2_norm, Llama 4's L2Norm: unit mean square
            q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + self.eps)
            k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.qk == "unit-l2":  # unit L2 norm (Transformer Engine)
            q = q / torch.sqrt(q.pow(2).sum(-1, keepdim=True) + self.eps)
            k = k / torch.sqrt(k.pow(2).sum(-1, keepdim=True) + self.eps)
        if self.vn == "head":
            v = self.v_norm(v)
        if self.value_source:  # value residual: the first layer's values, for the later ones
            values["first"] = v
        elif hasattr(self, "value_lambda"):
            v = self.value_lambda[0] * v + self.value_lambda[1] * values["first"]
        q, k = rotate(q, self.theta, positions), rotate(k, self.theta, positions)
        scale = 1 / math.sqrt(self.hd)
        if self.sphere:
            sqk = (self.sqk * self.sphere["sqk_factor"]).view(1, self.h, 1, self.hd)
            unit = lambda y: y / y.norm(p=2, dim=-1, keepdim=True)
            q, k, scale = sqk * unit(q), sqk * unit(k), math.sqrt(self.hd)
        if cache is not None:
            k, v = cache.update(k, v, layer)
        group = self.h // self.kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) * scale
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        scores = scores + bias
        if hasattr(self, "sinks"):  # gpt-oss: the sink joins each row's softmax, its share dropped
            sink = self.sinks.view(1, -1, 1, 1).expand(b, -1, t, 1)
            probs = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
        else:
            probs = scores.softmax(-1)
        o = (probs @ v).transpose(1, 2)  # [B, t, H, hd]
        if hasattr(self, "w_gate"):  # Qwen's gated attention, after SDPA and before W_O
            g = torch.sigmoid(x @ self.w_gate).view(b, t, self.h, -1)
            o = o * g
        return o.reshape(b, t, self.h * self.hd) @ self.wo

    def value_output_frobenius_sq(self):
        """||W_V W_O||_F^2 with each key/value head's columns repeated for its query group."""
        d = self.wv.shape[0]
        wv = self.wv.view(d, self.kv, 1, self.hd).expand(d, self.kv, self.h // self.kv, self.hd)
        return (wv.reshape(d, self.h * self.hd) @ self.wo).pow(2).sum()


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, m = cfg.hidden_size, cfg.intermediate_size
        self.w1, self.w2 = nn.Parameter(torch.empty(d, m)), nn.Parameter(torch.empty(m, d))
        if cfg.ffn == "glu":
            self.w3 = nn.Parameter(torch.empty(d, m))
        sphere = cfg.recipe.get("hypersphere")
        if sphere:
            self.suv = nn.Parameter(torch.ones(2 * m))
            self.suv_factor = sphere["suv_factor"] * math.sqrt(d)

    def forward(self, x):
        if hasattr(self, "suv"):  # nGPT: u = s_u x w3, v = s_v x w1 (both times the factor)
            m = self.w1.shape[1]
            s = self.suv * self.suv_factor
            return ((x @ self.w3) * s[:m] * F.silu((x @ self.w1) * s[m:])) @ self.w2
        if hasattr(self, "w3"):
            return (F.silu(x @ self.w1) * (x @ self.w3)) @ self.w2
        return F.gelu(x @ self.w1) @ self.w2


# ---- residual streams --------------------------------------------------------------------------

class StreamNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))


def rms(x, eps, gain=None):
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if gain is None else y * gain


def permutation_basis(n):
    perms = list(itertools.permutations(range(n)))
    basis = torch.zeros(len(perms), n, n)
    for k, p in enumerate(perms):
        basis[k, torch.arange(n), torch.tensor(p)] = 1.0
    return basis.view(len(perms), n * n)


class StreamMix(nn.Module):
    """How one sublayer reads and writes the residual streams (the recipe's `streams`)."""

    def __init__(self, spec, d, eps):
        super().__init__()
        n, self.kind, self.eps = spec["n"], spec["mixing"], eps
        if self.kind == "hc":
            self.static_alpha = nn.Parameter(torch.zeros(n, n + 1))
            self.static_beta = nn.Parameter(torch.ones(n))
            if spec["dynamic"]:
                self.norm = StreamNorm(d)
                self.dynamic_alpha = nn.Parameter(torch.zeros(d, n + 1))
                self.dynamic_alpha_scale = nn.Parameter(torch.zeros(1))
                self.dynamic_beta = nn.Parameter(torch.zeros(d))
                self.dynamic_beta_scale = nn.Parameter(torch.zeros(1))
            return
        self.iters = spec.get("sinkhorn_iters")
        m = n * n if self.kind == "mhc" else math.factorial(n)
        self.proj = nn.Parameter(torch.empty(n * d, 2 * n + m))
        self.base = nn.Parameter(torch.zeros(2 * n + m))
        self.scale = nn.Parameter(torch.ones(3))

    def read(self, h):
        """(x, kept, w): the sublayer's input, sum_j R[j, k] H[j], and the write weights."""
        return self.read_hc(h) if self.kind == "hc" else self.read_mhc(h)

    def read_hc(self, h):
        n = h.shape[2]
        alpha, beta = self.static_alpha, self.static_beta
        if hasattr(self, "norm"):
            normed = rms(h, self.eps, self.norm.gain)
            alpha = alpha + self.dynamic_alpha_scale * torch.tanh(normed @ self.dynamic_alpha)
            beta = beta + self.dynamic_beta_scale * torch.tanh(normed @ self.dynamic_beta)
        alpha = alpha.expand(*h.shape[:2], n, n + 1)
        x = (alpha[..., 0].unsqueeze(-1) * h).sum(2)
        return x, alpha[..., 1:].transpose(-1, -2) @ h, beta.expand(*h.shape[:3])

    def read_mhc(self, h):
        b, t, n, d = h.shape
        m = rms(h.reshape(b, t, n * d), self.eps) @ self.proj
        part = lambda lo, hi, i: m[..., lo:hi] * self.scale[i] + self.base[lo:hi]
        p = torch.sigmoid(part(0, n, 0)) + 1e-6
        w = 2 * torch.sigmoid(part(n, 2 * n, 1))
        if self.kind == "mhc":
            r = torch.softmax(part(2 * n, 2 * n + n * n, 2).view(b, t, n, n), dim=-1) + 1e-6
            r = r / (r.sum(-2, keepdim=True) + 1e-6)
            for _ in range(self.iters - 1):
                r = r / (r.sum(-1, keepdim=True) + 1e-6)
                r = r / (r.sum(-2, keepdim=True) + 1e-6)
        else:
            a = torch.softmax(part(2 * n, m.shape[-1], 2), dim=-1)
            # Built here rather than held as a buffer, which from_pretrained would not fill.
            r = (a @ permutation_basis(n).to(a)).view(b, t, n, n)
        return (p.unsqueeze(-1) * h).sum(2), r.transpose(-1, -2) @ h, w


class StreamHead(nn.Module):
    """mHC's collapse of the streams before the final norm."""

    def __init__(self, n, d, eps):
        super().__init__()
        self.eps = eps
        self.proj = nn.Parameter(torch.empty(n * d, n))
        self.base = nn.Parameter(torch.zeros(n))
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, h):
        b, t, n, d = h.shape
        q = torch.sigmoid(rms(h.reshape(b, t, n * d), self.eps) @ self.proj * self.scale + self.base) + 1e-6
        return (q.unsqueeze(-1) * h).sum(2)


# ---- attention residuals ------------------------------------------------------------------------

class DepthQuery(nn.Module):
    """Attention Residuals' pseudo-query: a softmax read over the sources, by rms-normalised keys."""

    def __init__(self, d, eps):
        super().__init__()
        self.query, self.eps = nn.Parameter(torch.zeros(d)), eps

    def forward(self, sources):
        v = torch.stack(sources, dim=2)
        keys = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.eps)
        alpha = torch.softmax((keys * self.query).sum(-1), dim=2)
        return (alpha.unsqueeze(-1) * v).sum(2)


def attn_res_read(sub, closed, open_block):
    """What a sublayer (or the head, `sub` a DepthQuery) reads from the sources."""
    sources = closed + ([open_block] if open_block is not None else [])
    query = sub if isinstance(sub, DepthQuery) else getattr(sub, "attn_res", None)
    return sources[0] if query is None else query(sources)


# ---- the sublayer equation ---------------------------------------------------------------------

class Sublayer(nn.Module):
    """X_{l+1} = N_outer(a * X_l + c * N_out(F(s * N_in(X_l))))."""

    def __init__(self, spec, f, d, streams=None, eps=0.0):
        super().__init__()
        self.a, self.c, self.s = spec["a"], spec["c"], spec["s"]
        self.f = f
        self.input_norm = optional_norm(spec["input"], d)
        self.output_norm = optional_norm(spec["output"], d)
        self.outer_norm = optional_norm(spec["outer"], d)
        g = spec.get("gate")
        self.gate_on = g.get("on", "branch") if g else None
        self.gate_factor = g.get("factor", 1.0) if g else 1.0
        if g is not None and g["per"] == "sublayer":
            self.gate = nn.Parameter(torch.ones(d if g["shape"] == "channel" else 1))
        if streams:
            self.hc = StreamMix(streams, d, eps)

    def branch(self, x, **branch):
        """N_out(F(s * N_in(x)))."""
        return apply(self.output_norm, self.f(self.s * apply(self.input_norm, x), **branch))

    def stream_forward(self, h, **branch):
        """With streams: read x, run the branch, write it back."""
        x, kept, w = self.hc.read(h)
        y = apply(self.output_norm, self.f(self.s * apply(self.input_norm, x), **branch))
        return kept + w.unsqueeze(-1) * y.unsqueeze(-2)

    def forward(self, x, variance=None, shared_gate=None, **branch):
        y = apply(self.output_norm, self.f(self.s * apply(self.input_norm, x, variance), **branch))
        gate = self.gate if hasattr(self, "gate") else shared_gate
        if gate is not None:
            gate = gate * self.gate_factor
            if self.gate_on == "interpolate":
                a = apply(self.outer_norm, x)
                return apply(self.outer_norm, a + gate.abs() * (y - a))
            if self.gate_on == "skip":
                x = gate * x
            else:
                y = gate * y
        return apply(self.outer_norm, self.a * x + self.c * y)


class Layer(nn.Module):
    def __init__(self, cfg, i):
        super().__init__()
        subs, d = cfg.recipe["sublayers"], cfg.hidden_size
        streams, eps = cfg.recipe.get("streams"), cfg.recipe["qk_norm_eps"]
        self.attn = Sublayer(subs[2 * i], Attention(cfg, i), d, streams, eps)
        self.ffn = Sublayer(subs[2 * i + 1], FeedForward(cfg), d, streams, eps)
        self.streams = streams is not None
        attn_res = cfg.recipe.get("attn_res")
        if attn_res:
            if i > 0:
                self.attn.attn_res = DepthQuery(d, eps)
            self.ffn.attn_res = DepthQuery(d, eps)
        self.t, self.d, self.i = cfg.bhyt_seq_len, d, i
        self.attn.f.keep_vo = bool(self.ffn.input_norm and self.ffn.input_norm.approximates())
        g = subs[2 * i].get("gate")
        if g is not None and g["per"] == "layer":
            self.gate = nn.Parameter(torch.ones(d if g["shape"] == "channel" else 1))
        if cfg.recipe.get("x0_mix"):
            self.resid_lambda, self.x0_lambda = nn.Parameter(torch.ones(1)), nn.Parameter(torch.zeros(1))
        if cfg.recipe.get("gpas"):
            self.gpas = nn.Parameter(torch.zeros(1))

    def scale(self, x):
        """GPAS: x - silu(alpha) sg(x), alpha this layer's scalar; x when the recipe has none."""
        if not hasattr(self, "gpas"):
            return x
        return x - F.silu(self.gpas) * x.detach()

    def forward(self, x, positions, bias, cache=None, x0=None, values=None):
        if self.streams:  # x is the streams [B, T, n, d]
            x = self.attn.stream_forward(x, positions=positions, bias=bias, cache=cache, layer=self.i, values=values)
            return self.ffn.stream_forward(x)
        if hasattr(self, "x0_lambda"):
            x = self.resid_lambda * x + self.x0_lambda * x0
        gate = getattr(self, "gate", None)
        exact = x.pow(2).mean(-1, keepdim=True) if self.attn.input_norm and self.attn.input_norm.approximates() else None
        x = self.scale(self.attn(x, exact, shared_gate=gate, positions=positions, bias=bias, cache=cache,
                                 layer=self.i, values=values))
        return self.scale(self.ffn(x, self.ffn_variance(exact), shared_gate=gate))

    def depth_forward(self, state, block, positions, bias, cache=None, values=None):
        """With attention residuals: each sublayer reads over depth and adds to the open block.
        `state` = [closed sources, open block sum or None, sublayers written]."""
        for sub, branch in ((self.attn, dict(positions=positions, bias=bias, cache=cache, layer=self.i,
                                              values=values)), (self.ffn, {})):
            y = sub.branch(attn_res_read(sub, state[0], state[1]), **branch)
            total = y if state[1] is None else state[1] + y
            state[2] += 1
            if state[2] % block == 0:
                state[0].append(total)
                state[1] = None
            else:
                state[1] = total
        return state

    def ffn_variance(self, exact):
        """Theorem 3.5's approximation for an approximating FFN input norm, else None."""
        if exact is None or not (self.ffn.input_norm and self.ffn.input_norm.approximates()):
            return None
        norm = self.attn.input_norm
        sigma2 = (getattr(norm, "lambda") / norm.kappa) ** 2 if norm.kind == "bhyt" else 1.0
        f = self.attn.f
        while hasattr(f, "base_layer"):  # under peft's wrappers
            f = f.base_layer
        return exact + f.vo_sq / (self.t * self.d) * sigma2


# ---- the model -----------------------------------------------------------------------------

class NormlabForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = NormlabConfig
    base_model_prefix = "normlab"
    main_input_name = "input_ids"

    def __init__(self, config):
        super().__init__(config)
        r, d, v = config.recipe, config.hidden_size, config.vocab_size
        self.tok_emb = nn.Parameter(torch.empty(v, d))
        if r.get("embedding_scale"):
            self.emb_scale = nn.Parameter(torch.ones(1))
        self.emb_norm = optional_norm(r.get("embedding_norm"), d)
        self.layers = nn.ModuleList(Layer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = optional_norm(r.get("final_norm"), d)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Parameter(torch.empty(d, v))
        if r.get("hypersphere"):
            self.sz = nn.Parameter(torch.ones(v))
        streams = r.get("streams")
        if streams and streams["mixing"] != "hc":
            self.hc_head = StreamHead(streams["n"], d, r["qk_norm_eps"])
        if r.get("attn_res"):
            self.attn_res_head = DepthQuery(d, r["qk_norm_eps"])
        self.post_init()

    def _init_weights(self, module):
        pass  # every parameter comes from model.safetensors

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None, labels=None,
                past_key_values=None, **kwargs):
        # `cache` (transformers 5), `past_key_values` (transformers 4): a DynamicCache either way.
        cache = cache if cache is not None else past_key_values
        if cache is None and use_cache:
            cache = DynamicCache(config=self.config)
        b, t = input_ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            if attention_mask is not None:
                # A row's own positions: its real tokens before each one (padding at 0).
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -t:]
            else:
                position_ids = torch.arange(past, past + t, device=input_ids.device).expand(b, t)
        bias = attention_bias(attention_mask, b, t, past, input_ids.device)
        x = self.tok_emb[input_ids]
        if "embedding_multiplier" in self.config.recipe:
            x = x * self.config.recipe["embedding_multiplier"]
        if hasattr(self, "emb_scale"):
            x = self.emb_scale * x
        x = apply(self.emb_norm, x)
        x0 = x
        streams = self.config.recipe.get("streams")
        if streams:
            x = x.unsqueeze(2).expand(-1, -1, streams["n"], -1)
        values = {}  # value residual: the first layer's values
        attn_res = self.config.recipe.get("attn_res")
        if attn_res:
            state = [[x], None, 0]
            for layer in self.layers:
                state = layer.depth_forward(state, attn_res["block"], position_ids, bias, cache, values=values)
            x = attn_res_read(self.attn_res_head, state[0], state[1])
        else:
            for layer in self.layers:
                x = layer(x, position_ids, bias, cache, x0=x0, values=values)
        if streams:
            x = self.hc_head(x) if hasattr(self, "hc_head") else x.sum(2)
        x = apply(self.final_norm, x)
        logits = x @ (self.lm_head if hasattr(self, "lm_head") else self.tok_emb.t())
        if hasattr(self, "sz"):
            logits = logits * (self.sz * self.config.recipe["hypersphere"]["sz_factor"])
        cap = self.config.recipe.get("final_softcap")
        if cap is not None:
            logits = cap * torch.tanh(logits / cap)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        key = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
        return CausalLMOutputWithPast(loss=loss, logits=logits, **{key: cache})
