"""An unexpected exception in any command: one line and status 70, or its frames with `kvtool --traceback`."""

import importlib
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.sizing.defaults import CPU_OMP_ENVIRONMENT
from kvtool.errors import ExitCode

LINE = "kvtool: error: internal error: RuntimeError: injected fault (run with --traceback to see where)"
# command -> (module, attribute it calls on the way, arguments that reach the call)
INJECTION_POINTS = {
    "plan": ("kvtool.cli.plan", "resolve_model_spec", ["--gpu-mem", "24GiB"]),
    "serve": ("kvtool.cli.serve_startup", "plan_startup", []),
    "bench": ("kvtool.bench.datasets", "load_dataset", []),
    "diagnose": ("kvtool.engine.diagnosis", "diagnose", ["-"]),
    "watch": ("kvtool.monitor.scrape", "Scraper", ["http://127.0.0.1:1", "--once"]),
    "alerts": ("kvtool.monitor.rules", "rules_document", []),
    "profiles": ("kvtool.cli.profiles", "list_profiles", ["list"]),
}
INJECT = """
import importlib, sys

def fault(*args, **kwargs):
    raise RuntimeError("injected\\n  fault")

setattr(importlib.import_module({module!r}), {attribute!r}, fault)
from kvtool.cli.app import main

sys.argv = ["kvtool", *{argv!r}]
main()
"""


def test_every_command_has_an_injection_point():
    from kvtool.cli.app import COMMANDS

    assert set(INJECTION_POINTS) == set(COMMANDS)


def _fault(*args, **kwargs):
    raise RuntimeError("injected\n  fault")


@pytest.fixture
def injected(monkeypatch):
    """Patch each command's call to raise; keep `serve`'s OpenMP settings out of this process's environment."""
    for name, value in CPU_OMP_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)

    def inject(command: str) -> list[str]:
        module, attribute, args = INJECTION_POINTS[command]
        monkeypatch.setattr(importlib.import_module(module), attribute, _fault)
        return [command, *args]

    return inject


@pytest.mark.parametrize("command", sorted(INJECTION_POINTS))
def test_an_unexpected_exception_is_one_line_and_status_70(injected, command):
    result = CliRunner().invoke(app, injected(command), input="")
    assert result.exit_code == ExitCode.INTERNAL_ERROR == 70, result.output
    assert result.stderr.splitlines() == [LINE]


@pytest.mark.parametrize("command", sorted(INJECTION_POINTS))
def test_traceback_shows_the_frames_instead(injected, command):
    result = CliRunner().invoke(app, ["--traceback", *injected(command)], input="")
    assert result.exit_code == ExitCode.INTERNAL_ERROR, result.output
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "in _fault" in result.stderr and result.stderr.rstrip().endswith("RuntimeError: injected\n  fault")
    assert "internal error" not in result.stderr


def run_injected(command: str, *root_options: str) -> subprocess.CompletedProcess:
    module, attribute, args = INJECTION_POINTS[command]
    code = INJECT.format(module=module, attribute=attribute, argv=[*root_options, command, *args])
    return subprocess.run([sys.executable, "-c", code], input="", capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", sorted(INJECTION_POINTS))
def test_the_installed_entry_point_exits_70_with_one_line(command):
    result = run_injected(command)
    assert result.returncode == 70, result.stderr
    assert result.stderr.splitlines() == [LINE] and result.stdout == ""


def test_the_installed_entry_point_prints_the_frames_with_traceback():
    result = run_injected("plan", "--traceback")
    assert result.returncode == 70
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert 'cli/plan.py", line' in result.stderr and "in fault" in result.stderr


def test_a_kvtool_error_keeps_its_own_status():
    result = CliRunner().invoke(app, ["--traceback", "plan", "--model", "no-such-model", "--gpu-mem", "24GiB"])
    assert result.exit_code == ExitCode.USAGE and "Traceback" not in result.output
    assert result.stderr.startswith("kvtool: error: unknown model 'no-such-model'")


def test_ctrl_c_stays_130(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module("kvtool.cli.plan"), "resolve_model_spec", interrupted)
    result = CliRunner().invoke(app, ["plan", "--gpu-mem", "24GiB"])
    assert result.exit_code == ExitCode.INTERRUPTED == 130 and "internal error" not in result.output
