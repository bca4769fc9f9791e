"""Loading and checking profiles: the shipped ones, users' files, and clear errors for bad ones."""

import pytest

from kvtool.errors import UsageError
from kvtool.profiles.workload import list_profiles, load_profile, profile_names

SEEDS = {  # name: (max_model_len, max_tokens, kv_cache_dtype, max_num_seqs, tensor_parallel_size)
    "chat-gateway": (4096, 1024, "fp8", 128, 1),
    "long-form-agent": (8192, 4096, "fp8", 32, 1),
    "document-qa": (8192, 2048, "auto", 64, 1),
    "multi-gpu-synthesis": (16384, 4096, "fp8", 64, 4),
}


def test_shipped_profiles_are_the_seed_matrix():
    assert profile_names() == sorted(SEEDS)
    for p in list_profiles():
        assert (p.max_model_len, p.max_tokens, p.kv_cache_dtype, p.max_num_seqs, p.tensor_parallel_size) == SEEDS[
            p.name
        ]
        assert p.description and p.hardware and p.overflow in ("reject", "clamp")
        assert p.max_num_batched_tokens >= p.max_num_seqs and 0 < p.gpu_memory_utilization <= 1


def write(tmp_path, text: str) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return str(path)


GOOD = "description: d\nmax_model_len: 2048\nmax_tokens: 128\n"


def test_users_file_gets_defaults_and_its_file_name(tmp_path):
    p = load_profile(write(tmp_path, GOOD))
    assert p.name == "profile" and p.max_model_len == 2048 and p.overflow == "clamp" and p.tensor_parallel_size == 1


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("max_num_seqs: many\n", "max_num_seqs in profile 'profile' must be an integer"),
        ("max_tokns: 5\n", "Unknown key 'max_tokns'"),
        ("overflow: truncate\n", "overflow 'truncate'"),
        ("kv_cache_dtype: int4\n", "kv_cache_dtype 'int4'"),
        ("gpu_memory_utilization: 1.5\n", "gpu_memory_utilization"),
        ("max_num_seqs: 512\nmax_num_batched_tokens: 256\n", "must be greater than or equal to max_num_seqs"),
    ],
)
def test_bad_values_name_the_key(tmp_path, extra, expected):
    with pytest.raises(UsageError, match=expected.replace("(", r"\(")):
        load_profile(write(tmp_path, GOOD + extra))


def test_missing_keys_and_bad_yaml_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="lacks max_tokens"):
        load_profile(write(tmp_path, "description: d\nmax_model_len: 10\n"))
    with pytest.raises(UsageError, match="not valid YAML"):
        load_profile(write(tmp_path, "description: [unclosed\n"))
    with pytest.raises(UsageError, match="does not exist"):
        load_profile(str(tmp_path / "nope.yaml"))
