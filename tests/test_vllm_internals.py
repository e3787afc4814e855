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
