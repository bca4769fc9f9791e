"""How far to trust a forecast: the band the model's measured error puts around each figure, and the one line
that says where a case is outside what real measurements have checked."""

from kvtool.engine.plan.performance.predict import ServingSetup
from kvtool.engine.sizing.quantization_methods import MXFP4

# |kvtool / measured - 1| that 80 % of the measurements in tests/plan/performance/ stay within, by figure
# (docs/plan.md "Served performance", the error table); the itl and e2el bands are tpot's and ttft's kin.
BANDS = {"ttft": 0.35, "tpot": 0.09, "itl": 0.09, "e2el": 0.10, "throughput": 0.35}
CHECKED_GPUS = ("H100-80GB", "H200")
CHECKED_RELEASES = ((0, 11), (0, 12))  # the releases the measurements ran
CONSUMER = ("RTX-", "GB10")


def unchecked(setup: ServingSetup, release: tuple[int, ...] | None = None) -> list[str]:
    """What about this configuration no real measurement has checked."""
    spec, gpu, facts = setup.spec, setup.gpu, setup.quantization
    reasons = []
    if gpu.link == "xgmi":
        reasons.append("an AMD GPU")
    elif gpu.name.startswith(CONSUMER):
        reasons.append("a workstation or consumer card")
    elif gpu.name not in CHECKED_GPUS:
        reasons.append(f"the {gpu.name} (datasheet figures, no measurement)")
    if setup.tp > 1 and gpu.link == "pcie":
        reasons.append("tensor parallelism over PCIe")
    if spec.is_moe:
        reasons.append("a mixture-of-experts model (a development set only)")
    if spec.is_mla or spec.num_state_layers:
        reasons.append("MLA or linear-attention layers")
    if facts is not None and any(scheme.bits <= 4 for _, scheme in facts.parts):
        scheme = "MXFP4 / NVFP4" if any(s == MXFP4 or s.scale_bytes == 1 for _, s in facts.parts) else "4-bit"
        reasons.append(f"{scheme} weights")
    if release is not None and tuple(release[:2]) not in CHECKED_RELEASES:
        reasons.append(f"vLLM {'.'.join(map(str, release[:3]))} (measured: 0.11 and 0.12)")
    return reasons


def unchecked_line(reasons: list[str]) -> str | None:
    if not reasons:
        return None
    listed = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]
    return f"performance: outside what real measurements have checked: {listed}; the band may not hold."
