"""Settings the vLLM backend hands to vLLM before its engine starts (no engine needed)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import pytest

from qerl.rollout import vllm_internals
from qerl.rollout.vllm_internals import DUAL_STREAM_ENV, VLLMInternalsError, set_lora_dual_stream


def test_dual_stream_is_set_before_vllm_reads_it(monkeypatch):
    monkeypatch.delenv(DUAL_STREAM_ENV, raising=False)
    monkeypatch.delitem(sys.modules, vllm_internals._DUAL_STREAM_MODULE, raising=False)
    set_lora_dual_stream(False)  # off: the environment is left as it is
    assert DUAL_STREAM_ENV not in os.environ
    set_lora_dual_stream(True)
    assert os.environ[DUAL_STREAM_ENV] == "1"


def test_dual_stream_cannot_be_switched_on_after_vllm_read_it(monkeypatch):
    monkeypatch.setenv(DUAL_STREAM_ENV, "0")
    monkeypatch.setitem(sys.modules, vllm_internals._DUAL_STREAM_MODULE, types.ModuleType("stand-in"))
    with pytest.raises(VLLMInternalsError, match="before the first vLLM engine"):
        set_lora_dual_stream(True)
    monkeypatch.setenv(DUAL_STREAM_ENV, "1")  # already on when vLLM read it: nothing to change
    set_lora_dual_stream(True)


@pytest.mark.vllm_cpu
def test_installed_vllm_reads_dual_stream_when_its_lora_layers_are_imported():
    """Fails when upstream moves the setting: the module named here must read the variable at import time."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed in this environment")
    spec = importlib.util.find_spec(vllm_internals._DUAL_STREAM_MODULE)
    assert spec is not None and spec.origin, f"{vllm_internals._DUAL_STREAM_MODULE} is gone from this vLLM"
    source = open(spec.origin).read()
    assert f"if envs.{DUAL_STREAM_ENV}:" in source, "vLLM no longer reads the setting when the module is imported"


def test_lora_fusion_installs_at_the_first_call_of_the_model_then_unhooks(monkeypatch):
    """The expand fusion must be in place before vLLM traces the model, i.e. at its first call while the engine
    starts (vllm_lora_fusion.installer): modules without LoRA layers are ignored, the model is handled once, and
    the global hook is gone after the first install and after the scope (also when the engine fails to start)."""
    import torch
    from torch import nn

    from qerl.rollout import vllm_lora_fusion as fusion

    seen = []
    monkeypatch.setattr(fusion, "install", lambda model: seen.append(model) or 3)

    class LoRALayer(nn.Linear):  # what the hook looks for: a layer holding vLLM's stacked B tensors
        def __init__(self) -> None:
            super().__init__(2, 2)
            self.lora_b_stacked = (torch.zeros(1, 1, 2, 8),)

    hooks = torch.nn.modules.module._global_forward_pre_hooks
    before = len(hooks)
    model, other, x = nn.Sequential(nn.Linear(2, 2), LoRALayer()), nn.Linear(2, 2), torch.zeros(1, 2)
    with fusion.installer() as inst:
        assert len(hooks) == before + 1
        other(x)
        assert inst.installed is None and not seen
        model(x)
        assert seen == [model] and inst.installed == 3 and len(hooks) == before
        model(x)
    assert seen == [model]
    with fusion.installer(enabled=False) as inst:
        model(x)
    assert inst.installed is None and seen == [model]
    with pytest.raises(RuntimeError), fusion.installer():
        raise RuntimeError("engine failed to start")
    assert len(hooks) == before


@pytest.mark.vllm_cpu
def test_installed_vllm_shrink_contract_the_fused_expand_relies_on():
    """Fails when upstream moves: vLLM's CUDA shrink returns early when no token of the batch has an adapter (its
    ``no_lora_flag_cpu``, reached through ``PunicaWrapperGPU.token_mapping_meta``) and otherwise zeroes its output
    buffer itself; vllm_internals.lora_shrink allocates that buffer uninitialised and hands the flag on."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed in this environment")
    import inspect

    from vllm.lora.ops.triton_ops import lora_shrink_op
    from vllm.lora.ops.triton_ops.lora_kernel_metadata import LoRAKernelMeta
    from vllm.lora.punica_wrapper.punica_gpu import PunicaWrapperGPU

    source = inspect.getsource(lora_shrink_op._lora_shrink)
    assert "no_lora_flag_cpu.item()" in source and "output_tensor.zero_()" in source
    assert source.index("no_lora_flag_cpu.item()") < source.index("output_tensor.zero_()")
    assert "no_lora_flag_cpu" in LoRAKernelMeta.__dataclass_fields__
    assert "self.token_mapping_meta = LoRAKernelMeta.make(" in inspect.getsource(PunicaWrapperGPU.__init__)


@pytest.mark.vllm_cpu
def test_installed_vllm_keys_its_saved_trace_without_the_traced_code():
    """Fails when upstream moves: the environment variable that switches vLLM's saved trace off must still exist;
    while vLLM keys that trace by configuration and environment only (not the traced code), the fused expand has to
    switch it off (vllm_internals.disable_aot_compile_cache)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed in this environment")
    import inspect

    import vllm.compilation.decorators as decorators
    import vllm.envs as envs

    assert vllm_internals.AOT_COMPILE_ENV in envs.environment_variables
    assert "aot_compile_hash_factors(self.vllm_config)" in inspect.getsource(decorators)


def test_fuse_lora_expand_defaults_to_on_where_it_applies(caplog):
    """None (the config's default) fuses on NVFP4 engines on this project's kernels only; an explicit False keeps
    vLLM's own expand; an explicit True where it cannot apply (Marlin, BF16) is ignored with a warning."""
    from qerl.rollout.vllm_backend import fuse_lora_expand_enabled

    assert fuse_lora_expand_enabled(None, "nvfp4", "qerl")
    assert not fuse_lora_expand_enabled(False, "nvfp4", "qerl")
    assert fuse_lora_expand_enabled(True, "nvfp4", "qerl")
    for load, kernel in (("nvfp4", "marlin"), ("bf16", "qerl"), ("nf4", "marlin")):
        assert not fuse_lora_expand_enabled(None, load, kernel)
    assert not caplog.records
    with caplog.at_level("WARNING"):
        assert not fuse_lora_expand_enabled(True, "nvfp4", "marlin")
    assert "fp4_kernel='qerl' only" in caplog.text


def test_auto_fp4_kernel_is_this_projects_where_its_warp_specialized_kernels_run(monkeypatch):
    """fp4_kernel "auto" resolves to "qerl" where ``nvfp4_gemm_ws.available()`` (a Hopper GPU with Gluon) and to
    "marlin" elsewhere; explicit choices stay as given; BF16 / NF4 engines run no FP4 GEMM; an unknown name is one
    error naming the choices."""
    from qerl.errors import UserError
    from qerl.kernels import nvfp4_gemm_ws
    from qerl.rollout.vllm_backend import resolve_fp4_kernel

    for hopper in (True, False):
        monkeypatch.setattr(nvfp4_gemm_ws, "available", lambda device=None, hopper=hopper: hopper)
        assert resolve_fp4_kernel("auto", "nvfp4") == ("qerl" if hopper else "marlin")
        assert resolve_fp4_kernel("marlin", "nvfp4") == "marlin" and resolve_fp4_kernel("qerl", "nvfp4") == "qerl"
        assert resolve_fp4_kernel("auto", "bf16") is None and resolve_fp4_kernel("qerl", "nf4") is None
    monkeypatch.undo()
    # On this machine (no CUDA in CI) the warp-specialized kernels do not run, so auto is Marlin.
    if not nvfp4_gemm_ws.available():
        assert resolve_fp4_kernel("auto", "nvfp4") == "marlin"
    with pytest.raises(UserError, match="unknown fp4_kernel 'cutlass': use one of marlin, qerl, auto"):
        resolve_fp4_kernel("cutlass", "nvfp4")


def test_rollout_benchmark_passes_the_fusion_setting_to_its_engine_processes():
    """benchmarks/rollout_vllm.py hands --fuse-lora-expand / --no-fuse-lora-expand to each engine process as given,
    and nothing when unset (the backend's default)."""
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "rollout_vllm.py")
    spec = importlib.util.spec_from_file_location("rollout_vllm_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    common = ["rollout", "--shape", "tiny", "--formats", "nvfp4"]
    assert bench.parse_args(common).fuse_lora_expand is None
    assert bench.parse_args([*common, "--no-fuse-lora-expand"]).fuse_lora_expand is False
    assert [bench.fuse_flag(v) for v in (None, True, False)] == [[], ["--fuse-lora-expand"],
                                                                 ["--no-fuse-lora-expand"]]
