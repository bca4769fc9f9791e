"""The per-request state of one mamba or linear-attention layer, as vLLM shapes it
(`model_executor/layers/mamba/mamba_utils.py` MambaStateShapeCalculator): a convolution window and a
recurrent (SSM) state, both split over tensor parallelism, and never growing with the sequence."""

from dataclasses import dataclass

from kvtool.engine.sizing import hf_config as hf

# model types whose SSM state vLLM keeps in float32 unless the config says otherwise
# (model_executor/models/config.py NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
FLOAT32_SSM_MODEL_TYPES = ("nemotron_h",)


@dataclass(frozen=True)
class MambaState:
    kind: str  # gdn (Gated-DeltaNet) | mamba1 | mamba2
    conv_dim: int  # channels of the convolution window at tp 1
    conv_len: int  # conv kernel - 1
    ssm_heads: int  # what tensor parallelism splits: heads (gdn, mamba2) or channels (mamba1)
    ssm_per_head: int  # recurrent-state elements per head or channel
    n_groups: int = 0  # mamba2: B/C groups, replicated when tp does not divide them
    state_size: int = 0
    ssm_float32: bool = False

    def conv_elements(self, tp: int) -> int:
        conv_dim = self.conv_dim
        if self.kind == "mamba2" and self.n_groups % tp:
            conv_dim += 2 * (tp - self.n_groups) * self.state_size  # extra_groups_for_head_shards
        return conv_dim // tp * self.conv_len

    def ssm_elements(self, tp: int) -> int:
        return self.ssm_heads // tp * self.ssm_per_head

    def page_bytes(self, tp: int, dtype_bytes: int) -> int:
        """One request's state in one layer (vLLM's MambaSpec.page_size_bytes before padding)."""
        return self.conv_elements(tp) * dtype_bytes + self.ssm_elements(tp) * (4 if self.ssm_float32 else dtype_bytes)


def mamba_state(config: dict) -> MambaState | None:
    """The state of the config's mamba / linear-attention layers; None for a model without them."""
    if config.get("linear_num_value_heads"):
        return _gated_delta_net(config)
    heads = hf.first(config, "mamba_num_heads", "mamba_n_heads", "num_heads")
    if heads and hf.first(config, "n_groups", "mamba_n_groups") is not None:
        return _mamba2(config, int(heads))
    if hf.first(config, "mamba_d_state", "state_size") and config.get("model_type") in MAMBA1_MODEL_TYPES:
        return _mamba1(config)
    return None


MAMBA1_MODEL_TYPES = ("jamba", "mamba", "falcon_mamba")


def _ssm_float32(config: dict) -> bool:
    dtype = config.get("mamba_ssm_dtype") or config.get("mamba_ssm_cache_dtype")
    return dtype == "float32" or (dtype is None and config.get("model_type") in FLOAT32_SSM_MODEL_TYPES)


def _gated_delta_net(config: dict) -> MambaState:
    k_heads, v_heads = int(config["linear_num_key_heads"]), int(config["linear_num_value_heads"])
    k_dim, v_dim = int(config["linear_key_head_dim"]), int(config["linear_value_head_dim"])
    return MambaState(
        "gdn",
        conv_dim=2 * k_heads * k_dim + v_heads * v_dim,
        conv_len=int(config.get("linear_conv_kernel_dim") or 4) - 1,
        ssm_heads=v_heads,
        ssm_per_head=v_dim * k_dim,
        ssm_float32=_ssm_float32(config),
    )


def _mamba2(config: dict, heads: int) -> MambaState:
    head_dim = int(hf.first(config, "mamba_head_dim", "mamba_d_head", "head_dim"))
    state = int(hf.first(config, "ssm_state_size", "mamba_d_state", "state_size"))
    groups = int(hf.first(config, "n_groups", "mamba_n_groups"))
    intermediate = int(hf.first(config, "mamba_d_ssm", default=0) or heads * head_dim)
    return MambaState(
        "mamba2",
        conv_dim=intermediate + 2 * groups * state,
        conv_len=int(hf.first(config, "conv_kernel", "mamba_d_conv", default=4)) - 1,
        ssm_heads=heads,
        ssm_per_head=head_dim * state,
        n_groups=groups,
        state_size=state,
        ssm_float32=_ssm_float32(config),
    )


def _mamba1(config: dict) -> MambaState:
    expand = hf.first(config, "mamba_expand", "expand", default=2)
    intermediate = int(
        config.get("intermediate_size") if config.get("model_type") != "jamba" else expand * config["hidden_size"]
    )
    return MambaState(
        "mamba1",
        conv_dim=intermediate,
        conv_len=int(hf.first(config, "mamba_d_conv", "conv_kernel", default=4)) - 1,
        ssm_heads=intermediate,
        ssm_per_head=int(hf.first(config, "mamba_d_state", "state_size")),
        ssm_float32=_ssm_float32(config),
    )
