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
