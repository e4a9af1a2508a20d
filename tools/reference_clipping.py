#!/usr/bin/env python3
"""Independent numerical reference for two adaptive gradient-clipping rules (numpy + stdlib only).

Run from the repository root:

    python3 tools/reference_clipping.py

It writes (deterministically; seeded numpy RNG, floats as Python repr of float64):

    tests/fixtures/clipping/zclip.json   ZClip (Kumar et al. 2025, github.com/bluorion-com/ZClip)
    tests/fixtures/clipping/agc.json     AGC   (Brock et al. 2021, NFNets; DeepMind + timm code)

The algorithms, with citations of the authors' code for every step, are documented in
tests/fixtures/clipping/README.md. In short:

ZClip (zclip/zclip.py, class ZClip, at bluorion-com/ZClip commit 584ce4f):
  warm-up (first `warmup_steps` steps): the raw norm goes into a buffer; the gradient is clipped
  only by torch.nn.utils.clip_grad_norm_(max_grad_norm) if max_grad_norm is not None; on the step
  the buffer reaches warmup_steps, mean = buffer mean, var = POPULATION variance (divide by n).
  afterwards, per step with raw norm g (statistics from BEFORE this step):
    std = sqrt(var);  z = (g - mean) / (std + eps)
    if z > z_thresh: clip_val = (mean + z_thresh*std / (z/z_thresh)) * clip_factor  ("adaptive_scaling")
                     clip_val = mean                                                ("mean")
    else:            clip_val = None
    effective = min(clip_val if not None else g, max_grad_norm if not None else +inf)
    scale = effective / (g + 1e-6) if g > effective else 1.0
    unless (clip_val is not None and skip_update_on_spike):
      x = clip_val if clip_val is not None else g          # NOT min(., max_grad_norm)
      mean = alpha*mean + (1-alpha)*x
      var  = alpha*var  + (1-alpha)*(x - mean)**2          # uses the NEW mean

AGC (nfnets/optim.py SGD_AGC.update_param, nfnets/agc_optax.py; timm/utils/agc.py):
  per unit u:  p = max(||W_u||, eps);  m = clipping * p;  n = ||G_u||
               G_u <- G_u                      if n < m
               G_u <- G_u * (m / max(n, 1e-6)) otherwise
"""

import json
import math
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "clipping")

# ----------------------------------------------------------------------------------------------
# ZClip
# ----------------------------------------------------------------------------------------------

# Defaults of ZClip.__init__ (zclip/zclip.py). NOTE: the code's default max_grad_norm is 1.0
# (not None); the README's parameter table agrees ("Default 1.0").
ZCLIP_DEFAULTS = {
    "alpha": 0.97,
    "z_thresh": 2.5,
    "max_grad_norm": 1.0,
    "eps": 1e-6,
    "warmup_steps": 25,
    "mode": "zscore",
    "clip_option": "adaptive_scaling",
    "clip_factor": 1.0,
    "skip_update_on_spike": False,
}

# The constant hard-coded in ZClip.apply_in_place_clipping and in torch's _clip_grads_with_norm_
# (independent of the `eps` setting).
CLIP_COEF_EPS = 1e-6


def torch_clip_grad_norm_scale(total_norm, max_norm):
    """torch.nn.utils.clip_grad_norm_ (torch/nn/utils/clip_grad.py, _clip_grads_with_norm_):
    clip_coef = max_norm / (total_norm + 1e-6); grads *= clamp(clip_coef, max=1.0)
    (the multiplication happens unconditionally)."""
    clip_coef = max_norm / (total_norm + CLIP_COEF_EPS)
    return min(clip_coef, 1.0)


def zclip_in_place_scale(global_norm, max_global_norm):
    """ZClip.apply_in_place_clipping: coefficient applied to every gradient."""
    clip_coef = (max_global_norm / (global_norm + CLIP_COEF_EPS)) if global_norm > max_global_norm else 1.0
    return clip_coef if clip_coef < 1.0 else 1.0


class ZClipRef:
    """Scalar-state replica of zclip.ZClip (the gradient is represented only by its norm)."""

    def __init__(self, alpha, z_thresh, max_grad_norm, eps, warmup_steps, mode, clip_option,
                 clip_factor, skip_update_on_spike):
        self.alpha = alpha
        self.z_thresh = z_thresh
        self.max_grad_norm = max_grad_norm
        self.eps = eps
        self.warmup_steps = warmup_steps
        self.mode = mode.lower()
        self.clip_factor = clip_factor
        self.skip_update_on_spike = skip_update_on_spike
        if self.mode == "zscore":
            assert clip_option in ("mean", "adaptive_scaling")
            self.clip_option = clip_option.lower()
        elif self.mode == "percentile":
            raise NotImplementedError("percentile mode is not covered by this reference")
        else:
            raise ValueError("mode must be either 'zscore' or 'percentile'.")
        self.buffer = []
        self.initialized = False
        self.mean = None
        self.var = None

    # ZClip._initialize_ema: mean and POPULATION variance of the warm-up buffer.
    # Summation: plain left-to-right, as Python's built-in sum() did up to 3.11 (3.12+ uses
    # compensated summation; the difference is at the 1-ulp level).
    def _initialize_ema(self):
        n = len(self.buffer)
        s = 0
        for x in self.buffer:
            s = s + x
        self.mean = s / n
        s2 = 0
        for x in self.buffer:
            s2 = s2 + (x - self.mean) ** 2
        self.var = s2 / n
        self.initialized = True
        self.buffer = []

    # ZClip._update_ema: var uses the already-updated mean.
    def _update_ema(self, grad_norm):
        self.mean = self.alpha * self.mean + (1 - self.alpha) * grad_norm
        self.var = self.alpha * self.var + (1 - self.alpha) * (grad_norm - self.mean) ** 2

    # ZClip._compute_positive_zscore
    def _compute_positive_zscore(self, grad_norm):
        std = self.var ** 0.5
        z = (grad_norm - self.mean) / (std + self.eps)
        return z, std

    # ZClip._compute_clip_val (zscore mode)
    def _compute_clip_val(self, grad_norm):
        z, std = self._compute_positive_zscore(grad_norm)
        if z > self.z_thresh:
            if self.clip_option == "adaptive_scaling":
                eta = z / self.z_thresh
                threshold = self.mean + (self.z_thresh * std) / eta
                threshold = threshold * self.clip_factor
            else:  # "mean"
                threshold = self.mean
            return threshold, z
        return None, z

    def step(self, total_norm):
        """One ZClip.step(); returns the per-step record for the fixture."""
        rec = {"warmup": not self.initialized, "z": None, "spike": False,
               "adaptive_threshold": None, "threshold": None, "scale": 1.0,
               "clipped_norm": None, "ema_input": None, "mean": None, "var": None}
        if not self.initialized:
            # ZClip.step warm-up branch: buffer the RAW norm, maybe initialise, then (only if
            # max_grad_norm is not None) torch.nn.utils.clip_grad_norm_(params, max_grad_norm).
            self.buffer.append(total_norm)
            if len(self.buffer) >= self.warmup_steps:
                self._initialize_ema()
            if self.max_grad_norm is not None:
                rec["threshold"] = self.max_grad_norm
                rec["scale"] = torch_clip_grad_norm_scale(total_norm, self.max_grad_norm)
        else:
            clip_val, z = self._compute_clip_val(total_norm)
            rec["z"] = z
            rec["spike"] = clip_val is not None
            rec["adaptive_threshold"] = clip_val
            # ZClip._apply_clipping
            adaptive_clip = clip_val if clip_val is not None else total_norm
            if self.max_grad_norm is not None:
                effective_clip = min(adaptive_clip, self.max_grad_norm)
            else:
                effective_clip = adaptive_clip
            rec["scale"] = zclip_in_place_scale(total_norm, effective_clip)
            # Reported threshold: the cap(s) in force this step (null when none exists). When
            # clip_val is None, ZClip passes min(g, max_grad_norm), which clips iff g > max_grad_norm,
            # i.e. the cap in force is max_grad_norm.
            if clip_val is not None:
                rec["threshold"] = effective_clip
            elif self.max_grad_norm is not None:
                rec["threshold"] = self.max_grad_norm
            if not (clip_val is not None and self.skip_update_on_spike):
                x = clip_val if clip_val is not None else total_norm
                rec["ema_input"] = x
                self._update_ema(x)
        rec["clipped_norm"] = total_norm * rec["scale"]
        if self.initialized:
            rec["mean"] = self.mean
            rec["var"] = self.var
        return rec


def f32_exact(x):
    """Round to the nearest float32 and return as float64 (exactly representable in both)."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def make_norm_sequence(rng, n=80):
    """A decaying 'training' gradient-norm curve around 1-3 with noise and spikes."""
    t = np.arange(n, dtype=np.float64)
    trend = 1.0 + 2.0 * np.exp(-t / 40.0)            # 3.0 -> ~1.27
    noise = np.exp(rng.normal(0.0, 0.06, size=n))    # multiplicative noise, ~6 %
    g = trend * noise
    # Spikes (0-based step index -> multiplier). With warmup_steps = 25 the first three are
    # inside warm-up; with warmup_steps = 10 the ones at 14 and 20 are after it.
    spikes = {5: 3.0, 14: 2.0, 20: 2.0, 31: 3.0, 44: 12.0, 45: 6.0, 58: 20.0, 66: 1.8, 70: 5.0}
    for i, m in spikes.items():
        g[i] *= m
    return [float(v) for v in f32_exact(g)], sorted(spikes)


def zclip_cases():
    rng = np.random.default_rng(20250402)
    norms, spike_steps = make_norm_sequence(rng)
    no_cap = dict(ZCLIP_DEFAULTS, max_grad_norm=None)
    specs = [
        ("adaptive_scaling_defaults_no_cap",
         "Code defaults except max_grad_norm=None (pure adaptive rule).", dict(no_cap)),
        ("mean_defaults_no_cap",
         "Code defaults, clip_option='mean', max_grad_norm=None.",
         dict(no_cap, clip_option="mean")),
        ("alpha0.9_z2.0_warmup10_no_cap",
         "alpha=0.9, z_thresh=2.0, warmup_steps=10, max_grad_norm=None.",
         dict(no_cap, alpha=0.9, z_thresh=2.0, warmup_steps=10)),
        ("adaptive_scaling_max_grad_norm_2.0",
         "Defaults with a fixed cap max_grad_norm=2.0 (binds during warm-up and on non-spike steps).",
         dict(ZCLIP_DEFAULTS, max_grad_norm=2.0)),
        ("code_defaults_max_grad_norm_1.0",
         "Exact ZClip() constructor defaults, including max_grad_norm=1.0 (the cap clips almost every step).",
         dict(ZCLIP_DEFAULTS)),
        ("adaptive_scaling_clip_factor0.7_no_cap",
         "clip_factor=0.7 (multiplies the whole adaptive threshold), max_grad_norm=None.",
         dict(no_cap, clip_factor=0.7)),
        ("adaptive_scaling_skip_update_on_spike_no_cap",
         "skip_update_on_spike=True: EMA not updated on steps with z > z_thresh, max_grad_norm=None.",
         dict(no_cap, skip_update_on_spike=True)),
    ]
    cases = []
    for name, desc, settings in specs:
        z = ZClipRef(**settings)
        expected = []
        for i, g in enumerate(norms):
            rec = z.step(g)
            rec = dict({"step": i + 1}, **rec)
            # Keep every decision far from its boundary so that an f32 implementation (or a
            # different summation order) cannot flip it.
            if rec["z"] is not None:
                assert abs(rec["z"] / settings["z_thresh"] - 1.0) > 0.02, (name, rec)
            if rec["threshold"] is not None:
                assert abs(g / rec["threshold"] - 1.0) > 1e-4, (name, rec)
            expected.append(rec)
        cases.append({"name": name, "description": desc, "settings": settings,
                      "injected_spike_steps": [s + 1 for s in spike_steps],
                      "norms": norms, "expected": expected})
    return cases


# ----------------------------------------------------------------------------------------------
# AGC
# ----------------------------------------------------------------------------------------------

AGC_DEFAULT_CLIPPING = 0.01   # nfnets/optim.py SGD_AGC defaults; timm adaptive_clip_grad clip_factor
AGC_DEFAULT_EPS = 1e-3        # same sources; agc_optax.adaptive_grad_clip(clip, eps=1e-3)
AGC_GRAD_NORM_FLOOR = 1e-6    # max(||G||, 1e-6) in the clipped branch (all three sources)


def l2(values):
    """sqrt(sum(x**2)) with a plain left-to-right sum (as compute_norm in the DeepMind code)."""
    s = 0.0
    for v in values:
        s += float(v) * float(v)
    return math.sqrt(s)


def units_of(arr, kind):
    """Index lists (into the flat row-major array) of each unit."""
    arr = np.asarray(arr)
    if kind == "whole":
        return [list(range(arr.size))]
    assert arr.ndim == 2
    r, c = arr.shape
    if kind == "columns":   # linear weight [d_in, d_out]: unit = column (DeepMind axis=0)
        return [[i * c + j for i in range(r)] for j in range(c)]
    if kind == "rows":      # embedding [vocab, d]: unit = row (timm dims 1..ndim on [num, dim])
        return [[i * c + j for j in range(c)] for i in range(r)]
    raise ValueError(kind)


def agc_reference(param, grad, kind, clipping, eps):
    p = np.asarray(param, dtype=np.float64).ravel()
    g = np.asarray(grad, dtype=np.float64).ravel()
    out = g.copy()
    info = {"unit_param_norm": [], "unit_grad_norm": [], "unit_max_norm": [], "unit_clipped": [],
            "unit_scale": []}
    for idx in units_of(np.asarray(param), kind):
        p_norm = max(l2(p[idx]), eps)                 # max(unitwise_norm(param), eps)
        max_norm = p_norm * clipping                  # param_norm * clipping
        g_norm = l2(g[idx])                           # unitwise_norm(grad)
        clipped = not (g_norm < max_norm)             # timm / agc_optax: keep iff g_norm < max_norm
        scale = max_norm / max(g_norm, AGC_GRAD_NORM_FLOOR) if clipped else 1.0
        if clipped:
            for k in idx:
                out[k] = g[k] * scale
        info["unit_param_norm"].append(l2(p[idx]))
        info["unit_grad_norm"].append(g_norm)
        info["unit_max_norm"].append(max_norm)
        info["unit_clipped"].append(clipped)
        info["unit_scale"].append(scale)
    return out, info


def agc_case(name, desc, kind, shape, clipping, eps, param, grad):
    param = f32_exact(np.asarray(param, dtype=np.float64).reshape(shape))
    grad = f32_exact(np.asarray(grad, dtype=np.float64).reshape(shape))
    expected, info = agc_reference(param, grad, kind, clipping, eps)
    # Keep every unit far from the clip boundary so f32 round-off cannot flip a decision.
    for gn, mn in zip(info["unit_grad_norm"], info["unit_max_norm"]):
        assert gn == 0.0 or abs(gn / mn - 1.0) > 0.05, (name, gn, mn)
    case = {"name": name, "description": desc, "kind": kind, "shape": list(shape),
            "clipping": clipping, "eps": eps,
            "param": [float(v) for v in param.ravel()],
            "grad": [float(v) for v in grad.ravel()],
            "expected": [float(v) for v in expected]}
    case.update(info)
    return case


def scaled_units(rng, units_param_norms, shape, kind):
    """Random array whose units have the given L2 norms (0 -> all-zero unit)."""
    a = rng.normal(size=shape)
    out = np.zeros(shape)
    flat = out.ravel()
    af = a.ravel()
    for u, idx in enumerate(units_of(a, kind)):
        v = af[idx]
        target = units_param_norms[u]
        flat[idx] = 0.0 if target == 0.0 else v / np.sqrt(np.sum(v * v)) * target
    return flat.reshape(shape)


def agc_cases():
    rng = np.random.default_rng(20210211)
    cases = []
    lam, eps = AGC_DEFAULT_CLIPPING, AGC_DEFAULT_EPS

    # 1. Linear weight [d_in=6, d_out=5], defaults. Columns: clipped, not, clipped hard,
    #    param-norm below eps (eps takes over, clipped), zero gradient.
    shape = (6, 5)
    pn = [0.8, 1.3, 0.5, 3.0e-4, 1.1]
    p = scaled_units(rng, pn, shape, "columns")
    # max_norms: .008 .013 .005 1e-5 .011 -> clipped: 0 (x6), 2 (x180), 3 (x20); not: 1; 4 zero.
    gn = [0.05, 0.004, 0.9, 2.0e-4, 0.0]
    g = scaled_units(rng, gn, shape, "columns")
    cases.append(agc_case(
        "columns_defaults", "Linear weight [d_in, d_out]=[6, 5], unit = column. Columns 0 and 2 "
        "clipped, 1 not, 3 has ||W||=3e-4 < eps (max_norm = clipping*eps = 1e-5, clipped), 4 has a "
        "zero gradient.", "columns", shape, lam, eps, p, g))

    # 2. Linear weight [4, 7], clipping 0.1: mix of clipped/unclipped, one zero-param column.
    shape = (4, 7)
    pn = [1.0, 0.6, 2.0, 0.0, 0.9, 1.5, 0.3]
    gn = [0.05, 0.2, 0.15, 5.0e-5, 0.5, 0.12, 0.01]
    # max_norms: .1 .06 .2 1e-4 .09 .15 .03 -> clipped: 1, 4 ; not: 0, 2, 3, 5, 6
    cases.append(agc_case(
        "columns_clipping0.1", "Linear weight [4, 7], clipping=0.1. Columns 1 and 4 clipped, the "
        "rest not; column 3 has an all-zero parameter (eps takes over, max_norm=1e-4) and a gradient "
        "below it.", "columns", shape, 0.1, eps,
        scaled_units(rng, pn, shape, "columns"), scaled_units(rng, gn, shape, "columns")))

    # 3. Embedding table [vocab=8, d=4], unit = row, defaults.
    shape = (8, 4)
    pn = [1.0, 0.7, 1.2, 5.0e-4, 0.9, 1.1, 0.8, 1.0]
    gn = [0.03, 0.001, 0.0, 1.0e-3, 0.5, 0.0105 * 0.5, 0.002, 0.0]
    # max_norms: .01 .007 .012 1e-5 .009 .011 .008 .01 -> clipped: 0, 3, 4; row 5 at ~0.48 of max.
    cases.append(agc_case(
        "rows_embedding_defaults", "Embedding [vocab, d]=[8, 4], unit = row. Rows 0, 3 (||W|| < eps) "
        "and 4 clipped; rows 2 and 7 (tokens absent from the batch) have zero gradients; 1, 5, 6 not "
        "clipped.", "rows", shape, lam, eps,
        scaled_units(rng, pn, shape, "rows"), scaled_units(rng, gn, shape, "rows")))

    # 4. Embedding [5, 3], clipping 0.1.
    shape = (5, 3)
    pn = [0.5, 1.0, 0.2, 2.0, 1.0e-4]
    gn = [0.2, 0.05, 0.1, 0.1, 3.0e-5]
    # max_norms: .05 .1 .02 .2 1e-4 -> clipped: 0, 2 ; not: 1, 3, 4
    cases.append(agc_case(
        "rows_clipping0.1", "Embedding [5, 3], clipping=0.1. Rows 0 and 2 clipped; row 4 has "
        "||W||=1e-4 < eps and a gradient below clipping*eps.", "rows", shape, 0.1, eps,
        scaled_units(rng, pn, shape, "rows"), scaled_units(rng, gn, shape, "rows")))

    # 5-9. Vectors (norm gains, biases, scalars): one unit each.
    gain = 1.0 + 0.05 * rng.normal(size=6)
    cases.append(agc_case(
        "whole_gain_clipped", "Norm gain [6] near 1, large gradient: clipped to clipping*||W||.",
        "whole", (6,), lam, eps, gain, 0.2 * rng.normal(size=6)))
    gain = 1.0 + 0.05 * rng.normal(size=6)
    cases.append(agc_case(
        "whole_gain_unclipped", "Norm gain [6] near 1, small gradient: unchanged.",
        "whole", (6,), lam, eps, gain, 0.001 * rng.normal(size=6)))
    cases.append(agc_case(
        "whole_zero_bias_eps", "Zero-initialised bias [5]: ||W||=0 < eps, max_norm = clipping*eps = "
        "1e-5; gradient of norm ~0.1 is clipped to norm 1e-5.", "whole", (5,), lam, eps,
        np.zeros(5), 0.05 * rng.normal(size=5)))
    cases.append(agc_case(
        "whole_zero_grad", "Bias [4] with an all-zero gradient: unchanged (zeros).", "whole", (4,),
        lam, eps, 0.3 * rng.normal(size=4), np.zeros(4)))
    cases.append(agc_case(
        "whole_scalar_clipping0.1", "Scalar stored as [1], clipping=0.1: |g|=0.3 > 0.1*|w|=0.05, "
        "clipped to 0.05 with the sign kept.", "whole", (1,), 0.1, eps, [-0.5], [-0.3]))
    cases.append(agc_case(
        "whole_vector_clipping0.1", "Bias [7], clipping=0.1, gradient ~3x the limit: clipped.",
        "whole", (7,), 0.1, eps, 0.2 * rng.normal(size=7),
        scaled_units(rng, [3.0 * 0.1 * 0.2 * math.sqrt(7)], (7,), "whole")))
    return cases


# ----------------------------------------------------------------------------------------------

def dump(path, obj):
    text = json.dumps(obj, indent=1, allow_nan=False)
    with open(path, "w") as f:
        f.write(text + "\n")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    z = zclip_cases()
    a = agc_cases()
    dump(os.path.join(OUT_DIR, "zclip.json"), z)
    dump(os.path.join(OUT_DIR, "agc.json"), a)
    # Self-checks: files load back identically.
    for fn, obj in (("zclip.json", z), ("agc.json", a)):
        with open(os.path.join(OUT_DIR, fn)) as f:
            assert json.load(f) == json.loads(json.dumps(obj)), fn
    for c in z:
        n_clip = sum(1 for r in c["expected"] if r["scale"] < 1.0)
        n_spike = sum(1 for r in c["expected"] if r["spike"])
        print(f"zclip {c['name']:48s} steps={len(c['norms'])} clipped={n_clip} spikes={n_spike}")
    for c in a:
        print(f"agc   {c['name']:28s} kind={c['kind']:7s} shape={c['shape']} clipped={c['unit_clipped']}")


if __name__ == "__main__":
    main()
