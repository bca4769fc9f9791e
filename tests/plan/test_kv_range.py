"""The KV range: each estimated part's band, from the readings of the run no setting shows (planned both ways)
and each estimate's fitted share, summed into the KV cache's range and carried through vLLM's arithmetic; and
fits_margin, which says how far the deciding check is passed or failed and how much of the range agrees."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.plan.kv_range import FITTED, BandWidths, bytes_range, part_bands, readings
from kvtool.engine.sizing.units import GiB

runner = CliRunner()
RANGE_KEYS = ("kv_cache_bytes_range", "kv_cache_tokens_range", "max_concurrency_range", "safe_max_model_len_range")


def plan(*args: str) -> dict:
    result = runner.invoke(app, ["plan", "-m", "llama3.1-8b", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_every_figure_lies_inside_its_range_and_the_design_keys_stay():
    report = plan("--gpu", "H100-80GB", "--max-model-len", "32768", "--vllm-version", "0.19.0")
    for key, point in zip(RANGE_KEYS, ("kv_cache_bytes", "kv_cache_tokens", "max_concurrency", "safe_max_model_len")):
        low, high = report[key]
        value = report["memory"][point] if point == "kv_cache_bytes" else report[point]
        assert low <= value <= high, key
    assert {"kv_bytes_per_token", "num_blocks", "fits", "max_concurrency", "recommendations", "warnings"} <= set(report)
    low, high = report["kv_cache_bytes_range"]
    parts = report["memory"]["ranges"]
    assert high - low == sum(top - bottom for bottom, top in parts.values())  # the parts' bands add up


def test_a_kv_budget_given_outright_has_no_range():
    report = plan("--kv-cache-memory", "8GiB", "--max-model-len", "8192")
    assert report["kv_cache_bytes_range"] == [8 * GiB, 8 * GiB] and report["fits_margin"]["sure"]


def test_a_pip_install_of_0_10_is_the_activation_band_s_far_end():
    """0.8 - 0.11.0 warm the sampler up with FlashInfer in vLLM's image and with PyTorch's sort from a pip wheel:
    the band spans both, whichever the plan assumes."""
    docker = plan("--gpu", "H100-80GB", "--vllm-version", "0.10.1")
    pip = plan("--gpu", "H100-80GB", "--vllm-version", "0.10.1", "--vllm-install", "pip")
    assert docker["memory"]["activation_bytes"] < pip["memory"]["activation_bytes"]
    assert docker["memory"]["ranges"]["activation_bytes"] == pip["memory"]["ranges"]["activation_bytes"]
    assert docker["kv_cache_bytes_range"][0] <= pip["memory"]["kv_cache_bytes"]


def test_nvls_is_planned_on_an_hgx_board_and_the_band_holds_a_pcie_card():
    report = plan("--gpu", "H100-80GB", "--tp", "2", "--vllm-version", "0.19.0")
    low, high = report["memory"]["ranges"]["non_torch_bytes"]
    assert low < 0.5 * GiB < 1.8 * GiB < report["memory"]["non_torch_bytes"] <= high


def test_wider_shares_give_a_wider_range_and_no_shares_the_readings_alone(tmp_path):
    from real_log_cases import CASES, planned

    report = planned(next(case for case in CASES if case.log == "s-123"))[1]
    facts = readings(report)
    narrow = bytes_range(facts, part_bands(facts, BandWidths(0, 0, 0, 0, 0, (0, 0), 0, 0)))
    shipped = bytes_range(facts, part_bands(facts, FITTED))
    assert shipped[0] < narrow[0] <= report.budget.kv_cache_bytes <= narrow[1] < shipped[1]


def test_a_plan_that_straddles_vllm_s_line_stays_yes_or_no_and_says_how_sure():
    """Llama-3.1-8B on a 24 GB card at 40k tokens: the point fits, part of the range does not."""
    report = plan("--gpu-mem", "23.58GiB", "--max-model-len", "40000", "--vllm-version", "0.19.0")
    margin = report["fits_margin"]
    assert report["fits"] is True and margin["check"] == "one_request" and margin["bytes"] > 0
    assert margin["range_bytes"][0] < 0 < margin["range_bytes"][1] and not margin["sure"]
    assert 0.5 < margin["likelihood"] < 1
    assert margin["needed_bytes"] == pytest.approx(40000 * 131072, rel=0.001)


def test_a_start_far_from_the_line_is_sure():
    report = plan("--gpu", "H100-80GB", "--max-model-len", "8192")
    assert report["fits_margin"]["sure"] and report["fits_margin"]["likelihood"] == 1.0


def test_weights_that_do_not_fit_decide_the_margin():
    report = plan("-m", "llama3.1-70b", "--gpu", "L4")
    margin = report["fits_margin"]
    assert not report["fits"] and margin["check"] == "weights" and margin["bytes"] < 0 and margin["sure"]


def test_the_table_prints_the_range_and_the_margin():
    result = runner.invoke(app, ["plan", "-m", "llama3.1-8b", "--gpu", "H100-80GB", "--max-model-len", "8192"])
    assert "range, each estimate at its band's ends: KV cache" in result.stdout
    assert "to spare at its 'one request' check (sure)" in result.stdout
