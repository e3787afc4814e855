"""Rollouts with a colocated vLLM engine on the frozen base (NVFP4 on Marlin kernels, BF16, or bitsandbytes NF4).

Each round the trainer's LoRA adapter (A/B only) is handed to vLLM's LoRA API; it is never merged into the base,
which for a 4-bit base would mean requantizing (a different model). vLLM's public API loads adapters from a
directory, so each version is written atomically (temporary directory + rename) under a RAM-backed path
(/dev/shm when present) and registered under a fresh LoRA id; the previous version is then dropped. Trained norm
weights are copied into the engine's own RMSNorm modules, AQN noise is drawn by ``qerl.aqn`` onto those same modules
(fp32 master, fresh draw per round), the prefix cache is reset (cached KV was computed under other weights), and
the sampled tokens come back with their log-probabilities under the temperature-scaled distribution
(``logprobs_mode="processed_logprobs"``), the distribution the trainer scores them under. With top-k/top-p/min-p
or a repetition penalty the processed distribution is the truncated/penalised one vLLM sampled from, which the
trainer's plain temperature scaling does not reproduce; RL rollouts normally leave them off.

vLLM is imported lazily, so this module imports where vLLM is absent. Internal vLLM paths live in
``qerl.rollout.vllm_internals``.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn

from qerl.aqn import is_norm_module
from qerl.errors import UserError
from qerl.loading import LOAD_MODES, nvfp4_quantization_config, read_config
from qerl.rollout import vllm_internals, vllm_lora_configs, vllm_lora_fusion
from qerl.rollout.base import RolloutBackend, RolloutResult, SamplingSettings

log = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter_model.safetensors"
# vLLM's Marlin FP4 GEMM, this project's Triton kernels (vllm_nvfp4.py), or "auto": the latter where its
# warp-specialized kernels run (``resolve_fp4_kernel``).
FP4_KERNELS = ("marlin", "qerl", "auto")


def resolve_fp4_kernel(requested: str, load: str) -> str | None:
    """The NVFP4 GEMM an engine of ``load`` runs: None for a BF16 / NF4 engine; "marlin" / "qerl" as asked; "auto":
    "qerl" where this project's warp-specialized kernels run (a Hopper GPU with Triton's Gluon, not switched off by
    ``QERL_WS_KERNELS=0``), where its engine was measured faster than Marlin's at batch 1-64 with and without an
    adapter (benchmarks/RESULTS.md, runs 38-39: 3B / 7B / 14B / 32B, 1.10-1.46x), else "marlin" (other GPUs: not
    measured)."""
    if requested not in FP4_KERNELS:
        raise UserError(f"unknown fp4_kernel {requested!r}: use one of {', '.join(FP4_KERNELS)}")
    if load != "nvfp4":
        return None
    if requested != "auto":
        return requested
    from qerl.kernels import nvfp4_gemm_ws

    return "qerl" if nvfp4_gemm_ws.available() else "marlin"


def engine_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of rank ``rank``."""
    ranks = vllm_internals.supported_lora_ranks()
    for r in ranks:
        if r >= rank:
            return r
    raise UserError(f"LoRA rank {rank} is above the largest rank vLLM {vllm_internals.vllm_version()} serves ({ranks[-1]})")


def default_adapter_root() -> Path:
    """/dev/shm (RAM-backed) when writable: adapters are rewritten every round and read back at once."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def unwrap_policy(policy: nn.Module) -> nn.Module:
    """The model under accelerate/DDP wrappers (``.module``) as the trainer holds it."""
    from peft import PeftModel

    while not isinstance(policy, PeftModel) and isinstance(getattr(policy, "module", None), nn.Module):
        policy = policy.module
    return policy


def plain_module_name(name: str) -> str:
    """A module name without peft's wrapper parts, i.e. the base model's (and vLLM's) name for it."""
    for prefix in ("base_model.model.", "model.base_model.model."):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    parts = name.split(".")
    if "modules_to_save" in parts:  # peft ModulesToSaveWrapper: <name>.modules_to_save.<adapter>
        parts = parts[: parts.index("modules_to_save")]
    elif parts and parts[-1] == "original_module":
        parts = parts[:-1]
    return ".".join(parts)


def adapter_state(policy: nn.Module) -> tuple[dict[str, torch.Tensor], Any] | None:
    """``(tensors, LoraConfig)`` of the policy's active LoRA adapter in peft's on-disk naming, A/B matrices only;
    None if the policy carries no peft adapter."""
    from peft import PeftModel, PeftType, get_peft_model_state_dict

    policy = unwrap_policy(policy)
    if not isinstance(policy, PeftModel):
        return None

    name = policy.active_adapter if isinstance(policy.active_adapter, str) else policy.active_adapters[0]
    config = policy.peft_config[name]
    if config.peft_type != PeftType.LORA:
        raise UserError(f"the vLLM backend serves LoRA adapters only, the policy has a {config.peft_type} adapter")
    if getattr(config, "use_dora", False):
        raise UserError("vLLM does not serve DoRA adapters: train with use_dora=False or use --rollout-backend hf")
    state = get_peft_model_state_dict(policy, adapter_name=name)
    tensors, other = {}, []
    for key, value in state.items():
        if ".lora_A." in key or ".lora_B." in key:
            tensors[key] = value.detach().to("cpu").contiguous()
        else:
            other.append(key)
    modules = dict(policy.named_modules())
    unserved = [k for k in other if not _is_norm_weight(modules, k)]
    if unserved:
        raise UserError(
            f"the adapter holds tensors vLLM's LoRA API cannot serve: {unserved[:3]}: train LoRA A/B (and norms) only, "
            "or use --rollout-backend hf"
        )
    if not tensors:
        raise UserError("the policy's adapter has no LoRA A/B tensors")
    config = copy.deepcopy(config)
    config.modules_to_save = None  # trained norms are pushed into the engine directly, not as an adapter module
    return tensors, config


def _is_norm_weight(modules: dict[str, nn.Module], key: str) -> bool:
    """A norm's weight, bare or as a peft modules_to_save copy (``...input_layernorm.weight`` under the wrapper)."""
    owner = modules.get(key.rsplit(".", 1)[0])
    if owner is None:
        return False
    return is_norm_module(owner) or is_norm_module(getattr(owner, "original_module", None) or nn.Module())


def trained_norm_weights(policy: nn.Module) -> dict[str, torch.Tensor]:
    """Norm weights the trainer updates (requires_grad), keyed by the base model's module name."""
    policy = unwrap_policy(policy)
    out = {}
    for name, module in policy.named_modules():
        if is_norm_module(module) and module.weight.requires_grad:
            out[plain_module_name(name)] = module.weight.detach()
    return out


def write_adapter(directory: Path, tensors: dict[str, torch.Tensor], config: Any) -> Path:
    """Write a peft adapter directory atomically: a reader sees the whole adapter or nothing."""
    from safetensors.torch import save_file

    directory = Path(directory)
    tmp = Path(tempfile.mkdtemp(prefix=directory.name + ".tmp-", dir=directory.parent))
    try:
        config.save_pretrained(str(tmp))
        save_file(tensors, str(tmp / ADAPTER_WEIGHTS), metadata={"format": "pt"})
        os.replace(tmp, directory)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def fuse_lora_expand_enabled(requested: bool | None, load: str, fp4_kernel: str | None) -> bool:
    """Whether the engine adds the adapter's expand in this project's NVFP4 GEMM epilogue
    (``qerl/rollout/vllm_lora_fusion.py``). ``None`` (the default) means wherever it applies: an NVFP4 engine on
    ``fp4_kernel="qerl"``, where it was measured faster (benchmarks/RESULTS.md, run 11: 14B rank-32 rollouts on the
    words layout 1.59x / 1.44x / 1.32x over BF16 at batch 8 / 32 / 64, against 1.54x / 1.41x / 1.27x on vLLM's own
    LoRA kernels); Marlin, BF16 and NF4 engines run vLLM's own LoRA kernels. ``True`` where it cannot apply logs a
    warning and is ignored."""
    applies = load == "nvfp4" and fp4_kernel == "qerl"
    if requested and not applies:
        log.warning("fuse_lora_expand applies to an NVFP4 engine on fp4_kernel='qerl' only; this %s engine%s "
                    "runs vLLM's own LoRA kernels", load, "" if load != "nvfp4" else f" on {fp4_kernel}")
    return applies if requested is None else bool(requested) and applies


class VLLMRolloutBackend(RolloutBackend):
    """A colocated ``vllm.LLM`` on the frozen base with the trainer's live LoRA adapter and AQN on its norms."""

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        tokenizer: Any = None,
        *,
        load: str = "nvfp4",
        max_lora_rank: int = 32,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int = 4096,
        enable_sleep_mode: bool = False,
        dtype: str = "auto",
        seed: int = 0,
        enforce_eager: bool = False,
        lora_dual_stream: bool = False,
        fp4_kernel: str = "marlin",
        lora_kernel_configs: str = "auto",
        fuse_lora_expand: bool | None = None,
        adapter_root: str | Path | None = None,
        eos_token_ids: list[int] | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if load not in LOAD_MODES:
            raise UserError(f"unknown load mode {load!r}: use one of {', '.join(LOAD_MODES)}")
        # Before vllm is imported: some of its settings are read once at import or engine start.
        vllm_internals.require_inprocess_engine()
        vllm_internals.set_lora_dual_stream(lora_dual_stream)
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        self.lora_kernel_configs = vllm_lora_configs.apply(lora_kernel_configs, gpu)
        if self.lora_kernel_configs:
            log.info("vLLM LoRA kernel launch configs from %s", self.lora_kernel_configs)
        try:
            import vllm
        except ImportError as exc:
            raise UserError("--rollout-backend vllm needs vllm: pip install -e '.[vllm]' (CUDA) or use "
                            "--rollout-backend hf") from exc
        self.model_path = str(model_path)
        qc = nvfp4_quantization_config(read_config(self.model_path))
        kwargs: dict[str, Any] = {}
        if load == "nvfp4":
            if qc is None:
                raise UserError(f"{model_path} is not an NVFP4 compressed-tensors checkpoint: quantize it with "
                                "llm-compressor/quantize_nvfp4.py or use --load bf16")
            # vLLM reads the compressed-tensors quantization_config from config.json and picks the FP4 kernel.
        elif qc is not None:
            raise UserError(f"{model_path} is an NVFP4 checkpoint: use --load nvfp4 or pass the BF16 source model")
        elif load == "nf4":
            kwargs["quantization"] = "bitsandbytes"  # in-flight NF4 quantization of the BF16 checkpoint
        requested_kernel, fp4_kernel = fp4_kernel, resolve_fp4_kernel(fp4_kernel, load)
        if fp4_kernel == "qerl":
            from qerl.rollout import vllm_nvfp4

            kwargs["quantization"] = vllm_nvfp4.register()  # this project's Triton kernels instead of Marlin
        if requested_kernel == "auto" and fp4_kernel is not None:
            log.info("fp4_kernel auto: the engine's NVFP4 GEMMs run on %s", fp4_kernel)
        self.fp4_kernel = fp4_kernel
        self.load = load
        self.tokenizer = tokenizer
        if eos_token_ids is None and tokenizer is not None and tokenizer.eos_token_id is not None:
            eos_token_ids = [tokenizer.eos_token_id]
        self.eos_token_ids = list(eos_token_ids or [])
        self.max_lora_rank = engine_lora_rank(max_lora_rank)
        self.enable_sleep_mode = enable_sleep_mode
        self.seed = seed
        kwargs.update(
            model=self.model_path,
            enable_lora=True,
            max_lora_rank=self.max_lora_rank,
            max_loras=1,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_sleep_mode=enable_sleep_mode,
            dtype=dtype,
            seed=seed,
            enforce_eager=enforce_eager,
            # Log-probabilities after temperature (and top-k/top-p) processing: what the sampler drew from.
            logprobs_mode="processed_logprobs",
        )
        kwargs.update(engine_kwargs or {})
        self.vllm_version = vllm.__version__
        fuse = fuse_lora_expand_enabled(fuse_lora_expand, load, fp4_kernel)
        if fuse:
            vllm_internals.disable_aot_compile_cache()
        with vllm_lora_fusion.installer(enabled=fuse) as fusion:
            self.llm = vllm.LLM(**kwargs)
        self._model = vllm_internals.engine_model(self.llm)
        self.lora_fusion_at = None
        self.fused_lora_layers = self._fuse_lora_expand(fusion) if fuse else 0
        self._lora_request = None
        self._next_lora_id = 1
        self._sleeping = False
        root = Path(adapter_root) if adapter_root is not None else default_adapter_root()
        root.mkdir(parents=True, exist_ok=True)
        self.adapter_dir = Path(tempfile.mkdtemp(prefix="qerl-vllm-lora-", dir=root))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.adapter_dir), True)
        self.last_sync_seconds = 0.0

    def _fuse_lora_expand(self, fusion) -> int:
        # Where it happened: at the model's first call while the engine started (before vLLM traced and captured
        # it), or after the start when the engine never ran its model (then nothing was traced yet either).
        self.lora_fusion_at = "engine start" if fusion.installed is not None else "after engine start"
        if fusion.installed is None:
            vllm_lora_fusion.install(self._model)
        fused = vllm_lora_fusion.fused_layers(self._model)
        ours = sum(getattr(getattr(layer.base_layer, "quant_method", None), "qerl_nvfp4", False)
                   for layer in vllm_internals.lora_linear_layers(self._model))
        if fused != ours:
            raise vllm_internals.VLLMInternalsError(
                f"vLLM {self.vllm_version}: the LoRA expand was fused into {fused} of the {ours} NVFP4 LoRA layers; "
                "qerl/rollout/vllm_lora_fusion.py needs updating for this vLLM (or leave fuse_lora_expand off, "
                "--vllm_fuse_lora_expand false)")
        log.info("vLLM engine: LoRA expand fused into the NVFP4 GEMM on %d layers (%s)", fused, self.lora_fusion_at)
        return fused

    # -- contract -------------------------------------------------------------------------------------------------

    def generating_model(self) -> nn.Module:
        """The engine's own torch model (its weights are only valid while the engine is awake)."""
        return self._model

    def attach_aqn(self, controller, patterns, seed: int = 0) -> None:
        self.wake_up()  # the fp32 master is read from the engine's weights, which a sleeping engine does not hold
        super().attach_aqn(controller, patterns, seed)

    @property
    def lora_request(self):
        """The LoRARequest of the adapter version the next generation uses (None before the first sync)."""
        return self._lora_request

    def sync_policy(self, policy: nn.Module) -> None:
        """Push the policy's current LoRA adapter (A/B only) and trained norm weights into the engine."""
        start = time.perf_counter()
        self.wake_up()
        state = adapter_state(policy)
        if state is None:
            self._drop_adapter()
        else:
            self.push_adapter(*state)
        norms = trained_norm_weights(policy)
        if norms:
            self._push_norms(norms)
        self.last_sync_seconds = time.perf_counter() - start

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], sampling: SamplingSettings) -> RolloutResult:
        self.wake_up()
        noise = None
        if self.injector is not None and self.aqn is not None:
            noise = self.injector.perturb(self.aqn.sigma)
            self.aqn.last = noise
        try:
            # Cached prefixes were computed under the previous round's adapter/noise/norms.
            if self.llm.reset_prefix_cache() is False:
                log.warning("vLLM refused to reset its prefix cache; stale KV may be reused")
            params = self._sampling_params(len(prompt_ids), sampling)
            prompts = [{"prompt_token_ids": list(p)} for p in prompt_ids]
            start = time.perf_counter()
            outputs = self.llm.generate(prompts, params, lora_request=self._lora_request, use_tqdm=False)
            seconds = time.perf_counter() - start
        finally:
            if self.injector is not None and self.injector.noised:
                self.injector.restore()
        completions, logprobs = [], []
        for out in outputs:
            sample = out.outputs[0]
            ids = list(sample.token_ids)
            completions.append(ids)
            logprobs.append(_sampled_logprobs(ids, sample.logprobs))
        if self.enable_sleep_mode:
            self.sleep()
        return RolloutResult(completions, logprobs, sum(map(len, completions)), seconds, noise)

    # -- engine memory --------------------------------------------------------------------------------------------

    def sleep(self) -> None:
        """Free the engine's GPU memory for the training step (level 1: weights to CPU, KV cache dropped; the
        base weights are not re-sent by the trainer, so level 2 would lose them)."""
        if self.enable_sleep_mode and not self._sleeping:
            self.llm.sleep(level=1)
            self._sleeping = True

    def wake_up(self) -> None:
        """Bring a sleeping engine back (no-op when awake); sync_policy, attach_aqn and generate do it themselves."""
        if self._sleeping:
            self.llm.wake_up()
            self._sleeping = False

    def close(self) -> None:
        """Shut the engine down and delete the adapter files."""
        self._drop_adapter()
        llm = self.__dict__.pop("llm", None)
        self._model = None
        self.injector = None
        if llm is not None:
            shutdown = getattr(getattr(llm, "llm_engine", None), "shutdown", None)
            if callable(shutdown):
                shutdown()
            del llm
        self._cleanup()

    # -- internals ------------------------------------------------------------------------------------------------

    def _sampling_params(self, n: int, s: SamplingSettings) -> list:
        from vllm import SamplingParams

        params = []
        for i in range(n):
            params.append(
                SamplingParams(
                    max_tokens=s.max_new_tokens,
                    temperature=s.temperature,
                    top_p=s.top_p,
                    top_k=s.top_k if s.top_k > 0 else 0,
                    min_p=s.min_p,
                    repetition_penalty=s.repetition_penalty,
                    # One seed per request: the trainer repeats each prompt for its group, and equal seeds would
                    # give every member of a group the same completion.
                    seed=None if s.seed is None else s.seed + i,
                    stop_token_ids=self.eos_token_ids or None,
                    logprobs=0,  # the sampled token's log-probability only
                    detokenize=False,
                )
            )
        return params

    def push_adapter(self, tensors: dict[str, torch.Tensor], config: Any) -> None:
        """Serve a LoRA adapter given as peft-named A/B tensors and its LoraConfig from the next generation on."""
        from vllm.lora.request import LoRARequest

        rank = int(config.r)
        if rank > self.max_lora_rank:
            raise UserError(f"the adapter's rank {rank} is above the engine's max_lora_rank {self.max_lora_rank}: "
                            "start the backend with max_lora_rank >= the LoRA rank")
        lora_id = self._next_lora_id
        self._next_lora_id += 1
        dtype = vllm_internals.engine_lora_dtype(self.llm)
        if dtype is not None:
            # vLLM casts to its LoRA dtype on load anyway (before folding in the scaling); casting here gives the same
            # numbers and halves the bytes written and read each round for an fp32 adapter on a bf16 engine.
            tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
        path = write_adapter(self.adapter_dir / f"v{lora_id}", tensors, config)
        # A fresh id per version: vLLM caches adapters by id, and re-sending the same id would be served from that
        # cache (the old weights).
        request = LoRARequest(lora_name=f"qerl-policy-v{lora_id}", lora_int_id=lora_id, lora_path=str(path))
        if not self.llm.llm_engine.add_lora(request):
            raise RuntimeError(f"vLLM did not load the adapter written to {path}")
        self._drop_adapter()
        self._lora_request = request

    def _drop_adapter(self) -> None:
        request = self._lora_request
        if request is None:
            return
        self._lora_request = None
        llm = self.__dict__.get("llm")
        if llm is not None and request.lora_int_id in llm.llm_engine.list_loras():
            llm.llm_engine.remove_lora(request.lora_int_id)
        shutil.rmtree(request.lora_path, ignore_errors=True)

    @torch.no_grad()
    def _push_norms(self, norms: dict[str, torch.Tensor]) -> None:
        if self.injector is not None and self.injector.noised:
            self.injector.restore()
        modules = dict(self._model.named_modules())
        missing = [n for n in norms if n not in modules or not is_norm_module(modules[n])]
        if missing:
            raise UserError(f"trained norm(s) {missing[:3]} have no counterpart in the vLLM engine's model "
                            f"({type(self._model).__name__}); module names differ between the trainer and vLLM")
        for name, weight in norms.items():
            target = modules[name].weight
            if target.shape != weight.shape:
                raise UserError(f"norm {name}: trainer shape {tuple(weight.shape)} vs engine {tuple(target.shape)}")
            target.copy_(weight.to(device=target.device, dtype=target.dtype))
        if self.injector is not None:
            # The fp32 master takes the trainer's values directly (not the engine's possibly bf16-rounded copy).
            master = {n: norms.get(n, m.weight) for n, m in self.injector.modules.items()}
            self.injector.resync_master(master)


def _sampled_logprobs(token_ids: list[int], entries: Any) -> list[float]:
    """The sampled token's log-probability at each position of a vLLM completion."""
    if entries is None:
        raise RuntimeError("vLLM returned no logprobs (SamplingParams.logprobs was not honoured)")
    values = []
    for pos, token in enumerate(token_ids):
        entry = entries[pos]
        if token not in entry:
            raise RuntimeError(f"vLLM logprobs at position {pos} lack the sampled token {token}")
        values.append(float(entry[token].logprob))
    return values
