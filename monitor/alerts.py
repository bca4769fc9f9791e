"""The checklist evaluated on a watch window, each alert with its fix computed from the server's numbers."""

from dataclasses import asdict, dataclass

from kvtool.engine.diagnosis.live import ServerNumbers, diagnose_server
from kvtool.monitor.checklist import TTFT_P99_SECONDS, checks_for
from kvtool.monitor.window import Snapshot

FIXES_SHOWN = 3


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str  # "warning" | "critical"
    summary: str
    value: float
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate(
    snapshot: Snapshot, max_model_len: int | None = None, ttft_objective: float = TTFT_P99_SECONDS
) -> list[Alert]:
    """Alerts that fire on this window, critical first; a critical KV alert hides the warning on the same gauge."""
    fired = [
        (check, value)
        for check in checks_for(snapshot.vllm_version)
        if (value := check.fires(snapshot, ttft_objective)) is not None
    ]
    if any(check.alert == "VllmKvCacheFull" for check, _ in fired):
        fired = [(check, value) for check, value in fired if check.alert != "VllmKvCacheNearFull"]
    fix = computed_fix(snapshot, max_model_len) if fired else ""
    alerts = [
        Alert(
            check.alert,
            check.severity,
            check.summary,
            round(value, 4),
            fix if fix and check.kv_pressure else check.remedy,
        )
        for check, value in fired
    ]
    return sorted(alerts, key=lambda alert: alert.severity != "critical")


def server_numbers(snapshot: Snapshot, max_model_len: int | None) -> ServerNumbers:
    """The snapshot as the plain numbers diagnosis takes, per engine (cache_config_info describes one engine)."""
    config, engines = snapshot.cache_config, snapshot.num_engines
    return ServerNumbers(
        source=snapshot.url,
        model=snapshot.model_names[0] if snapshot.model_names else None,
        num_preemptions=snapshot.num_preemptions_total or 0.0,
        kv_cache_usage=snapshot.kv_cache_usage_peak,
        num_running=_per(snapshot.num_requests_running, engines),
        num_waiting=_per(snapshot.num_requests_waiting, engines),
        num_gpu_blocks=_int(config.get("num_gpu_blocks")),
        block_size=_int(config.get("block_size")),
        kv_cache_dtype=config.get("cache_dtype"),
        gpu_memory_utilization=_float(config.get("gpu_memory_utilization")),
        max_model_len=max_model_len,
        mean_prompt_tokens=snapshot.mean_prompt_tokens,
    )


def computed_fix(snapshot: Snapshot, max_model_len: int | None) -> str:
    """diagnose's fixes for KV pressure, computed from this server's cache size and load, as one line."""
    numbers = server_numbers(snapshot, max_model_len)
    findings = diagnose_server(numbers).findings
    if not findings:  # no preemption and no near-full reading: the pressure fixes still apply to the load seen
        findings = diagnose_server(ServerNumbers(**{**numbers.__dict__, "num_preemptions": 1.0})).findings
    return "; ".join(_fix_text(fix) for fix in findings[0].fixes[:FIXES_SHOWN])


def _fix_text(fix) -> str:
    knob = fix.flag or fix.param
    value = "" if fix.value is None or fix.value is True else (f" {fix.value}" if fix.flag else f" = {fix.value}")
    return f"{knob}{value} ({fix.action})"


def _per(value: float | None, engines: int) -> float | None:
    return None if value is None else value / engines


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "None") else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "None") else None
    except ValueError:
        return None
