"""SageMaker's overrides as a start-up input: a model script that does not load stops `kvtool serve` in one line."""

import pytest
from fastapi import FastAPI

from kvtool.engine.server.sagemaker import _root_logging_kept, install_sagemaker
from kvtool.errors import UsageError


@pytest.fixture
def no_script_loaded(monkeypatch):
    """The package keeps the first script loader it makes: forget one an app built earlier in this process made."""
    with _root_logging_kept():
        from model_hosting_container_standards.sagemaker.sagemaker_loader import SageMakerFunctionLoader
    monkeypatch.setattr(SageMakerFunctionLoader, "_default_function_loader", None)


def test_a_model_script_that_does_not_load_is_one_usage_error(tmp_path, monkeypatch, no_script_loaded):
    (tmp_path / "model.py").write_text("import no_such_module\n")
    monkeypatch.setenv("SAGEMAKER_MODEL_PATH", str(tmp_path))
    with pytest.raises(UsageError) as caught:
        install_sagemaker(FastAPI(), state=None)
    assert str(caught.value) == (
        "The SageMaker overrides do not load: ModuleNotFoundError: No module named 'no_such_module'. "
        "Fix the script in SAGEMAKER_MODEL_PATH or the CUSTOM_FASTAPI_* variables, or unset them."
    )
