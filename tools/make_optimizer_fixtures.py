#!/usr/bin/env python3
"""PyTorch reference for normlab's optimizers: writes training-trajectory fixtures for the Rust tests.

For each case below it writes tests/fixtures/reference/optim/<case>.safetensors, a 12-step
trajectory of the `pre` recipe (GLU FFN, RoPE base 10000; the model, its parameters and the loss
are those of tools/make_reference_fixtures.py, imported from it), with the keys of that script:

    param/<name>        the initial weights (values exactly representable in f32)
    input/tokens, input/targets, out/logits, out/loss, out/ce, out/reg   as its main() writes
    grad/<name>         d loss / d param at the initial weights on input/* (the case's loss)
    out/z               (adamw-zloss only) mean over tokens of log(Z)^2 at the initial weights
    traj/tokens         int64 [S, M, B, T]; traj/targets likewise
    traj/loss [S]       each step's mean loss before its update (z-loss term included)
    traj/grad_norm [S]  the global gradient norm before clipping;  traj/lr [S] the schedule's lr
    traj/param/<name>   the weights after S steps

The step is trajectory()'s: gradient accumulation over M micro-batches (each loss / M),
torch.nn.utils.clip_grad_norm_ over all parameters together, the warm-up + cosine schedule lr_at
as the base lr of every parameter group; only the optimizer (and, for one case, the loss) change.
Metadata: "config" (the Rust model config, as in make_reference_fixtures.py) and "train" (TRAIN
plus "optim", the optimizer settings, and "z_loss").

Parameter classes. normlab stores a linear weight as [d_in, d_out] (y = x @ W). The *hidden
matrices* are the 2-D parameters other than tok_emb and lm_head (attention wq, wk, wv, wo and FFN
w1, w2, w3). The optimizers below see them in torch's nn.Linear layout [out, in] = W.T: the leaf
tensors of the trajectory hold the hidden matrices transposed and the forward uses .T, so
"rows" are output neurons and shape rules (A, B) = (out, in) are torch's.

Cases and the sources each rule is written from:

  muon, muon-original   hidden: torch.optim.Muon itself (momentum 0.95, Nesterov, 5 Newton-Schulz
        steps, default coefficients and eps, weight decay 0.1, lr = schedule x muon.lr_scale),
        adjust_lr_fn "match_rms_adamw" (Moonshot, "Muon is Scalable for LLM Training":
        0.2 sqrt(max(A, B))) or "original" (Keller Jordan: sqrt(max(1, A/B))) with lr_scale 4.
        NOTE: torch's _zeropower_via_newtonschulz casts to bfloat16; this script runs torch's
        Muon with that one function replaced by the same code in the tensor's own dtype
        (float64), see float64_newton_schulz(), so that an f32 implementation can match it.
        Everything else: torch.optim.AdamW, weight decay 0.1 on tok_emb / lm_head, 0 on vectors.
  normuon   hidden: the authors' normuon_update (github.com/zichongli5/NorMuon, normuon.py) in
        float64: momentum lerp, Nesterov, Keller Jordan's quintic Newton-Schulz (3.4445, -4.7750,
        2.0315; X / (||X||_F + 1e-7); transposed when out > in), a per-output-neuron second
        moment v [out, 1] lerp'd toward mean(O^2, dim=-1) with 1 - beta2, O / (sqrt(v) + 1e-10)
        rescaled to O's Frobenius norm; then p *= 1 - lr wd and p -= adjust(lr) O with normlab's
        adjust (0.2 sqrt(max(out, in)) for "match-rms-adamw") instead of the authors'
        sqrt(max(1, out/in)). Everything else: AdamW as for muon.
  lion      every parameter: Lion as lion-pytorch (lucidrains) update_fn writes it:
        p *= 1 - lr wd; p -= lr sign(beta1 m + (1 - beta1) g); m = beta2 m + (1 - beta2) g;
        betas (0.9, 0.99); weight decay 0.1 on every 2-D parameter, 0 on vectors.
  adamh     hidden: Adam-Hyperball (Wen, Dang, Lyu, Ma, Liang, "Fantastic Pretraining Optimizers
        and Where to Find Them II: Hyperball Optimization", arXiv 2606.16899): u = Adam's bias-corrected
        m^ / (sqrt(v^) + eps), W <- Norm(W - lr R u / ||u||_F) R, Norm(X) = X / ||X||_F,
        R = ||W_0||_F (whole matrix, before the first step); no weight decay. Else AdamW.
  muonh     hidden: Muon-Hyperball: O = the Muon direction as torch.optim.Muon computes it
        (momentum lerp, Nesterov, torch's Newton-Schulz, in float64), W <- Norm(W - adjust(lr)
        R O / ||O||_F) R; no weight decay. Else AdamW.
  adamw-zloss          trajectory()'s AdamW (decay on every 2-D parameter), loss = CE + 0.01 *
        mean over the CE's tokens of logsumexp(logits)^2 (PaLM's z-loss, as OLMo 2 uses it).
  adamw-no-emb-decay   trajectory()'s AdamW, but no weight decay on tok_emb and lm_head.

Run (from the repository root; the venv of make_reference_fixtures.py):
    ~/.venvs/torchref/bin/python tools/make_optimizer_fixtures.py [CASE ...]
Deterministic (seed 2000 + the case's index): rerunning reproduces the committed tensors (the
files' bytes may differ only in the order of the two metadata entries, which safetensors writes
from an unordered map). Each case prints its loss first -> last and a sanity check of its own.
"""
import contextlib
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference_fixtures as ref  # noqa: E402  (sets torch's default dtype to float64)
import torch.optim._muon as torch_muon  # noqa: E402

V, D, H, L, FF, B, T, EPS = ref.V, ref.D, ref.H, ref.L, ref.FF, ref.B, ref.T, ref.EPS
TRAIN = ref.TRAIN
RECIPE, FFN, ROPE_BASE = ref.CASES["pre"]
EMBEDDINGS = ("tok_emb", "lm_head")


def optim_settings(name, adjust_lr="match-rms-adamw", lr_scale=1.0, decay_embeddings=True):
    return {"name": name, "lr": TRAIN["lr"], "beta1": TRAIN["beta1"], "beta2": TRAIN["beta2"],
            "eps": TRAIN["eps"], "weight_decay": TRAIN["weight_decay"], "grad_clip": TRAIN["grad_clip"],
            "decay_embeddings": decay_embeddings,
            "muon": {"momentum": 0.95, "nesterov": True, "ns_steps": 5, "adjust_lr": adjust_lr,
                     "lr_scale": lr_scale, "beta2": 0.95},
            "lion": {"beta1": 0.9, "beta2": 0.99}}


CASES = {  # case: (optim settings, z_loss); the seed is 2000 + the index
    "muon": (optim_settings("muon"), 0.0),
    "muon-original": (optim_settings("muon", adjust_lr="original", lr_scale=4.0), 0.0),
    "normuon": (optim_settings("normuon"), 0.0),
    "lion": (optim_settings("lion"), 0.0),
    "adamh": (optim_settings("adamh"), 0.0),
    "muonh": (optim_settings("muonh"), 0.0),
    "adamw-zloss": (optim_settings("adamw"), 0.01),
    "adamw-no-emb-decay": (optim_settings("adamw", decay_embeddings=False), 0.0),
}


def is_hidden(name, v):
    return v.dim() == 2 and name not in EMBEDDINGS


# ---- Newton-Schulz --------------------------------------------------------------------------
def ns_torch_float64(grad, ns_coefficients, ns_steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz line for line, minus its bfloat16 cast."""
    a, b, c = ns_coefficients
    ortho_grad = grad.clone()
    if grad.size(0) > grad.size(1):
        ortho_grad = ortho_grad.T
    ortho_grad.div_(ortho_grad.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram_matrix = ortho_grad @ ortho_grad.T
        gram_update = torch.addmm(gram_matrix, gram_matrix, gram_matrix, beta=b, alpha=c)
        ortho_grad = torch.addmm(ortho_grad, gram_update, ortho_grad, beta=a)
    if grad.size(0) > grad.size(1):
        ortho_grad = ortho_grad.T
    return ortho_grad


@contextlib.contextmanager
def float64_newton_schulz():
    """Runs torch.optim.Muon with its Newton-Schulz in the gradient's dtype (no bfloat16)."""
    saved = torch_muon._zeropower_via_newtonschulz
    torch_muon._zeropower_via_newtonschulz = ns_torch_float64
    try:
        yield
    finally:
        torch_muon._zeropower_via_newtonschulz = saved


def ns_keller(G, steps=5):
    """Keller Jordan's zeropower_via_newtonschulz5 (as NorMuon's normuon.py copies it), float64."""
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.clone()
    if G.size(-2) > G.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        Bm = b * A + c * A @ A
        X = a * X + Bm @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def adjust_lr(lr, mode, shape):
    """normlab's muon.adjust_lr on an [out, in] = (A, B) matrix (torch's _adjust_lr)."""
    A, Bn = shape
    if mode == "match-rms-adamw":
        return lr * 0.2 * math.sqrt(max(A, Bn))
    if mode == "original":
        return lr * math.sqrt(max(1, A / Bn))
    raise ValueError(mode)


# ---- optimizers: step(lr) on the leaves Q (hidden matrices [out, in]) -----------------------
def adamw_others(Q, o):
    """torch.optim.AdamW on every non-hidden parameter: decay on tok_emb / lm_head (unless
    decay_embeddings is false), none on vectors."""
    emb = [v for k, v in Q.items() if v.dim() >= 2 and not is_hidden(k, v)]
    vec = [v for v in Q.values() if v.dim() < 2]
    return torch.optim.AdamW(
        [dict(params=emb, weight_decay=o["weight_decay"] if o["decay_embeddings"] else 0.0),
         dict(params=vec, weight_decay=0.0)],
        lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])


class TorchMuon:
    """torch.optim.Muon on the hidden matrices (float64 Newton-Schulz), AdamW on the rest."""

    def __init__(self, Q, o):
        m = o["muon"]
        hidden = [v for k, v in Q.items() if is_hidden(k, v)]
        self.scale = m["lr_scale"]
        self.muon = torch.optim.Muon(
            hidden, lr=o["lr"] * self.scale, weight_decay=o["weight_decay"], momentum=m["momentum"],
            nesterov=m["nesterov"], ns_steps=m["ns_steps"], adjust_lr_fn=m["adjust_lr"].replace("-", "_"))
        self.adamw = adamw_others(Q, o)

    def step(self, lr):
        for g in self.muon.param_groups:
            g["lr"] = lr * self.scale
        for g in self.adamw.param_groups:
            g["lr"] = lr
        with float64_newton_schulz():
            self.muon.step()
        self.adamw.step()


class NorMuon:
    """NorMuon (normuon_update of the authors' normuon.py) on the hidden matrices, AdamW on the rest."""

    def __init__(self, Q, o):
        self.o, self.m = o, o["muon"]
        self.hidden = {k: v for k, v in Q.items() if is_hidden(k, v)}
        self.buf = {k: torch.zeros_like(v) for k, v in self.hidden.items()}
        self.v = {k: torch.zeros_like(v[..., 0:1]) for k, v in self.hidden.items()}  # [out, 1]
        self.adamw = adamw_others(Q, o)

    @torch.no_grad()
    def step(self, lr):
        beta, beta2, wd = self.m["momentum"], self.m["beta2"], self.o["weight_decay"]
        lr = lr * self.m["lr_scale"]
        for k, p in self.hidden.items():
            grad = p.grad
            self.buf[k].lerp_(grad, 1 - beta)
            update = grad.lerp(self.buf[k], beta) if self.m["nesterov"] else self.buf[k].clone()
            update = ns_keller(update, self.m["ns_steps"])
            vnorm = update.norm()
            self.v[k].lerp_((update * update).mean(dim=-1, keepdim=True), 1 - beta2)
            update = update / (self.v[k].sqrt() + 1e-10)
            update = update * (vnorm / (update.norm() + 1e-10))
            p.mul_(1 - lr * wd)
            p.add_(update, alpha=-adjust_lr(lr, self.m["adjust_lr"], p.shape))
        for g in self.adamw.param_groups:
            g["lr"] = lr
        self.adamw.step()


class Lion:
    """lion-pytorch's update_fn on every parameter; decay on 2-D parameters only."""

    def __init__(self, Q, o):
        self.o = o
        self.params = list(Q.values())
        self.m = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, lr):
        b1, b2 = self.o["lion"]["beta1"], self.o["lion"]["beta2"]
        for p, m in zip(self.params, self.m):
            wd = self.o["weight_decay"] if p.dim() >= 2 else 0.0
            p.mul_(1.0 - lr * wd)
            p.add_((m * b1 + (1 - b1) * p.grad).sign(), alpha=-lr)
            m.mul_(b2).add_(p.grad, alpha=1 - b2)


class Hyperball:
    """Adam- or Muon-Hyperball on the hidden matrices, AdamW on the rest."""

    def __init__(self, Q, o, base):
        self.o, self.base = o, base
        self.hidden = {k: v for k, v in Q.items() if is_hidden(k, v)}
        self.radius = {k: v.detach().norm().item() for k, v in self.hidden.items()}  # ||W_0||_F
        self.m1 = {k: torch.zeros_like(v) for k, v in self.hidden.items()}
        self.m2 = {k: torch.zeros_like(v) for k, v in self.hidden.items()}
        self.t = 0
        self.adamw = adamw_others(Q, o)

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        o, m = self.o, self.o["muon"]
        for k, p in self.hidden.items():
            g = p.grad
            if self.base == "adam":
                self.m1[k].lerp_(g, 1 - o["beta1"])
                self.m2[k].lerp_(g * g, 1 - o["beta2"])
                mhat = self.m1[k] / (1 - o["beta1"] ** self.t)
                vhat = self.m2[k] / (1 - o["beta2"] ** self.t)
                u, step_lr = mhat / (vhat.sqrt() + o["eps"]), lr
            else:  # Muon's direction, as torch.optim.Muon computes it (float64)
                self.m1[k].lerp_(g, 1 - m["momentum"])
                u = g.lerp(self.m1[k], m["momentum"]) if m["nesterov"] else self.m1[k].clone()
                u = ns_torch_float64(u, (torch_muon.DEFAULT_A, torch_muon.DEFAULT_B, torch_muon.DEFAULT_C),
                                     m["ns_steps"], torch_muon.EPS)
                step_lr = adjust_lr(lr * m["lr_scale"], m["adjust_lr"], p.shape)
            r = self.radius[k]
            w = p - step_lr * r * u / u.norm()
            p.copy_(w / w.norm() * r)
        for g in self.adamw.param_groups:
            g["lr"] = lr
        self.adamw.step()


class AdamW:
    """trajectory()'s torch.optim.AdamW: decay on every 2-D parameter (tok_emb and lm_head
    optionally exempt), none on vectors."""

    def __init__(self, Q, o):
        emb_wd = o["weight_decay"] if o["decay_embeddings"] else 0.0
        groups = [dict(params=[v for k, v in Q.items() if is_hidden(k, v)], weight_decay=o["weight_decay"]),
                  dict(params=[v for k, v in Q.items() if k in EMBEDDINGS], weight_decay=emb_wd),
                  dict(params=[v for v in Q.values() if v.dim() < 2], weight_decay=0.0)]
        self.opt = torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])

    def step(self, lr):
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()


def make_optimizer(Q, o):
    n = o["name"]
    if n == "muon":
        return TorchMuon(Q, o)
    if n == "normuon":
        return NorMuon(Q, o)
    if n == "lion":
        return Lion(Q, o)
    if n in ("adamh", "muonh"):
        return Hyperball(Q, o, "adam" if n == "adamh" else "muon")
    if n == "adamw":
        return AdamW(Q, o)
    raise ValueError(n)


# ---- loss and trajectory --------------------------------------------------------------------
def losses(P, rec, tokens, targets, z_loss):
    """(logits, loss, ce, z): z = mean over the CE's tokens of logsumexp(logits)^2."""
    logits, _ = ref.forward(P, tokens, rec)
    flat = logits.reshape(-1, V)
    ce = F.cross_entropy(flat, targets.reshape(-1))
    z = torch.logsumexp(flat, dim=-1).pow(2).mean()
    return logits, (ce + z_loss * z if z_loss > 0 else ce), ce, z


def leaves(P0):
    """Trainable copies of P0, the hidden matrices transposed to [out, in]."""
    return {k: (v.detach().T.contiguous() if is_hidden(k, v) else v.detach().clone()).requires_grad_(True)
            for k, v in P0.items()}


def view(Q):
    """normlab's layout [in, out] of the leaves, for the forward."""
    return {k: (v.T if is_hidden(k, v) else v) for k, v in Q.items()}


def trajectory(P0, rec, gen, o, z_loss):
    """trajectory() of make_reference_fixtures.py with the optimizer `o` and the z-loss."""
    t = TRAIN
    Q = leaves(P0)
    opt = make_optimizer(Q, o)
    toks = torch.randint(0, V, (t["steps"], t["micro_batches"], B, T + 1), generator=gen)
    step_losses, norms, lrs = [], [], []
    for s in range(t["steps"]):
        for v in Q.values():
            v.grad = None
        total = 0.0
        for m in range(t["micro_batches"]):
            loss = losses(view(Q), rec, toks[s, m, :, :T], toks[s, m, :, 1:], z_loss)[1]
            (loss / t["micro_batches"]).backward()
            total += loss.item() / t["micro_batches"]
        norm = torch.nn.utils.clip_grad_norm_(list(Q.values()), t["grad_clip"])
        opt.step(ref.lr_at(s, t))
        step_losses.append(total); norms.append(norm.item()); lrs.append(ref.lr_at(s, t))
    out = {"traj/tokens": toks[..., :T].contiguous(), "traj/targets": toks[..., 1:].contiguous()}
    out["traj/loss"] = torch.tensor(step_losses).float()
    out["traj/grad_norm"] = torch.tensor(norms).float()
    out["traj/lr"] = torch.tensor(lrs).float()
    out.update({f"traj/param/{k}": v.detach().float().contiguous() for k, v in view(Q).items()})
    return out, step_losses, {k: v.detach() for k, v in view(Q).items()}


# ---- sanity checks (printed, one line per case) ---------------------------------------------
def check_muon(P0, o):
    """One step of the transposing wrapper (TorchMuon on the [out, in] leaves) against
    torch.optim.Muon on nn.Linear(d_in, d_out).weight of every hidden matrix, given the same
    gradients; and, for scale, how far torch's own bfloat16 Newton-Schulz would move that step."""
    gen = torch.Generator().manual_seed(7)
    grads = {k: torch.randn(v.shape, generator=gen) for k, v in P0.items()}
    lr = 1e-3
    Q = leaves(P0)
    for k, v in Q.items():
        v.grad = grads[k].T.contiguous() if is_hidden(k, v) else grads[k].clone()
    TorchMuon(Q, o).step(lr)
    mods = {k: torch.nn.Linear(v.shape[0], v.shape[1], bias=False) for k, v in P0.items() if is_hidden(k, v)}
    with torch.no_grad():
        for k, mod in mods.items():
            mod.weight.copy_(P0[k].T)
            mod.weight.grad = grads[k].T.clone()
    m = o["muon"]
    direct = torch.optim.Muon([mod.weight for mod in mods.values()], lr=lr * m["lr_scale"],
                              weight_decay=o["weight_decay"], momentum=m["momentum"], nesterov=True,
                              ns_steps=m["ns_steps"], adjust_lr_fn=m["adjust_lr"].replace("-", "_"))
    with float64_newton_schulz():
        direct.step()
    diff = max((Q[k].detach() - mods[k].weight.detach()).abs().max().item() for k in mods)
    # The same step with torch's own bfloat16 Newton-Schulz, for scale.
    with torch.no_grad():
        for k, mod in mods.items():
            mod.weight.copy_(P0[k].T)
    bf = torch.optim.Muon([mod.weight for mod in mods.values()], lr=lr * m["lr_scale"],
                          weight_decay=o["weight_decay"], momentum=m["momentum"], nesterov=True,
                          ns_steps=m["ns_steps"], adjust_lr_fn=m["adjust_lr"].replace("-", "_"))
    bf.step()
    bfd = max(((Q[k].detach() - mods[k].weight.detach()).abs().max() / (lr * m["lr_scale"])).item() for k in mods)
    return (f"wrapper vs torch.optim.Muon on nn.Linear [out,in]: max |dW| {diff:.1e}; "
            f"bf16 NS would move W by up to {bfd:.1e} x lr")


def check_normuon(P0, o):
    """Step 1 from zero state: v = (1 - beta2) mean(O^2) per row, so every output neuron's update
    row has the same RMS; the rows must agree, the columns (in general) must not."""
    gen = torch.Generator().manual_seed(7)
    Q = leaves(P0)
    for k, v in Q.items():
        v.grad = torch.randn(v.shape, generator=gen)
    before = {k: v.detach().clone() for k, v in Q.items()}
    opt = NorMuon(Q, o)
    lr = 1e-3
    opt.step(lr)
    row_spread, col_spread = 0.0, 0.0
    for k, p in opt.hidden.items():
        u = (before[k] * (1 - lr * o["weight_decay"]) - p.detach()) / adjust_lr(lr, o["muon"]["adjust_lr"], p.shape)
        rows, cols = u.pow(2).mean(1).sqrt(), u.pow(2).mean(0).sqrt()
        row_spread = max(row_spread, (rows.max() / rows.min() - 1).item())
        col_spread = max(col_spread, (cols.max() / cols.min() - 1).item())
    return (f"step-1 update rows (output neurons) have equal RMS: max spread {row_spread:.1e} "
            f"(columns: {col_spread:.1e})")


def check_lion(P0, o):
    """Step 1 from m = 0: p1 = p0 (1 - lr wd) - lr sign(g), every entry, decay on 2-D only."""
    gen = torch.Generator().manual_seed(7)
    Q = leaves(P0)
    for v in Q.values():
        v.grad = torch.randn(v.shape, generator=gen)
    lr, before = 1e-3, {k: v.detach().clone() for k, v in Q.items()}
    Lion(Q, o).step(lr)
    worst = 0.0
    for k, v in Q.items():
        wd = o["weight_decay"] if v.dim() >= 2 else 0.0
        want = before[k] * (1 - lr * wd) - lr * v.grad.sign()
        worst = max(worst, (v.detach() - want).abs().max().item())
    return f"step 1 = p(1 - lr wd) - lr sign(g): max |diff| {worst:.1e}"


def check_zloss(P0, rec, z_loss):
    """z recomputed as log(sum(exp(logits)))^2 without logsumexp; d(z-term)/d logits by hand."""
    gen = torch.Generator().manual_seed(7)
    toks = torch.randint(0, V, (B, T + 1), generator=gen)
    logits, loss, ce, z = losses(P0, rec, toks[:, :T], toks[:, 1:], z_loss)
    lz = logits.detach().exp().sum(-1).log()
    z2 = lz.pow(2).mean()
    lg = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(lg.reshape(-1, V), toks[:, 1:].reshape(-1)).backward()
    g_ce = lg.grad.clone()
    lg.grad = None
    (F.cross_entropy(lg.reshape(-1, V), toks[:, 1:].reshape(-1))
     + z_loss * torch.logsumexp(lg.reshape(-1, V), -1).pow(2).mean()).backward()
    by_hand = 2 * z_loss * lz.unsqueeze(-1) * logits.detach().softmax(-1) / (B * T)
    return (f"z = {z.item():.4f}, |z - mean(log(sum exp)^2)| {abs(z.item() - z2.item()):.1e}, "
            f"loss - ce - 0.01 z {abs(loss.item() - ce.item() - z_loss * z.item()):.1e}, "
            f"z-term logit grad vs 2 c lz softmax / N {(lg.grad - g_ce - by_hand).abs().max().item():.1e}")


def check_harness(seed, rec, final):
    """This script's loop with trajectory()'s own optimizer (decay on every 2-D parameter, no
    z-loss) against make_reference_fixtures.trajectory() on the same weights and tokens."""
    runs = []
    for which in ("ref", "here"):
        gen = torch.Generator().manual_seed(seed)
        P = ref.make_params(rec, FFN == "mlp", gen)
        torch.randint(0, V, (B, T + 1), generator=gen)  # input/tokens, as main() draws them
        if which == "ref":
            out, _ = ref.trajectory(P, rec, gen)
        else:
            out = trajectory(P, rec, gen, optim_settings("adamw"), 0.0)[0]
        runs.append(out)
    diff = max((runs[0][k].double() - runs[1][k].double()).abs().max().item() for k in runs[0])
    emb = max((final[k].float().double() - runs[0][f"traj/param/{k}"].double()).abs().max().item() for k in EMBEDDINGS)
    hid = max((final[k].float().double() - runs[0][f"traj/param/{k}"].double()).abs().max().item()
              for k in final if not k.startswith(EMBEDDINGS))
    return (f"loop + decay-all AdamW vs make_reference_fixtures.trajectory(): max |diff| {diff:.1e}; "
            f"no-emb-decay moves tok_emb/lm_head by {emb:.1e}, the rest by {hid:.1e}")


def frob_check(P0, P):
    worst = max(abs(P[k].norm().item() / P0[k].detach().norm().item() - 1) for k in P0 if is_hidden(k, P0[k]))
    moved = min((P[k] - P0[k].detach()).norm().item() / P0[k].detach().norm().item() for k in P0 if is_hidden(k, P0[k]))
    return f"hidden ||W||_F after 12 steps / ||W_0||_F - 1: max {worst:.1e} (least relative move {moved:.1e})"


def main(only):
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference", "optim")
    os.makedirs(out_dir, exist_ok=True)
    # One thread, so that the order of the sums does not depend on the machine's core count.
    torch.set_num_threads(1)
    ref.ROPE_BASE = ROPE_BASE
    rec = ref.recipe(RECIPE)
    for idx, (case, (o, z_loss)) in enumerate(CASES.items()):
        if only and case not in only:
            continue
        gen = torch.Generator().manual_seed(2000 + idx)
        P = ref.make_params(rec, FFN == "mlp", gen)
        toks = torch.randint(0, V, (B, T + 1), generator=gen)
        tokens, targets = toks[:, :T], toks[:, 1:]
        logits, loss, ce, z = losses(P, rec, tokens, targets, z_loss)
        loss.backward()
        traj, step_losses, final = trajectory(P, rec, gen, o, z_loss)
        tensors = {f"param/{k}": v.detach().float() for k, v in P.items()}
        tensors.update(traj)
        tensors.update({f"grad/{k}": v.grad.float() for k, v in P.items()})
        tensors["input/tokens"], tensors["input/targets"] = tokens.contiguous(), targets.contiguous()
        tensors["out/logits"] = logits.detach().float()
        tensors["out/loss"] = loss.detach().float().reshape(1)
        tensors["out/ce"] = ce.detach().float().reshape(1)
        tensors["out/reg"] = torch.zeros(1).float()
        if z_loss > 0:
            tensors["out/z"] = z.detach().float().reshape(1)
        config = dict(vocab_size=V, d_model=D, n_layers=L, n_heads=H, ffn=FFN, d_glu=FF,
                      rope_base=ROPE_BASE, norm_eps=EPS, init_std=0.02, recipe=RECIPE)
        meta = {"config": json.dumps(config), "train": json.dumps(dict(TRAIN, optim=o, z_loss=z_loss))}
        save_file(tensors, os.path.join(out_dir, f"{case}.safetensors"), metadata=meta)
        check = sanity(case, 2000 + idx, P, final, o, z_loss, rec)
        print(f"{case:20s} loss {loss.item():.6f}  trajectory {step_losses[0]:.4f} -> {step_losses[-1]:.4f}  | {check}")


def sanity(case, seed, P0, final, o, z_loss, rec):
    if z_loss > 0:
        return check_zloss(P0, rec, z_loss)
    if not o["decay_embeddings"]:
        return check_harness(seed, rec, final)
    if o["name"] == "lion":
        return check_lion(P0, o)
    if o["name"] == "muon":
        return check_muon(P0, o)
    if o["name"] == "normuon":
        return check_normuon(P0, o)
    if o["name"] in ("adamh", "muonh"):
        return frob_check(P0, final)
    return ""


if __name__ == "__main__":
    main(set(sys.argv[1:]))
