"""Mixture-of-experts reference fixtures from Hugging Face `transformers`' own MoE modules.

Independent of normlab's code: every fixture value comes from running transformers' modules
(not a re-implementation) on a tiny random config, in float64. What it checks (through the Rust
test that reads the files): the routers (softmax-then-top-k, top-k-then-softmax, DeepSeek's
grouped sigmoid router with its selection bias), the SwiGLU experts, DeepSeek's shared expert,
the Switch-style load-balancing loss (pooled over the batch), DeepSeek-V3's complementary
sequence-wise auxiliary loss, megablocks' batched per-layer load-balancing loss, the ST-MoE router
z-loss, the gradients of all of it, and DeepSeek-V3's auxiliary-loss-free bias update.

Transformers code that is run (transformers 5.24.0, files under transformers/models/):
  olmoe/modeling_olmoe.py          OlmoeSparseMoeBlock (OlmoeTopKRouter + OlmoeExperts),
                                   load_balancing_loss_func
  qwen3_moe/modeling_qwen3_moe.py  Qwen3MoeSparseMoeBlock (Qwen3MoeTopKRouter + Qwen3MoeExperts),
                                   load_balancing_loss_func
  mixtral/modeling_mixtral.py      MixtralSparseMoeBlock (MixtralTopKRouter + MixtralExperts),
                                   load_balancing_loss_func
  deepseek_v3/modeling_deepseek_v3.py  DeepseekV3MoE (DeepseekV3TopkRouter + DeepseekV3Experts +
                                   DeepseekV3MLP as the shared expert); it has no
                                   load_balancing_loss_func, so its aux_loss is the report's
                                   sequence-wise loss, written here (`sequence_aux_loss`).
Configs: OlmoeConfig, Qwen3MoeConfig, MixtralConfig, DeepseekV3Config, all with
experts_implementation="eager" (the experts' own Python loop, not batched_mm/grouped_mm).

float64, and how the internal float32 casts are lifted. Parameters and inputs are float64
(`.double()`), but transformers casts to float32 in four places, which would leave float32
rounding (~1e-8 relative) in a float64 fixture:
  OlmoeTopKRouter.forward / Qwen3MoeTopKRouter.forward: softmax(router_logits, dtype=torch.float)
  MixtralTopKRouter.forward:    softmax(router_logits.float(), dim=-1)
  DeepseekV3TopkRouter.forward: F.linear(hidden_states.type(torch.float32),
                                         self.weight.type(torch.float32))
  load_balancing_loss_func:     accumulators torch.zeros(..., dtype=torch.float32), histc dtype
                                torch.float32, routing_weights.float()
`float64_source_patch` below takes each of these functions' own source (inspect.getsource),
replaces exactly those tokens (torch.float / torch.float32 -> torch.float64, .float() ->
.double(); the number of replacements is asserted, so a changed transformers fails loudly rather
than silently), compiles it in the function's own module globals and installs it on the
class/module only inside a `with` block around the fixture's forward/backward; it is restored
afterwards. Nothing else in the code changes. To show that the patch changes rounding only, each
case is also run (a) unpatched with the same float64 parameters and (b) unpatched entirely in
float32 (`.float()` module and inputs); the script prints the max abs differences (values and
gradients) and asserts that the expert selection is identical.

Weights: router N(0, 0.5), experts and shared expert N(0, 0.2), DeepSeek's
e_score_correction_bias U(-0.1, 0.1); x ~ N(0, 1) [B=2, T=5, d=16]; cotangent r ~ N(0, 1).
Every draw comes from a torch.Generator with a fixed seed; a case whose routing has a near tie
(any gap within 1e-6 among the top-k+1 probabilities, DeepSeek's group scores at the top-group
boundary, its biased choice scores at the top-k boundary, or its two selected weights) is
re-drawn with the next seed. The output is deterministic: rerunning rewrites identical bytes
(each file's JSON header is re-written with sorted keys, see `save`, since safetensors keeps
the metadata in a hash map whose order changes from run to run) -- on the same machine and BLAS:
the float64 matmuls' summation order depends on the BLAS build and CPU, so another machine can
differ in the last bits (a few 1e-16). `--keep-existing` keeps, in each file rewritten, every
tensor of the existing file that the new run reproduces to within 1e-12 * (1 + |value|) (same
key, dtype and shape; integers exactly), so that such last-bit noise does not churn the files;
only tensors that really changed (or are new) are written from the run. Such a file mixes the
two machines' roundings, which differ by ~1e-15: far below any test tolerance.

Expert layout (transformers 5 stores experts fused): gate_up_proj [E, 2*de, d], down_proj
[E, d, de]; the expert is linear(x, gate_up_proj[e]).chunk(2, -1) -> (gate, up), then
linear(silu(gate) * up, down_proj[e]). So, in our x @ W layout:
  w1 = gate_up_proj[e, :de, :].T  [d, de]    w3 = gate_up_proj[e, de:, :].T  [d, de]
  w2 = down_proj[e].T             [de, d]    expert(x) = (silu(x @ w1) * (x @ w3)) @ w2
The split is verified by running the module's experts with every token sent to one expert at
weight 1 and comparing with that formula; the whole block output is also recomputed by hand from
the stored tensors, and autograd through that recompute (leaves in the stored layout) is compared
with the stored gradients. All three differences are printed.

Files (tests/fixtures/moe/, float64 unless noted), per case olmoe / qwen3-moe / mixtral /
deepseek-v3:
  x [2,5,16], r [2,5,16]; router.weight [d,E] (nn weight transposed); router.bias [E] (deepseek:
  e_score_correction_bias); experts.{e}.w1 [d,de], .w3 [d,de], .w2 [de,d]; shared.w1 [d,S*de],
  shared.w3, shared.w2 [S*de,d] (deepseek); out [2,5,16]; router_logits [10,E] (x @ W, before
  softmax/sigmoid); topk_indices int64 [10,2] and topk_weights [10,2], sorted by weight descending
  (DeepSeek's router returns its selection with torch.topk(sorted=False); it is sorted here by
  its final weight, which does not change the output); aux_loss [1]; z_loss [1]; objective [1] =
  sum(out * r) + 0.01 * aux_loss + 0.001 * z_loss; grad.x, grad.router.weight (transposed
  layout), grad.experts.{e}.w1/w3/w2, grad.shared.w1/w3/w2 (deepseek). The bias gets no gradient.
  olmoe only: aux2.logits_a, aux2.logits_b [10,E] random (two layers' router logits, rows
  b*T + t), aux2.loss [1] = load_balancing_loss_func((logits_a, logits_b), E, 2) -- in 5.24.0 it
  sums counts and probabilities over layers and normalises by all layers' rows together, so it is
  not the mean of per-layer losses; aux2.per_layer [1] = megablocks' batched_load_balancing_loss
  for the two layers (`megablocks_batched_lbl`, moe_loss_weight 1: 1 per layer at an even load,
  averaged over layers); aux2.sequence [1] = `sequence_aux_loss` of each layer with its softmax
  probabilities as s' and their top-2 as the selection, B=2 sequences of T=5 tokens, averaged
  over the sequences and then over the two layers.
  Metadata: `config` (JSON: router kind, sizes, options; `aux_form` "pooled" for the three
  softmax cases, "sequence" for deepseek-v3), `source` (the transformers classes).

aux_loss, softmax cases (aux_form "pooled"): the family's own load_balancing_loss_func (Switch
Transformer, Fedus et al. 2021, eqs. 4-6, as transformers implements it: E * sum_i f_i * P_i with
f_i = top-k assignments to expert i / tokens, P_i = mean softmax probability, over all B*T tokens
of the batch together), on a 1-tuple of this block's router logits, top_k=2, no attention mask.
aux_loss, deepseek-v3 (aux_form "sequence"): DeepSeek-V3's complementary sequence-wise auxiliary
loss without alpha (report sec. 2.1.2, eqs. 17-20; `sequence_aux_loss`): per sequence of T
tokens, s'_{i,t} = s_{i,t} / sum_j s_{j,t} with s = sigmoid(router logits) over all E experts (no
bias, no group mask), f_i = E / (K T) * #{t : i in token t's selection (the block's own, with bias
and group limit)}, P_i = mean_t s'_{i,t}, L = sum_i f_i P_i; averaged over the B sequences. f is a
count: the gradient flows through P only. The objective uses alpha = 0.01 (aux_coef).
z_loss: the ST-MoE router z-loss (Zoph et al. 2022, "ST-MoE: Designing Stable and Transferable
Sparse Expert Models", arXiv:2202.08906, eq. 5): L_z = (1/B) sum_i (log sum_j exp x_j^(i))^2, B
the number of tokens, x^(i) token i's router logits; written here from the paper (transformers
has no such function for these models).

bias-update.safetensors: DeepSeek-V3's auxiliary-loss-free balancing (DeepSeek-V3 Technical
Report, arXiv:2412.19437, sec. 2.1.2: after each step the bias of an overloaded expert is
decreased by gamma and that of an underloaded one increased by gamma), modelled as
b_i += gamma * sign(mean_j c_j - c_i), c_i = number of (token, slot) assignments to expert i in
the step's batch. The deepseek-v3 case's router (DeepseekV3TopkRouter, float64-patched as above)
and weights, gamma = 0.01, bias0 = that case's bias, 6 steps, each routing its own fixed input
steps.{s}.x [10,16] with e_score_correction_bias set to the current bias. Stores gamma [1],
bias0 [E], router.weight [d,E], steps.{s}.x [10,16], steps.{s}.topk_indices int64 [10,2] (by
weight, descending), steps.{s}.counts [E], steps.{s}.bias [E] (after the update).

Regenerate (about 10 s on one CPU thread):
  python3 -m venv /var/cache/normlab/torch-venv
  /var/cache/normlab/torch-venv/bin/pip install torch==2.15.0 transformers==5.24.0 safetensors numpy
  /var/cache/normlab/torch-venv/bin/python tools/make_moe_fixtures.py   # from the repository root
`--cases NAME ...` (olmoe, qwen3-moe, mixtral, deepseek-v3, bias-update) rewrites only those files
(the seeds do not depend on which cases run); `--keep-existing`: see above.
"""
import argparse
import contextlib
import hashlib
import inspect
import json
import os
import textwrap

import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as save_bytes
from transformers import DeepseekV3Config, MixtralConfig, OlmoeConfig, Qwen3MoeConfig
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m_ds
from transformers.models.mixtral import modeling_mixtral as m_mix
from transformers.models.olmoe import modeling_olmoe as m_olmoe
from transformers.models.qwen3_moe import modeling_qwen3_moe as m_qwen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "moe")
D, E, K, DE = 16, 8, 2, 12
B, T = 2, 5
AUX_COEF, Z_COEF = 0.01, 0.001
TIE_EPS = 1e-6
GAMMA, BIAS_STEPS = 0.01, 6

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# ----------------------------------------------------------------------------------------------
# float64 patch of transformers' own source
# ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def float64_source_patch(owner, name, replacements):
    """Install, for the duration of the block, `owner.name` recompiled from its own source with
    each (old, new, expected_count) token replacement applied."""
    orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    src = textwrap.dedent(inspect.getsource(orig))
    for old, new, count in replacements:
        found = src.count(old)
        if found != count:
            raise RuntimeError(f"{orig.__qualname__}: expected {count} x {old!r}, found {found}")
        src = src.replace(old, new)
    namespace = {}
    code = compile(src, f"<float64 patch of {orig.__module__}.{orig.__qualname__}>", "exec")
    exec(code, orig.__globals__, namespace)
    setattr(owner, name, namespace[orig.__name__])
    try:
        yield
    finally:
        setattr(owner, name, orig)


SOFTMAX_FLOAT = [("softmax(router_logits, dtype=torch.float, dim=-1)",
                  "softmax(router_logits, dtype=torch.float64, dim=-1)", 1)]
MIXTRAL_FLOAT = [("softmax(router_logits.float(), dim=-1)",
                  "softmax(router_logits.double(), dim=-1)", 1)]
DEEPSEEK_FLOAT = [("hidden_states.type(torch.float32)", "hidden_states.type(torch.float64)", 1),
                  ("self.weight.type(torch.float32)", "self.weight.type(torch.float64)", 1)]
LBL_FLOAT = [("torch.float32", "torch.float64", 5), (".float()", ".double()", 2)]


def lbl_patch(module):
    if module is None:
        return contextlib.nullcontext()
    return float64_source_patch(module, "load_balancing_loss_func", LBL_FLOAT)


# ----------------------------------------------------------------------------------------------
# auxiliary losses written here (transformers has no function for them)
# ----------------------------------------------------------------------------------------------
def sequence_aux_loss(probs, topk_idx, n_seq, seq_len):
    """DeepSeek-V3's complementary sequence-wise auxiliary loss, without the factor alpha.

    DeepSeek-V3 Technical Report (arXiv:2412.19437), sec. 2.1.2, eqs. 17-20:
      (17) L_Bal = alpha * sum_i f_i P_i
      (18) f_i = N_r / (K_r T) * sum_t 1(s_{i,t} in Topk({s_{j,t} | 1 <= j <= N_r}, K_r))
      (19) s'_{i,t} = s_{i,t} / sum_j s_{j,t}
      (20) P_i = (1/T) sum_t s'_{i,t}
    `probs` [n_seq*seq_len, N_r] holds the normalised affinities s'_{i,t} (eq. 19, computed by the
    caller), rows ordered b*seq_len + t; `topk_idx` [rows, K_r] is each token's selection (eq.
    18's indicator, taken from the block's real routing). The loss is evaluated per sequence (T =
    seq_len) and averaged over the n_seq sequences. f_i is a count: no gradient flows through it.
    """
    rows, n_r = probs.shape
    k_r = topk_idx.shape[1]
    assert rows == n_seq * seq_len
    hits = torch.zeros(rows, n_r, dtype=probs.dtype).scatter_(1, topk_idx, 1.0)
    f = hits.view(n_seq, seq_len, n_r).sum(dim=1) * (n_r / (k_r * seq_len))   # eq. 18
    p = probs.view(n_seq, seq_len, n_r).mean(dim=1)                            # eq. 20
    return (f * p).sum(dim=-1).mean()                                          # eq. 17, mean over b


def deepseek_sequence_aux(logits, topk_idx):
    """`sequence_aux_loss` on DeepSeek-V3 router logits [B*T, E]: s = sigmoid over all routed
    experts (no correction bias, no group mask), s' = s / sum_j s_j exactly (eq. 19, no epsilon);
    `topk_idx` is the router's own selection (with bias and group limit)."""
    s = torch.sigmoid(logits)
    return sequence_aux_loss(s / s.sum(dim=-1, keepdim=True), topk_idx, B, T)


def megablocks_batched_lbl(layer_logits, num_experts, top_k, loss_weight=1.0):
    """megablocks' `batched_load_balancing_loss` (github.com/databricks/megablocks,
    megablocks/layers/moe.py, as of commit 78eea65), for a list of layers' router logits
    [tokens, E], each routed as megablocks' LearnedRouter does (scores = logits.softmax(-1),
    torch.topk(scores, top_k)); num_layers = len(layer_logits), no pipeline stages. Per layer the
    saved pair is (tokens_per_expert [E] = histogram of all top_k assignments, scores [tokens, E]);
    then
      expert_scores = cat(scores, dim=1).mean(dim=0); tokens_per_expert = cat(tokens_per_expert)
      loss = loss_weight * num_experts / (num_layers * tokens * top_k)
             * dot(tokens_per_expert, expert_scores)
    i.e. the mean over layers of E/(tokens*k) * sum_e c_e * P_e, which is 1 per layer at an even
    load."""
    counts, scores = [], []
    for logits in layer_logits:
        sc = logits.softmax(dim=-1)
        idx = torch.topk(sc, top_k, dim=-1).indices
        counts.append(torch.bincount(idx.reshape(-1), minlength=num_experts))
        scores.append(sc)
    tokens = scores[0].shape[0]
    expert_scores = torch.cat(scores, dim=1).mean(dim=0)
    tokens_per_expert = torch.cat(counts).to(expert_scores.dtype)
    scale = (num_experts * loss_weight) / (len(layer_logits) * tokens * top_k)
    return scale * torch.dot(tokens_per_expert, expert_scores)


def aux_of(case, logits, topk_idx):
    """The case's aux_loss: transformers' pooled load_balancing_loss_func for the softmax routers,
    the sequence-wise loss for DeepSeek V3."""
    if case["aux"] == "pooled":
        return case["lbl_module"].load_balancing_loss_func((logits,), E, K)
    return deepseek_sequence_aux(logits, topk_idx)


def sequence_aux_loops(probs, topk_idx, n_seq, seq_len):
    """The same loss term by term with Python loops (a check of `sequence_aux_loss`)."""
    n_r, k_r = probs.shape[1], topk_idx.shape[1]
    total = 0.0
    for b in range(n_seq):
        rows = range(b * seq_len, (b + 1) * seq_len)
        for i in range(n_r):
            f = n_r / (k_r * seq_len) * sum(int(i in topk_idx[t].tolist()) for t in rows)
            p = sum(probs[t, i].item() for t in rows) / seq_len
            total += f * p
    return total / n_seq


# ----------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------
CASES = {
    "olmoe": dict(
        seed=1000, module=m_olmoe, lbl_module=m_olmoe, aux="pooled",
        make=lambda: m_olmoe.OlmoeSparseMoeBlock(OlmoeConfig(
            hidden_size=D, intermediate_size=DE, num_experts=E, num_experts_per_tok=K,
            norm_topk_prob=False, hidden_act="silu", experts_implementation="eager")),
        router_cls=m_olmoe.OlmoeTopKRouter, router_patch=SOFTMAX_FLOAT,
        source="transformers.models.olmoe.modeling_olmoe.OlmoeSparseMoeBlock "
               "(OlmoeTopKRouter, OlmoeExperts); aux: modeling_olmoe.load_balancing_loss_func",
        config=dict(router="softmax-topk", normalize_top_k=False, routed_scale=1.0, shared=0,
                    groups=1, top_groups=1)),
    "qwen3-moe": dict(
        seed=2000, module=m_qwen, lbl_module=m_qwen, aux="pooled",
        make=lambda: m_qwen.Qwen3MoeSparseMoeBlock(Qwen3MoeConfig(
            hidden_size=D, moe_intermediate_size=DE, num_experts=E, num_experts_per_tok=K,
            norm_topk_prob=True, hidden_act="silu", experts_implementation="eager")),
        router_cls=m_qwen.Qwen3MoeTopKRouter, router_patch=SOFTMAX_FLOAT,
        source="transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock "
               "(Qwen3MoeTopKRouter, Qwen3MoeExperts); aux: "
               "modeling_qwen3_moe.load_balancing_loss_func",
        config=dict(router="softmax-topk", normalize_top_k=True, routed_scale=1.0, shared=0,
                    groups=1, top_groups=1)),
    "mixtral": dict(
        seed=3000, module=m_mix, lbl_module=m_mix, aux="pooled",
        make=lambda: m_mix.MixtralSparseMoeBlock(MixtralConfig(
            hidden_size=D, intermediate_size=DE, num_local_experts=E, num_experts_per_tok=K,
            router_jitter_noise=0.0, hidden_act="silu", experts_implementation="eager")),
        router_cls=m_mix.MixtralTopKRouter, router_patch=MIXTRAL_FLOAT,
        source="transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock "
               "(MixtralTopKRouter, MixtralExperts); aux: modeling_mixtral.load_balancing_loss_func",
        # transformers computes softmax over all experts, top-k, then renormalises: identical to
        # a softmax over the k selected logits (Mixtral's "top-k then softmax").
        config=dict(router="topk-softmax", normalize_top_k=True, routed_scale=1.0, shared=0,
                    groups=1, top_groups=1)),
    "deepseek-v3": dict(
        seed=4000, module=m_ds, lbl_module=None, aux="sequence",
        make=lambda: m_ds.DeepseekV3MoE(DeepseekV3Config(
            hidden_size=D, moe_intermediate_size=DE, n_routed_experts=E, num_experts_per_tok=K,
            n_group=4, topk_group=2, n_shared_experts=1, routed_scaling_factor=2.5,
            norm_topk_prob=True, hidden_act="silu", experts_implementation="eager")),
        router_cls=m_ds.DeepseekV3TopkRouter, router_patch=DEEPSEEK_FLOAT,
        source="transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3MoE "
               "(DeepseekV3TopkRouter, DeepseekV3Experts, DeepseekV3MLP shared); aux: "
               "complementary sequence-wise auxiliary loss, DeepSeek-V3 Technical Report "
               "(arXiv:2412.19437) sec. 2.1.2 eqs. 17-20, written from the report "
               "(transformers has none)",
        config=dict(router="sigmoid", normalize_top_k=True, routed_scale=2.5, shared=1,
                    groups=4, top_groups=2, group_score="sum-top2", selection_bias=True,
                    normalize_eps=1e-20)),
}


def init_block(name, case, seed):
    block = case["make"]().double().eval()
    g = torch.Generator().manual_seed(seed)
    normal = lambda *s, std: torch.randn(*s, generator=g, dtype=torch.float64) * std
    with torch.no_grad():
        block.gate.weight.copy_(normal(E, D, std=0.5))
        block.experts.gate_up_proj.copy_(normal(E, 2 * DE, D, std=0.2))
        block.experts.down_proj.copy_(normal(E, D, DE, std=0.2))
        if name == "deepseek-v3":
            block.gate.e_score_correction_bias.copy_(
                (torch.rand(E, generator=g, dtype=torch.float64) * 2 - 1) * 0.1)
            for lin in (block.shared_experts.gate_proj, block.shared_experts.up_proj,
                        block.shared_experts.down_proj):
                lin.weight.copy_(normal(*lin.weight.shape, std=0.2))
    x = normal(B, T, D, std=1.0)
    r = normal(B, T, D, std=1.0)
    return block, x, r, g


# ----------------------------------------------------------------------------------------------
# tie checks (computed in float64 from the logits)
# ----------------------------------------------------------------------------------------------
def softmax_gap(logits, k=K):
    p = torch.softmax(logits.double(), dim=-1).sort(dim=-1, descending=True).values
    return (p[:, :k] - p[:, 1:k + 1]).min().item()


def deepseek_gaps(logits, bias, groups=4, top_groups=2, k=K):
    s = torch.sigmoid(logits.double())
    c = s + bias
    gs = c.view(-1, groups, E // groups).topk(2, dim=-1).values.sum(-1)
    gsort = gs.sort(dim=-1, descending=True).values
    group_gap = (gsort[:, top_groups - 1] - gsort[:, top_groups]).min().item()
    keep = torch.zeros_like(gs).scatter_(1, gs.topk(top_groups, dim=-1).indices, 1.0)
    keep = keep.unsqueeze(-1).expand(-1, groups, E // groups).reshape(-1, E).bool()
    cm = c.masked_fill(~keep, float("-inf")).sort(dim=-1, descending=True)
    choice_gap = (cm.values[:, k - 1] - cm.values[:, k]).min().item()
    w = s.gather(1, cm.indices[:, :k])
    weight_gap = (w[:, 0] - w[:, 1]).abs().min().item()
    return min(group_gap, choice_gap, weight_gap)


# ----------------------------------------------------------------------------------------------
# one forward/backward through transformers' block
# ----------------------------------------------------------------------------------------------
def z_loss_of(logits):
    return torch.logsumexp(logits, dim=-1).pow(2).mean()


def run_block(block, x, r, case, patched):
    block.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    captured = []
    handle = block.gate.register_forward_hook(lambda mod, inp, out: captured.append(out))
    with contextlib.ExitStack() as stack:
        if patched:
            stack.enter_context(float64_source_patch(case["router_cls"], "forward",
                                                     case["router_patch"]))
            stack.enter_context(lbl_patch(case["lbl_module"]))
        out = block(x)
        logits, weights, idx = captured[0]
        aux = aux_of(case, logits, idx)
        z = z_loss_of(logits)
        obj = (out * r.to(out.dtype)).sum() + AUX_COEF * aux + Z_COEF * z
        obj.backward()
    handle.remove()
    return dict(x=x, out=out, logits=logits, weights=weights, idx=idx, aux=aux, z=z, obj=obj)


def sort_by_weight(weights, idx):
    order = weights.detach().sort(dim=-1, descending=True, stable=True).indices
    return weights.gather(1, order), idx.gather(1, order)


def split_experts(tensor_gate_up, tensor_down):
    """transformers' fused layout -> per-expert (w1, w3, w2) in x @ W layout."""
    out = []
    for e in range(E):
        gu = tensor_gate_up[e]
        out.append((gu[:DE, :].T.contiguous(), gu[DE:, :].T.contiguous(),
                    tensor_down[e].T.contiguous()))
    return out


def expert_fn(xf, w1, w3, w2):
    return (F.silu(xf @ w1) * (xf @ w3)) @ w2


def hand_block(name, cfg, x, W, bias, experts, shared):
    """Recompute the block from the stored tensors (a check of the file layout only)."""
    xf = x.reshape(-1, D)
    logits = xf @ W
    if cfg["router"] in ("softmax-topk", "topk-softmax"):
        p = torch.softmax(logits, dim=-1)
        w, i = p.topk(K, dim=-1)
        if cfg["normalize_top_k"]:
            w = w / w.sum(-1, keepdim=True)
    else:
        s = torch.sigmoid(logits)
        c = s + bias
        gs = c.view(-1, cfg["groups"], E // cfg["groups"]).topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(gs).scatter_(1, gs.topk(cfg["top_groups"], dim=-1).indices, 1.0)
        keep = keep.unsqueeze(-1).expand(-1, cfg["groups"], E // cfg["groups"]).reshape(-1, E)
        i = c.masked_fill(~keep.bool(), float("-inf")).topk(K, dim=-1).indices
        w = s.gather(1, i)
        w = w / (w.sum(-1, keepdim=True) + 1e-20) * cfg["routed_scale"]
        w, i = sort_by_weight(w, i)
    out = torch.zeros_like(xf)
    for t in range(xf.shape[0]):
        for j in range(K):
            out[t] += w[t, j] * expert_fn(xf[t:t + 1], *experts[i[t, j].item()])[0]
    if shared is not None:
        out = out + expert_fn(xf, *shared)
    return out.reshape(x.shape), logits, w, i


def maxdiff(a, b):
    return (a.detach().double() - b.detach().double()).abs().max().item()


def block_grads(block, name):
    """(router grad [d,E], per-expert (w1,w3,w2) grads, shared grads) in our layout."""
    gW = block.gate.weight.grad.T.contiguous()
    gexp = split_experts(block.experts.gate_up_proj.grad, block.experts.down_proj.grad)
    gshared = None
    if name == "deepseek-v3":
        se = block.shared_experts
        gshared = (se.gate_proj.weight.grad.T.contiguous(), se.up_proj.weight.grad.T.contiguous(),
                   se.down_proj.weight.grad.T.contiguous())
    return gW, gexp, gshared


def flat_grads(block, name, xgrad):
    gW, gexp, gshared = block_grads(block, name)
    parts = [xgrad.reshape(-1), gW.reshape(-1)] + [t.reshape(-1) for ex in gexp for t in ex]
    if gshared is not None:
        parts += [t.reshape(-1) for t in gshared]
    return torch.cat([p.double() for p in parts])


KEEP_EXISTING = False  # set by --keep-existing


def keep_existing(path, tensors):
    """With --keep-existing: the existing file's tensor wherever the new one matches it to within
    1e-12 * (1 + |old|) (integers: exactly); the new tensor where it changed or is new."""
    if not KEEP_EXISTING or not os.path.exists(path):
        return tensors
    old = {k: v.clone() for k, v in load_file(path).items()}  # not views of the file
    out, kept, noisy, changed = {}, 0, 0.0, []
    for k, v in tensors.items():
        o = old.get(k)
        if o is not None and o.dtype == v.dtype and o.shape == v.shape:
            if o.dtype.is_floating_point:
                d = (v.detach() - o).abs()
                if bool((d <= 1e-12 * (1 + o.abs())).all()):
                    out[k], kept, noisy = o, kept + 1, max(noisy, d.max().item())
                    continue
            elif torch.equal(o, v):
                out[k], kept = o, kept + 1
                continue
        out[k] = v
        changed.append(k if o is not None else k + " (new)")
    dropped = sorted(set(old) - set(tensors))
    print(f"  --keep-existing: kept {kept} existing tensors (the run's own differ from them by at "
          f"most {noisy:.2e}); written from this run: {changed}; dropped: {dropped}")
    return out


def save(path, tensors, metadata):
    """safetensors.torch.save, with its JSON header re-written with sorted keys: the library keeps
    `__metadata__` in a hash map, so with two metadata keys their order (and so the file's bytes)
    would change from run to run. Offsets are relative to the data section, which is unchanged."""
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    raw = save_bytes(tensors, metadata=metadata)
    n = int.from_bytes(raw[:8], "little")
    header = json.dumps(json.loads(raw[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    blob = len(header).to_bytes(8, "little") + header + raw[8 + n:]
    with open(path, "wb") as f:
        f.write(blob)
    back = load_file(path)
    with safe_open(path, "pt") as f:
        assert f.metadata() == metadata
    assert back.keys() == tensors.keys() and all(torch.equal(back[k], v) for k, v in tensors.items())
    digest = hashlib.sha256(blob).hexdigest()[:16]
    print(f"  wrote {os.path.relpath(path, ROOT)}: {len(tensors)} tensors, "
          f"{os.path.getsize(path)} bytes, sha256 {digest}")


# ----------------------------------------------------------------------------------------------
def make_case(name, case, write=True):
    print(f"== {name}")
    seed = case["seed"]
    while True:
        block, x, r, g = init_block(name, case, seed)
        with torch.no_grad(), float64_source_patch(case["router_cls"], "forward",
                                                   case["router_patch"]):
            logits = block.gate(x.reshape(-1, D))[0]
        # softmax routers; also kept for deepseek-v3 (its aux once took a softmax top-k), so
        # that its seed stays the one drawn before
        gap = softmax_gap(logits)
        if name == "deepseek-v3":
            gap = min(gap, deepseek_gaps(logits, block.gate.e_score_correction_bias))
        if gap > TIE_EPS:
            break
        print(f"  seed {seed}: near tie (gap {gap:.2e}), re-drawing")
        seed += 1
    print(f"  seed {seed}, smallest routing gap {gap:.3e}")

    res = run_block(block, x, r, case, patched=True)
    W = block.gate.weight.detach().T.contiguous()
    experts = split_experts(block.experts.gate_up_proj.detach(), block.experts.down_proj.detach())
    bias = block.gate.e_score_correction_bias.detach().clone() if name == "deepseek-v3" else None
    shared = None
    if name == "deepseek-v3":
        se = block.shared_experts
        shared = (se.gate_proj.weight.detach().T.contiguous(),
                  se.up_proj.weight.detach().T.contiguous(),
                  se.down_proj.weight.detach().T.contiguous())
    gW, gexp, gshared = block_grads(block, name)
    grads_patched = flat_grads(block, name, res["x"].grad)
    weights, idx = sort_by_weight(res["weights"].detach(), res["idx"])

    # --- checks of the expert split and of the whole layout, by hand from the stored tensors
    xf = x.reshape(-1, D)
    with torch.no_grad():
        split_err = 0.0
        for e in range(E):
            ones = torch.ones(xf.shape[0], 1, dtype=torch.float64)
            mod = block.experts(xf, torch.full((xf.shape[0], 1), e, dtype=torch.long), ones)
            split_err = max(split_err, maxdiff(mod, expert_fn(xf, *experts[e])))
        if shared is not None:
            split_err = max(split_err, maxdiff(block.shared_experts(xf), expert_fn(xf, *shared)))
        h_out, h_logits, h_w, h_i = hand_block(name, case["config"], x, W, bias, experts, shared)
    assert torch.equal(h_i, idx), "hand routing selects other experts"
    print(f"  expert split vs module (every expert, one at a time): max |diff| {split_err:.2e}")
    print(f"  hand recompute from stored tensors: out {maxdiff(h_out, res['out']):.2e}, "
          f"logits {maxdiff(h_logits, res['logits']):.2e}, weights {maxdiff(h_w, weights):.2e}")
    assert split_err < 1e-13 and maxdiff(h_out, res["out"]) < 1e-13
    # the gradients' layout: autograd through the hand recompute, leaves in the stored layout
    leaves = [x.clone(), W.clone()] + [w.clone() for ex in experts for w in ex]
    if shared is not None:
        leaves += [w.clone() for w in shared]
    for leaf in leaves:
        leaf.requires_grad_(True)
    hx, hW = leaves[0], leaves[1]
    hexp = [tuple(leaves[2 + 3 * e:5 + 3 * e]) for e in range(E)]
    hsh = tuple(leaves[2 + 3 * E:]) if shared is not None else None
    h_out, h_logits, _, h_i = hand_block(name, case["config"], hx, hW, bias, hexp, hsh)
    with lbl_patch(case["lbl_module"]):
        h_aux = aux_of(case, h_logits, h_i)
    if case["aux"] == "sequence":
        hs = torch.sigmoid(h_logits.detach())
        loops = sequence_aux_loops(hs / hs.sum(-1, keepdim=True), h_i, B, T)
        print(f"  sequence-wise aux: hand recompute vs stored {maxdiff(h_aux, res['aux']):.2e}, "
              f"term-by-term loops vs stored {abs(loops - res['aux'].item()):.2e}")
        assert maxdiff(h_aux, res["aux"]) < 1e-15 and abs(loops - res["aux"].item()) < 1e-14
    h_obj = (h_out * r).sum() + AUX_COEF * h_aux + Z_COEF * z_loss_of(h_logits)
    h_grads = torch.autograd.grad(h_obj, leaves, allow_unused=True)  # unhit experts: None
    h_grads = torch.cat([(torch.zeros_like(lf) if g is None else g).reshape(-1)
                         for g, lf in zip(h_grads, leaves)])
    print(f"  gradients by autograd through the hand recompute (stored layout) vs stored: "
          f"{maxdiff(h_grads, grads_patched):.2e}")
    assert maxdiff(h_grads, grads_patched) < 1e-12

    # --- unpatched comparisons: same float64 params; and everything in float32
    res64u = run_block(block, x, r, case, patched=False)
    grads64u = flat_grads(block, name, res64u["x"].grad)
    w64u, i64u = sort_by_weight(res64u["weights"].detach().double(), res64u["idx"])
    block32 = case["make"]().float().eval()
    block32.load_state_dict({k: v.float() for k, v in block.state_dict().items()})
    res32 = run_block(block32, x.float(), r.float(), case, patched=False)
    grads32 = flat_grads(block32, name, res32["x"].grad)
    w32, i32 = sort_by_weight(res32["weights"].detach().double(), res32["idx"])
    assert torch.equal(i64u, idx) and torch.equal(i32, idx), "float32 run selects other experts"
    for label, o, w, gr in (("float64 params, transformers' float32 casts left in", res64u, w64u,
                             grads64u),
                            ("all float32 (module and inputs), unpatched", res32, w32, grads32)):
        print(f"  patched float64 vs {label}: out {maxdiff(o['out'], res['out']):.2e}, "
              f"topk_weights {maxdiff(w, weights):.2e}, aux {maxdiff(o['aux'], res['aux']):.2e}, "
              f"z {maxdiff(o['z'], res['z']):.2e}, objective {maxdiff(o['obj'], res['obj']):.2e}, "
              f"grads {maxdiff(gr, grads_patched):.2e} (max |grad| {grads_patched.abs().max():.2f})"
              f", same selection: True")

    # --- tensors
    t = {"x": x, "r": r, "router.weight": W}
    if bias is not None:
        t["router.bias"] = bias
    for e, (w1, w3, w2) in enumerate(experts):
        t[f"experts.{e}.w1"], t[f"experts.{e}.w3"], t[f"experts.{e}.w2"] = w1, w3, w2
    if shared is not None:
        t["shared.w1"], t["shared.w3"], t["shared.w2"] = shared
    t["out"] = res["out"]
    t["router_logits"] = res["logits"]
    t["topk_indices"] = idx.to(torch.int64)
    t["topk_weights"] = weights
    t["aux_loss"] = res["aux"].reshape(1)
    t["z_loss"] = res["z"].reshape(1)
    t["objective"] = res["obj"].reshape(1)
    t["grad.x"] = res["x"].grad
    t["grad.router.weight"] = gW
    for e, (w1, w3, w2) in enumerate(gexp):
        t[f"grad.experts.{e}.w1"], t[f"grad.experts.{e}.w3"], t[f"grad.experts.{e}.w2"] = w1, w3, w2
    if gshared is not None:
        t["grad.shared.w1"], t["grad.shared.w3"], t["grad.shared.w2"] = gshared

    if name == "olmoe":
        while True:
            la = torch.randn(B * T, E, generator=g, dtype=torch.float64) * 2.0
            lb = torch.randn(B * T, E, generator=g, dtype=torch.float64) * 2.0
            if min(softmax_gap(la), softmax_gap(lb)) > TIE_EPS:
                break
        with lbl_patch(m_olmoe):
            aux2 = m_olmoe.load_balancing_loss_func((la, lb), E, K)
        aux2_32 = m_olmoe.load_balancing_loss_func((la.float(), lb.float()), E, K)
        print(f"  aux2 (two layers) = {aux2.item():.12f}; unpatched float32 differs by "
              f"{maxdiff(aux2_32, aux2):.2e}")
        t["aux2.logits_a"], t["aux2.logits_b"], t["aux2.loss"] = la, lb, aux2.reshape(1)
        per_layer = megablocks_batched_lbl([la, lb], E, K)
        # check: at top-k, transformers' one-layer loss is k times megablocks' (1 vs k at an even
        # load), so per_layer is the mean over layers of that, divided by k
        with lbl_patch(m_olmoe):
            one = [m_olmoe.load_balancing_loss_func((l,), E, K) for l in (la, lb)]
        per_layer_check = (one[0] + one[1]) / 2 / K
        seq_terms = []
        for l in (la, lb):
            p = torch.softmax(l, dim=-1)
            seq_terms.append(sequence_aux_loss(p, p.topk(K, dim=-1).indices, B, T))
        sequence = (seq_terms[0] + seq_terms[1]) / 2
        seq_loops = sum(sequence_aux_loops(torch.softmax(l, dim=-1),
                                           torch.softmax(l, dim=-1).topk(K, dim=-1).indices, B, T)
                        for l in (la, lb)) / 2
        print(f"  aux2.per_layer (megablocks batched) = {per_layer.item():.12f}; vs mean of "
              f"transformers' one-layer losses / k: {maxdiff(per_layer, per_layer_check):.2e}")
        print(f"  aux2.sequence = {sequence.item():.12f} (layers {seq_terms[0].item():.12f}, "
              f"{seq_terms[1].item():.12f}); term-by-term loops differ by "
              f"{abs(seq_loops - sequence.item()):.2e}")
        assert maxdiff(per_layer, per_layer_check) < 1e-14
        assert abs(seq_loops - sequence.item()) < 1e-14
        t["aux2.per_layer"] = per_layer.reshape(1)
        t["aux2.sequence"] = sequence.reshape(1)

    for k_, v in t.items():
        assert v.dtype == (torch.int64 if k_ == "topk_indices" else torch.float64), k_
    print(f"  out[0,0,:3] {res['out'][0, 0, :3].tolist()}  aux {res['aux'].item():.10f}  "
          f"z {res['z'].item():.10f}  objective {res['obj'].item():.10f}")
    print(f"  topk_indices {idx.tolist()}")
    cfg = dict(router=case["config"]["router"], experts=E, top_k=K, d_model=D, d_expert=DE,
               **{k_: v for k_, v in case["config"].items() if k_ != "router"},
               batch=B, seq=T, aux_coef=AUX_COEF, aux_form=case["aux"], z_coef=Z_COEF,
               activation="silu", seed=seed,
               transformers=transformers.__version__, torch=torch.__version__.split("+")[0])
    if write:
        path = os.path.join(OUT_DIR, f"{name}.safetensors")
        save(path, keep_existing(path, t),
             {"config": json.dumps(cfg, sort_keys=True), "source": case["source"]})
    else:
        print(f"  (not written: {name} not among --cases)")
    return block, case


def make_bias_update(block, case):
    print("== bias-update")
    router = block.gate
    bias0 = router.e_score_correction_bias.detach().clone()
    bias = bias0.clone()
    t = {"gamma": torch.tensor([GAMMA], dtype=torch.float64), "bias0": bias0,
         "router.weight": router.weight.detach().T.contiguous()}
    seeds = []
    with torch.no_grad(), float64_source_patch(case["router_cls"], "forward", case["router_patch"]):
        for s in range(BIAS_STEPS):
            seed = 5000 + 100 * s
            router.e_score_correction_bias.copy_(bias)
            while True:
                xs = torch.randn(B * T, D, generator=torch.Generator().manual_seed(seed),
                                 dtype=torch.float64)
                logits, w, idx = router(xs)
                gap = deepseek_gaps(logits, bias)
                if gap > TIE_EPS:
                    break
                seed += 1
            seeds.append(seed)
            w, idx = sort_by_weight(w, idx)
            counts = torch.bincount(idx.reshape(-1), minlength=E).to(torch.float64)
            bias = bias + GAMMA * torch.sign(counts.mean() - counts)
            t[f"steps.{s}.x"] = xs
            t[f"steps.{s}.topk_indices"] = idx.to(torch.int64)
            t[f"steps.{s}.counts"] = counts
            t[f"steps.{s}.bias"] = bias.clone()
            print(f"  step {s} (seed {seed}, gap {gap:.2e}): counts {counts.long().tolist()} "
                  f"bias {[round(b, 6) for b in bias.tolist()]}")
    router.e_score_correction_bias.copy_(bias0)
    cfg = dict(router="sigmoid", experts=E, top_k=K, d_model=D, groups=4, top_groups=2,
               normalize_top_k=True, routed_scale=2.5, gamma=GAMMA, steps=BIAS_STEPS,
               tokens_per_step=B * T, step_seeds=seeds,
               rule="b_i += gamma * sign(mean_j c_j - c_i), c_i = (token, slot) assignments",
               weights_from="deepseek-v3.safetensors",
               transformers=transformers.__version__)
    path = os.path.join(OUT_DIR, "bias-update.safetensors")
    save(path, keep_existing(path, t),
         {"config": json.dumps(cfg, sort_keys=True),
          "source": "transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3TopkRouter "
                    "(selection); update rule from the DeepSeek-V3 report sec. 2.1.2"})


def main():
    names = list(CASES) + ["bias-update"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=names, default=names,
                    help="files to rewrite (default: all); bias-update runs the deepseek-v3 case "
                         "for its block without rewriting deepseek-v3 unless that is named too")
    ap.add_argument("--keep-existing", action="store_true",
                    help="keep each existing tensor that this run reproduces to within "
                         "1e-12 * (1 + |value|) (last-bit BLAS differences between machines)")
    args = ap.parse_args()
    global KEEP_EXISTING
    KEEP_EXISTING = args.keep_existing
    chosen = set(args.cases)
    os.makedirs(OUT_DIR, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    ds = None
    for name, case in CASES.items():
        if name in chosen or (name == "deepseek-v3" and "bias-update" in chosen):
            made = make_case(name, case, write=name in chosen)
            if name == "deepseek-v3":
                ds = made
    if "bias-update" in chosen:
        make_bias_update(*ds)


if __name__ == "__main__":
    main()
