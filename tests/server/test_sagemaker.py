"""SageMaker's overrides as a start-up input: a model script that does not load stops `kvtool serve` in one line."""

import pytest
from fastapi import FastAPI

from kvtool.engine.server.sagemaker import install_sagemaker
from kvtool.errors import UsageError


def test_a_model_script_that_does_not_load_is_one_usage_error(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text("import no_such_module\n")
    monkeypatch.setenv("SAGEMAKER_MODEL_PATH", str(tmp_path))
    with pytest.raises(UsageError) as caught:
        install_sagemaker(FastAPI(), state=None)
    assert str(caught.value) == (
        "The SageMaker overrides do not load: ModuleNotFoundError: No module named 'no_such_module'. "
        "Fix the script in SAGEMAKER_MODEL_PATH or the CUSTOM_FASTAPI_* variables, or unset them."
    )
