"""pytest plugin (`-p kvtool_shim`): vLLM's `RemoteOpenAIServer` starts `kvtool serve`.

Loaded before vLLM's conftests and test modules, it replaces the class in `tests.utils`, so every
`from tests.utils import RemoteOpenAIServer` gets `KvtoolServer`: vLLM's own class (health wait,
clients, process-group teardown) with the start-up swapped. It writes one JSON line per test:
outcome, message, and the servers the test talked to with the vLLM flags kvtool lacks.

Environment: KVTOOL_BIN (the `kvtool` executable), KVTOOL_MODEL (what it serves) and
KVTOOL_MODEL_CONTEXT (its context: a longer --max-model-len is capped there, and recorded),
CONFORMANCE_RESULTS (the JSON-lines file to append to; each server's pid goes to that name + .pids,
for run.py to stop any server a killed pytest left behind).
"""

import json
import os
import subprocess
import sys

import pytest
import tests.utils as vllm_test_utils
import torch
from serve_flags import to_kvtool


class KvtoolServer(vllm_test_utils.RemoteOpenAIServer):
    """`kvtool serve` on 127.0.0.1 with the test's flags, as far as kvtool has them."""

    started: list["KvtoolServer"] = []
    attempts = 0

    def __init__(self, *args, **kwargs) -> None:
        KvtoolServer.attempts += 1
        super().__init__(*args, **kwargs)

    def _pre_download_model(self, model, args) -> None:
        pass  # kvtool serves its own model whatever the test names

    def _get_process_termination_timeout(self) -> float:
        return 20.0

    def _wait_for_gpu_memory_release(self, *args, **kwargs) -> None:
        pass

    def _start_server(self, model, vllm_serve_args, env_dict) -> None:
        context = int(os.environ["KVTOOL_MODEL_CONTEXT"])
        self.translation = to_kvtool(model, vllm_serve_args, os.environ["KVTOOL_MODEL"], context)
        self.vllm_args = [model, *vllm_serve_args]
        # vLLM's own variables the test sets (some pass a whole copy of os.environ)
        self.env_keys = sorted(
            k for k, v in (env_dict or {}).items() if k.startswith("VLLM_") and os.environ.get(k) != v
        )
        command = [os.environ["KVTOOL_BIN"], "serve", *self.translation.args]
        print(f"Launching kvtool for vllm serve {' '.join(self.vllm_args)}: {' '.join(command)}")
        env = os.environ | (env_dict or {})
        self.proc = subprocess.Popen(command, env=env, stdout=sys.stdout, stderr=sys.stderr, start_new_session=True)
        KvtoolServer.started.append(self)
        with open(os.environ["CONFORMANCE_RESULTS"] + ".pids", "a") as pids:
            pids.write(f"{self.proc.pid}\n")

    def describe(self) -> dict:
        return {
            "vllm": self.vllm_args,
            "kvtool": self.translation.args,
            "missing": self.translation.missing + [f"env {key}" for key in self.env_keys],
            "no_effect": self.translation.no_effect,
        }


vllm_test_utils.RemoteOpenAIServer = KvtoolServer


def empty_cache_if_any(empty_cache=torch.accelerator.empty_cache) -> None:
    """vLLM's after-test cleanup empties the accelerator's cache; torch 2.13 raises without one."""
    if torch.accelerator.is_available():
        empty_cache()


torch.accelerator.empty_cache = empty_cache_if_any


def servers_of(item: pytest.Item) -> list[KvtoolServer]:
    """The servers among the test's fixtures (fixtures' fixtures too), and those it started itself."""
    fixtures = (getattr(item, "funcargs", None) or {}).values()
    servers = [v for v in fixtures if isinstance(v, KvtoolServer)]
    return servers + [s for s in KvtoolServer.started[item.started_before :] if s not in servers]


def short_message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash else str(report.longrepr)
    return " ".join(text.split())[:600]


def write_line(record: dict) -> None:
    with open(os.environ["CONFORMANCE_RESULTS"], "a") as results:
        results.write(json.dumps(record) + "\n")


def outcome_of(reports: list[pytest.TestReport]) -> tuple[str, pytest.TestReport]:
    failed = next((r for r in reports if r.failed), None)
    skipped = next((r for r in reports if r.skipped), None)
    decisive = failed or skipped or reports[-1]
    return ("passed" if decisive.passed else "skipped" if decisive.skipped else "failed"), decisive


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.started_before = len(KvtoolServer.started)
    attempts_before = KvtoolServer.attempts
    item.phase_reports, item.servers = [], []
    yield
    outcome, decisive = outcome_of(item.phase_reports)
    write_line(
        {
            "nodeid": item.nodeid,
            "outcome": outcome,
            "phase": decisive.when,
            "message": "" if outcome == "passed" else short_message(decisive),
            "seconds": round(sum(r.duration for r in item.phase_reports), 2),
            "servers": [s.describe() for s in item.servers],
            "wants_server": KvtoolServer.attempts > attempts_before
            or any("server" in name for name in item.fixturenames),
        }
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    item.phase_reports.append(outcome.get_result())
    item.servers += [s for s in servers_of(item) if s not in item.servers]


def pytest_collectreport(report):
    if report.failed:
        write_line(
            {
                "nodeid": report.nodeid,
                "outcome": "failed",
                "phase": "collect",
                "message": " ".join(str(report.longrepr).split()[-40:])[:600],
                "seconds": 0,
                "servers": [],
                "wants_server": False,
            }
        )
