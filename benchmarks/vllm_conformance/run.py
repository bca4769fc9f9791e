"""Run vLLM's own OpenAI-server, serving and tool-use tests, unchanged, against `kvtool serve`.

    python benchmarks/vllm_conformance/run.py                      # everything (hours on 2 cores)
    python benchmarks/vllm_conformance/run.py tests/tool_use/test_tool_calls.py   # one file again
    python benchmarks/vllm_conformance/run.py --report-only        # rebuild the table

Each test folder (or each path given) runs in its own pytest process, one server at a time, and its
results replace that piece's earlier ones under CACHE/results/ (a later piece's result for a test
wins over an earlier one's). The table goes to CACHE/conformance.md.
Not part of CI: a full run takes long, and it downloads vLLM's source and the tests' packages.
"""

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import report
import setup_env
import verdicts

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SUITES = ("tests/entrypoints/openai", "tests/entrypoints/serve", "tests/tool_use")
KVTOOL_MODEL = "smollm2"
KVTOOL_MODEL_FOLDER = "SmolLM2-135M-Instruct"
# tests/tool_use runs each test once per model configuration; kvtool's model writes hermes calls.
TOOL_USE_CONFIGS = ("hermes",)
PYTEST_ARGS = (
    "-p",
    "kvtool_shim",
    "-p",
    "no:cacheprovider",
    "-q",
    "-rN",
    "--timeout",
    "300",
    "--continue-on-collection-errors",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="test files or folders (default: every suite)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kvtool-conformance")
    parser.add_argument("--kvtool", type=Path, default=REPO / ".venv" / "bin" / "kvtool")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds for one pytest process")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, for every piece")
    parser.add_argument("--report-only", action="store_true")
    return parser.parse_args()


def kvtool_cache(kvtool: Path) -> Path:
    python = kvtool.parent / "python"
    code = "from kvtool.cache import cache_dir; print(cache_dir())"
    return Path(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def model_folder(kvtool: Path) -> Path:
    """The converted copy of kvtool's model (its tokenizer and config), made by a first start."""
    folder = setup_env.kvtool_model_folder(kvtool_cache(kvtool), KVTOOL_MODEL_FOLDER)
    if folder is None:
        print("starting kvtool once to convert its model", flush=True)
        server = subprocess.Popen([kvtool, "serve", "--port", "8799"], start_new_session=True)
        while setup_env.kvtool_model_folder(kvtool_cache(kvtool), KVTOOL_MODEL_FOLDER) is None:
            time.sleep(2)
        time.sleep(5)
        stop(server)
        folder = setup_env.kvtool_model_folder(kvtool_cache(kvtool), KVTOOL_MODEL_FOLDER)
    return folder


def stop(process: subprocess.Popen, grace: float = 60) -> None:
    """SIGTERM (vLLM's test utilities then stop their servers), then SIGKILL to the group."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def stop_servers(pid_file: Path) -> None:
    """Servers live in their own process groups: a pytest killed mid-test can leave one behind."""
    for pid in pid_file.read_text().split() if pid_file.exists() else []:
        with contextlib.suppress(OSError):  # gone already: no /proc entry, no group
            if b"kvtool\0serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.killpg(int(pid), signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


def pieces(source: Path, paths: list[str]) -> list[list[str]]:
    """The paths given, one pytest process each; by default one process per test folder (vLLM's
    imports cost tens of seconds per process), each folder's files in order."""
    if paths:
        return [[p] for p in paths]
    files = sorted(f.relative_to(source) for s in SUITES for f in (source / s).rglob("test_*.py"))
    folders = sorted({f.parent for f in files})
    return [[str(f) for f in files if f.parent == folder] for folder in folders]


def environment(args: argparse.Namespace, hf_home: Path, folder: Path) -> dict[str, str]:
    context = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    return os.environ | {
        "KVTOOL_MODEL_CONTEXT": str(context),
        "PYTHONPATH": str(HERE),
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # vLLM finds its platform from its installed version; its source tree has none: say CPU.
        "VLLM_TARGET_DEVICE": "cpu",
        "KVTOOL_BIN": str(args.kvtool),
        "KVTOOL_MODEL": KVTOOL_MODEL,
        "PYTHONUNBUFFERED": "1",
    }


def run_piece(python: Path, source: Path, piece: list[str], env: dict, results: Path, args) -> None:
    results.unlink(missing_ok=True)
    extra = ["-k", args.keyword] if args.keyword else []
    left_out = [nodeid for nodeid in verdicts.NOT_RUN if any(nodeid.startswith(path) for path in piece)]
    extra += [f"--deselect={nodeid}" for nodeid in left_out]
    extra += ["--models", *TOOL_USE_CONFIGS] if piece[0].startswith("tests/tool_use") else []
    command = [python, "-m", "pytest", *PYTEST_ARGS, *piece, *extra]  # --models takes the words after it
    log = results.with_suffix(".log").open("w")
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=source,
        env=env | {"CONFORMANCE_RESULTS": str(results)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        process.wait(args.timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        report.note_timeout(results, piece[0], args.timeout)
    except KeyboardInterrupt:
        stop(process)
        raise
    finally:
        stop_servers(Path(f"{results}.pids"))
    for nodeid in left_out:
        report.note_not_run(results, nodeid, verdicts.NOT_RUN[nodeid])
    name = piece[0] if len(piece) == 1 else f"{Path(piece[0]).parent}/ ({len(piece)} files)"
    print(f"{name}: {time.monotonic() - started:.0f} s, {report.summary(results)}", flush=True)


def main() -> None:
    args = parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    source = setup_env.fetch_sdist(args.cache)
    results_dir = args.cache / "results"
    results_dir.mkdir(exist_ok=True)
    if not args.report_only:
        python = setup_env.make_venv(args.cache, source)
        folder = model_folder(args.kvtool)
        env = environment(args, setup_env.fake_hub(args.cache, source, folder), folder)
        for piece in pieces(source, args.paths):
            name = piece[0].replace("/", "__") + f".{len(piece)}" + (".k" if args.keyword else "")
            run_piece(python, source, piece, env, results_dir / f"{name}.jsonl", args)
    table = args.cache / "conformance.md"
    table.write_text(report.render(sorted(results_dir.glob("*.jsonl"), key=lambda f: f.stat().st_mtime)))
    print(f"table: {table}")


if __name__ == "__main__":
    sys.exit(main())
