"""The mHC of the reference fixtures (tools/make_reference_fixtures.py: `mhc_width`,
`mhc_coeffs`, `mhc_head`, which tests/reference.rs holds normlab's `mhc` preset to) against
transformers' own DeepSeek V4 modules, run here:

1. `DeepseekV4HyperConnection.forward` and the stream update of
   `DeepseekV4DecoderLayer.forward` (`post ⊗ y + combᵀ @ H`) against `mhc_width` and
   `mhc_coeffs`: the read weights, the write weights, the residual mixing, the branch input and
   the new streams;
2. `DeepseekV4HyperHead.forward` against `mhc_head`.

Both sides in float64 (the modules' `.float()` casts, which make DeepSeek V4 compute its mixing
in float32 whatever the streams' type, are kept at float64 here: with them the differences are
float32's rounding, about 3e-7), on the parameters of tests/fixtures/reference/mhc.safetensors (every
sublayer's `proj`, `base`, `scale` and the head's) and on streams drawn at random at three
scales. Prints one JSON summary (the largest relative difference of each quantity); exit
status 1 when any exceeds 1e-12.

    python tools/check_mhc_transformers.py [--float32-casts]
"""

import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as ds
from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_reference_fixtures as ref  # noqa: E402


def config():
    """A DeepSeek V4 config at the fixture's width, streams, Sinkhorn iterations and epsilons."""
    return DeepseekV4Config(hidden_size=ref.D, hc_mult=ref.HC_STREAMS, hc_sinkhorn_iters=ref.HC_SINKHORN_ITERS,
                            hc_eps=ref.HC_EPS, rms_norm_eps=ref.HC_NORM_EPS)


def relative(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def hyper_connection(cfg, P, pre):
    """transformers' module holding sublayer `pre`'s parameters (its `fn` is the fixture's `proj`ᵀ)."""
    m = ds.DeepseekV4HyperConnection(cfg).double()
    with torch.no_grad():
        m.fn.copy_(P[f"{pre}.hc.proj"].T)
        m.base.copy_(P[f"{pre}.hc.base"])
        m.scale.copy_(P[f"{pre}.hc.scale"])
    return m


def head(cfg, P):
    m = ds.DeepseekV4HyperHead(cfg).double()
    with torch.no_grad():
        m.hc_fn.copy_(P["hc_head.proj"].T)
        m.hc_base.copy_(P["hc_head.base"])
        m.hc_scale.copy_(P["hc_head.scale"].reshape(1))
    return m


def sublayer_gaps(cfg, P, pre, hs, y):
    """The largest relative differences of one sublayer's read, write and mixing."""
    post, comb, collapsed = hyper_connection(cfg, P, pre)(hs)
    # DeepseekV4DecoderLayer.forward's update of the streams.
    theirs = post.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), hs)
    h_pre, our_post, our_comb = ref.mhc_coeffs(P, pre, hs, lite=False)
    x_in, write = ref.mhc_width(P, pre, hs, lite=False)
    return {"post": relative(our_post, post), "comb": relative(our_comb, comb),
            "branch_input": relative(x_in, collapsed), "streams": relative(write(y), theirs)}


def main():
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    if "--float32-casts" not in sys.argv:
        torch.Tensor.float = lambda self, *a, **k: self
    path = os.path.join(HERE, "..", "tests", "fixtures", "reference", "mhc.safetensors")
    P = {k.removeprefix("param/"): v.double() for k, v in load_file(path).items() if k.startswith("param/")}
    cfg = config()
    gen = torch.Generator().manual_seed(0)
    pres = sorted({k.removesuffix(".hc.proj") for k in P if k.endswith(".hc.proj")})
    worst, cases = {}, 0
    for scale in (0.1, 1.0, 30.0):
        hs = scale * torch.randn(2, 5, ref.HC_STREAMS, ref.D, generator=gen)
        y = torch.randn(2, 5, ref.D, generator=gen)
        for pre in pres:
            for k, v in sublayer_gaps(cfg, P, pre, hs, y).items():
                worst[k] = max(worst.get(k, 0.0), v)
            cases += 1
        worst["head"] = max(worst.get("head", 0.0), relative(ref.mhc_head(P, hs), head(cfg, P)(hs)))
    summary = {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
               "float32_casts": "--float32-casts" in sys.argv, "sublayers": len(pres),
               "cases": cases, "max_relative": worst}
    print(json.dumps(summary, indent=1))
    bound = 1e-6 if "--float32-casts" in sys.argv else 1e-12
    sys.exit(1 if max(worst.values()) > bound else 0)


if __name__ == "__main__":
    main()
