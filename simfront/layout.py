"""Parallel layouts: TP x PP x attention-DP for attention, EP x MoE-TP for experts, and replicas.

Convention (TensorRT-LLM / SGLang / aiconfigurator): a worker has ``tp * dp * pp`` GPUs. Attention
runs tensor-parallel over ``tp`` GPUs inside each of ``dp`` data-parallel attention groups; the MoE
layers of the same ``tp * dp`` GPUs are split ``ep`` ways over experts and ``moe_tp = tp*dp/ep``
ways inside each expert. Dense FFN layers follow attention (TP over ``tp``). Pipeline parallelism
cuts the layers into ``pp`` stages. ``replicas`` independent workers share the GPU set.

Layout arrays are numpy int arrays so thousands of layouts are checked and costed at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .architecture import ModelArch
from .errors import SimfrontError

# Candidate split sizes. TP and EP: powers of two (and 3x powers of two for EP, e.g. 384 experts
# over 96 ranks). Attention-DP and PP also take the sizes that tile 72-GPU NVL72 racks.
TP_SIZES = (1, 2, 4, 8, 16, 32, 64)
EP_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
DP_SIZES = (1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 32, 36, 64, 72, 128, 144, 256)
PP_SIZES = (1, 2, 3, 4, 6, 8, 9)


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1  # attention data-parallel groups (attention-DP)
    ep: int = 1
    replicas: int = 1
    idle: int = 0  # GPUs of the set left unused

    @property
    def moe_tp(self) -> int:
        return self.tp * self.dp // self.ep

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def gpus(self) -> int:
        return self.gpus_per_worker * self.replicas

    def label(self) -> str:
        s = f"TP{self.tp}"
        if self.dp > 1:
            s += f" DPA{self.dp}"
        if self.ep > 1:
            s += f" EP{self.ep}"
        if self.pp > 1:
            s += f" PP{self.pp}"
        if self.replicas > 1:
            s += f" x{self.replicas}"
        return s


def layout_errors(arch: ModelArch, tp, pp, dp, ep) -> np.ndarray:
    """Boolean mask of layouts that are INVALID for ``arch`` (vectorised)."""
    tp, pp, dp, ep = (np.asarray(x, dtype=np.int64) for x in (tp, pp, dp, ep))
    a = arch.attention
    bad = (tp < 1) | (pp < 1) | (dp < 1) | (ep < 1)
    bad |= a.n_heads % np.maximum(tp, 1) != 0  # query heads split evenly over TP
    if arch.linear is not None:
        bad |= arch.linear.n_v_heads % np.maximum(tp, 1) != 0
        bad |= arch.linear.n_k_heads % np.maximum(tp, 1) != 0
    bad |= pp > arch.n_layers
    if arch.moe is None:
        bad |= (ep != 1) | (dp != 1)  # attention-DP and EP only make sense with MoE layers
    else:
        group = tp * dp
        bad |= group % np.maximum(ep, 1) != 0  # EP x MoE-TP tiles the attention GPUs
        bad |= arch.moe.n_experts % np.maximum(ep, 1) != 0
        moe_tp = np.maximum(group // np.maximum(ep, 1), 1)
        bad |= arch.moe.expert_inter % moe_tp != 0
    return bad


def explain_layout_error(arch: ModelArch, layout: Layout) -> str | None:
    """One-line reason a single layout is invalid, or None."""
    a = arch.attention
    if min(layout.tp, layout.pp, layout.dp, layout.ep, layout.replicas) < 1:
        return "parallel sizes must be at least 1"
    if a.n_heads % layout.tp:
        return f"--tp {layout.tp} does not divide the {a.n_heads} attention heads of {arch.name}"
    if arch.linear is not None and (arch.linear.n_v_heads % layout.tp or arch.linear.n_k_heads % layout.tp):
        return f"--tp {layout.tp} does not divide the {arch.linear.n_k_heads}/{arch.linear.n_v_heads} linear-attention heads"
    if layout.pp > arch.n_layers:
        return f"--pp {layout.pp} exceeds the {arch.n_layers} layers"
    if arch.moe is None:
        if layout.ep != 1 or layout.dp != 1:
            return f"{arch.name} is dense: expert parallelism and attention-DP need MoE layers (use replicas instead)"
        return None
    group = layout.tp * layout.dp
    if group % layout.ep:
        return f"--ep {layout.ep} must divide tp x attention-dp = {group}"
    if arch.moe.n_experts % layout.ep:
        return f"--ep {layout.ep} does not divide the {arch.moe.n_experts} experts"
    if arch.moe.expert_inter % (group // layout.ep):
        return f"MoE-TP {group // layout.ep} does not divide the expert width {arch.moe.expert_inter}"
    return None


def check_layout(arch: ModelArch, layout: Layout, n_gpus: int | None = None) -> None:
    err = explain_layout_error(arch, layout)
    if err is None and n_gpus is not None and layout.gpus != n_gpus:
        err = f"layout {layout.label()} uses {layout.gpus} GPUs but --gpus gives {n_gpus}"
    if err:
        raise SimfrontError(f"impossible parallelism: {err}")


def enumerate_layouts(arch: ModelArch, n_gpus: int, max_tp: int | None = None, exact: bool = False) -> dict[str, np.ndarray]:
    """All valid worker layouts that fit in ``n_gpus``, as int arrays (tp, pp, dp, ep, replicas, idle).

    ``replicas = n_gpus // (tp*dp*pp)`` workers run side by side; ``idle`` GPUs are left over (the
    rented set still pays for them). ``exact`` keeps only layouts that use every GPU. ``max_tp``
    caps tensor parallelism (usually the scale-up domain: TP across nodes is slow).
    """
    tp, dp, ep, pp = np.meshgrid(np.array(TP_SIZES), np.array(DP_SIZES), np.array(EP_SIZES), np.array(PP_SIZES), indexing="ij")
    tp, dp, ep, pp = (x.ravel() for x in (tp, dp, ep, pp))
    worker = tp * dp * pp
    ok = (worker <= n_gpus) & ~layout_errors(arch, tp, pp, dp, ep)
    if exact:
        ok &= n_gpus % worker == 0
    if max_tp is not None:
        ok &= tp <= max_tp
    if arch.moe is not None:
        # attention-DP only together with expert parallelism (DP-attention + EP-MoE, the layout
        # DeepSeek serves with); EP within the attention group as tp*dp allows.
        ok &= (dp == 1) | (ep > 1)
    tp, dp, ep, pp = tp[ok], dp[ok], ep[ok], pp[ok]
    replicas = n_gpus // (tp * dp * pp)
    return {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "replicas": replicas, "idle": n_gpus - replicas * tp * dp * pp}


# Layout classes, the choice between tensor, expert and attention-data parallelism that moves a configuration along
# the frontier (the classes `simfront validate`'s frontier checks compare, simfront.fidelity.layout_class):
# tp: attention and experts split by tensor parallelism (EP 1, attention-DP 1); tp+ep: experts spread over the GPUs by
# expert parallelism, attention tensor-parallel; dpa+ep: attention data-parallel (one batch per attention rank), with
# expert parallelism on a MoE model. Pipeline stages may be added to any class.
LAYOUT_CLASSES = ("tp", "tp+ep", "dpa+ep")
_CLASS_SPELLINGS = {"tp": "tp", "tp+ep": "tp+ep", "ep": "tp+ep", "dpa+ep": "dpa+ep", "dpa": "dpa+ep", "dp+ep": "dpa+ep"}


def parse_layout_classes(values, flag: str = "--layout") -> tuple[str, ...] | None:
    """The layout classes a comma list (or a list) names, canonical and in LAYOUT_CLASSES order (None: not given).
    Spellings: tp, tp+ep (or ep), dpa+ep (or dpa); an unknown one is an error naming the valid ones."""
    if values is None:
        return None
    items = values.split(",") if isinstance(values, str) else list(values)
    out = set()
    for v in items:
        key = str(v).strip().lower().replace(" ", "")
        if key not in _CLASS_SPELLINGS:
            raise SimfrontError(f"{flag} {v!r}: valid layout classes are {', '.join(LAYOUT_CLASSES)} "
                                "(tp: tensor parallel; tp+ep: experts over GPUs; dpa+ep: attention data-parallel with EP)")
        out.add(_CLASS_SPELLINGS[key])
    if not out:
        raise SimfrontError(f"{flag}: give at least one layout class ({', '.join(LAYOUT_CLASSES)})")
    return tuple(c for c in LAYOUT_CLASSES if c in out)


def check_classes_for(arch: ModelArch, model_id: str, classes: tuple[str, ...] | None, flag: str = "--layout") -> None:
    """Fail when none of ``classes`` exists for the architecture at any GPU count (a dense model has no experts, so
    no tp+ep layout)."""
    if classes is not None and arch.moe is None and set(classes) == {"tp+ep"}:
        raise SimfrontError(f"{flag} tp+ep: {model_id} is dense (no experts for expert parallelism); its layout classes "
                            "are tp and dpa+ep")


def layout_class_of(dp, ep) -> np.ndarray:
    """The LAYOUT_CLASSES name of each layout (attention-DP ``dp``, expert-parallel ``ep``; broadcasts)."""
    dp, ep = np.asarray(dp), np.asarray(ep)
    return np.where(dp > 1, "dpa+ep", np.where(ep > 1, "tp+ep", "tp"))


def layout_class_mask(classes, dp, ep) -> np.ndarray:
    """Whether each layout (attention-DP ``dp``, expert-parallel ``ep``; broadcasts) is of one of ``classes``
    (None: every layout)."""
    if classes is None:
        return np.ones(np.broadcast(np.asarray(dp), np.asarray(ep)).shape, dtype=bool)
    return np.isin(layout_class_of(dp, ep), list(classes))
