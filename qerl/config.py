"""Training configuration: trl's GRPOConfig plus what QeRL adds (model loading, LoRA, AQN, rollout backend, DAPO
pieces trl lacks). Parsed by ``trl.TrlParser``: YAML from ``configs/`` with ``--config``, overridden on the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from trl import GRPOConfig

from qerl.aqn import DEFAULT_TARGETS, AQNConfig
from qerl.lora import ALL_PROJECTIONS
from qerl.rollout.decode_step import DECODE_LAYOUTS
from qerl.rollout.vllm_backend import FP4_KERNELS

ALGORITHMS = ("grpo", "dapo", "dr_grpo")
# Paper defaults: NVFP4 (and NF4) LoRA at lr 1e-5, BF16 LoRA at 5e-6.
DEFAULT_LR = {"nvfp4": 1e-5, "nf4": 1e-5, "bf16": 5e-6}


@dataclass
class QeRLConfig(GRPOConfig):
    # --- model -------------------------------------------------------------------------------------------------
    model_name_or_path: str | None = field(default=None, metadata={"help": "HF checkpoint dir or hub id (NVFP4 "
                                                                           "checkpoint for --load nvfp4)"})
    load: str = field(default="nvfp4", metadata={"help": "nvfp4 (QeRL) | bf16 (LoRA) | nf4 (QLoRA)"})
    kernel_input_grad_rows: bool = field(default=False, metadata={"help": "nvfp4 on a Hopper GPU: keep the base "
                                                                            "weights' codes a second time in the input "
                                                                            "gradient's 'rows' layout (+0.5 byte per "
                                                                            "weight), faster backward at M <= 1024"})
    model_dtype: str = field(default="auto", metadata={"help": "auto (bf16 on CUDA, fp32 on CPU) | bfloat16 | "
                                                               "float32"})
    # --- LoRA --------------------------------------------------------------------------------------------------
    lora_r: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: list[str] = field(default_factory=lambda: list(ALL_PROJECTIONS))
    train_norms: bool = field(default=False, metadata={"help": "also train the RMSNorm scales"})
    # --- data and rewards -------------------------------------------------------------------------------------
    dataset_name: str = field(default="arith", metadata={"help": "gsm8k | bigmath | dapo17k | arith | local | ..."})
    dataset_file: str | None = field(default=None, metadata={"help": "local file instead of the hub"})
    dataset_split: str = "train"
    dataset_limit: int | None = None
    dataset_difficulty: int = field(default=0, metadata={"help": "synthetic arithmetic difficulty (0-3)"})
    dataset_levels: str | None = field(default=None, metadata={"help": "BigMath level filter, e.g. '3,4,5'"})
    reward_names: list[str] = field(default_factory=lambda: ["accuracy", "format"],
                                    metadata={"help": "accuracy | format | partial_credit"})
    reward_timeout_s: float = 10.0
    # --- algorithm --------------------------------------------------------------------------------------------
    algorithm: str = field(default="grpo", metadata={"help": "grpo | dapo | dr_grpo (sets loss and DAPO pieces)"})
    loss_type: str | None = None  # None: from the algorithm
    dynamic_sampling: bool | None = field(default=None, metadata={"help": "drop all-equal-reward groups and refill "
                                                                          "(default: on for dapo)"})
    dynamic_sampling_max_rounds: int = 4
    overlong_buffer_len: int | None = field(default=None, metadata={"help": "soft overlong penalty window L_cache "
                                                                            "(default: max_completion_length/4 for "
                                                                            "dapo, off otherwise; 0 = off)"})
    overlong_penalty_factor: float = 1.0
    # --- rollout ----------------------------------------------------------------------------------------------
    rollout_backend: str = field(default="auto", metadata={"help": "auto | hf | vllm"})
    rollout_is_correction: bool = field(default=False, metadata={"help": "truncated importance-sampling correction "
                                                                         "for rollout/training logprob mismatch"})
    rollout_is_mode: str = "token_truncate"
    rollout_is_cap: float = 2.0
    log_logprob_mismatch: bool = field(default=True, metadata={"help": "score rollouts with the training model to "
                                                                       "log the mismatch even without correction"})
    hf_static_cache: bool | None = field(default=None, metadata={"help": "hf backend: decode on a static KV cache in "
                                                                          "the project's loop (default: on CUDA; "
                                                                          "false: transformers' generate)"})
    hf_compile: bool | None = field(default=None, metadata={"help": "hf backend: compile the decode step and replay "
                                                                     "it as a CUDA graph (default: on CUDA with the "
                                                                     "static cache)"})
    hf_fused_step: bool | None = field(default=None, metadata={"help": "hf backend: decode with the project's step "
                                                                        "(fused q/k/v and gate/up products, Triton "
                                                                        "decode attention; Qwen2 / Llama families; "
                                                                        "default: when compiling)"})
    hf_decode_layout: str = field(default="auto", metadata={"help": "hf backend, fused step on NVFP4: the code layout "
                                                                    "its products read: pairs (the training modules' "
                                                                    "own) | words (a copy of the codes, +0.5 byte a "
                                                                    "weight, faster on Hopper GPUs: RESULTS run 45) | "
                                                                    "auto (words on a Hopper GPU where the copy takes "
                                                                    "at most a quarter of the free memory)"})
    hf_adapter_a_copies: bool | None = field(default=None, metadata={"help": "hf backend, fused step with a LoRA "
                                                                              "adapter: its shrinks read bf16 copies "
                                                                              "of A, refreshed each rollout (default: "
                                                                              "on; false: peft's fp32 A itself; "
                                                                              "RESULTS runs 48-49)"})
    vllm_max_lora_rank: int | None = None  # default: lora_r
    vllm_enforce_eager: bool = field(default=False, metadata={"help": "no CUDA graphs in the rollout engine"})
    vllm_fp4_kernel: str = field(default="marlin", metadata={"help": "NVFP4 GEMM in the rollout engine: marlin (vLLM's) "
                                                                    "| qerl (this project's Triton kernels) | auto "
                                                                    "(qerl on Hopper GPUs, where it was measured "
                                                                    "faster, else marlin)"})
    vllm_lora_dual_stream: bool = field(default=False, metadata={"help": "run the engine's LoRA kernels on a second "
                                                                         "CUDA stream beside the base GEMMs (vLLM's "
                                                                         "VLLM_LORA_ENABLE_DUAL_STREAM; CUDA only)"})
    vllm_lora_kernel_configs: str = field(default="auto", metadata={"help": "launch configs of the engine's LoRA "
                                                                            "kernels: auto (tuned tables shipped for "
                                                                            "this GPU, else vLLM's) | vllm (vLLM's "
                                                                            "defaults) | a VLLM_TUNED_CONFIG_FOLDER "
                                                                            "folder"})
    vllm_fuse_lora_expand: bool | None = field(default=None, metadata={"help": "add the adapter's expand (and the "
                                                                                 "bias) in the NVFP4 GEMM's epilogue "
                                                                                 "instead of separate kernels; default: "
                                                                                 "on with vllm_fp4_kernel qerl (on the "
                                                                                 "words layout faster at batch 8-64, "
                                                                                 "RESULTS run 11)"})
    # --- AQN --------------------------------------------------------------------------------------------------
    aqn_mode: str = field(default="exponential", metadata={"help": "exponential | constant | off"})
    aqn_sigma_start: float = 1e-2
    aqn_sigma_end: float = 5e-4
    aqn_num_stages: int = 10
    aqn_targets: list[str] = field(default_factory=lambda: list(DEFAULT_TARGETS))
    aqn_noise_training_forward: bool = False
    # --- overridden trl/transformers defaults -------------------------------------------------------------------
    learning_rate: float | None = field(default=None, metadata={"help": "default: 1e-5 (nvfp4/nf4), 5e-6 (bf16)"})
    optim: str = field(default="auto", metadata={"help": "auto: AdamW-8bit (bitsandbytes) on CUDA, AdamW on CPU"})
    report_to: str = field(default="tensorboard", metadata={"help": "tensorboard | wandb | none"})
    # --- run --------------------------------------------------------------------------------------------------
    resume: bool = field(default=False, metadata={"help": "continue from the last checkpoint in output_dir"})
    overwrite_output_dir: bool = field(default=False, metadata={"help": "start over in an output_dir that holds "
                                                                        "checkpoints"})

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm {self.algorithm!r} is not one of {ALGORITHMS}")
        if self.vllm_fp4_kernel not in FP4_KERNELS:
            raise ValueError(f"vllm_fp4_kernel {self.vllm_fp4_kernel!r} is not one of {FP4_KERNELS}")
        if self.hf_decode_layout not in DECODE_LAYOUTS:
            raise ValueError(f"hf_decode_layout {self.hf_decode_layout!r} is not one of {DECODE_LAYOUTS}")
        if self.hf_adapter_a_copies and self.hf_fused_step is False:
            raise ValueError("hf_adapter_a_copies are read by the hf backend's fused decode step: drop --hf_fused_step "
                             "false or --hf_adapter_a_copies")
        if self.kernel_input_grad_rows and self.load != "nvfp4":
            raise ValueError("kernel_input_grad_rows keeps a copy of an NVFP4 base's codes: use it with --load nvfp4 "
                             "or drop it")
        if self.vllm_fuse_lora_expand and self.load == "nvfp4" and self.vllm_fp4_kernel == "marlin":
            raise ValueError("vllm_fuse_lora_expand adds the adapter's expand in this project's NVFP4 GEMM: it needs "
                             "--vllm_fp4_kernel qerl or auto (Marlin is vLLM's kernel and has no such epilogue)")
        if self.learning_rate is None:
            self.learning_rate = DEFAULT_LR.get(self.load, 1e-5)
        preset = {"grpo": "grpo", "dapo": "dapo", "dr_grpo": "dr_grpo"}[self.algorithm]
        if self.loss_type is None:
            self.loss_type = preset
        if self.algorithm == "dapo":
            if self.epsilon_high is None:
                self.epsilon_high = 0.28  # clip-higher
            self.mask_truncated_completions = True
            if self.dynamic_sampling is None:
                self.dynamic_sampling = True
            if self.overlong_buffer_len is None:
                self.overlong_buffer_len = max(1, self.max_completion_length // 4)
        if self.algorithm == "dr_grpo":
            self.scale_rewards = "none"
        self.dynamic_sampling = bool(self.dynamic_sampling)
        self.overlong_buffer_len = self.overlong_buffer_len or 0
        if self.model_dtype == "auto":
            self.model_dtype = "bfloat16" if torch.cuda.is_available() else "float32"
        cpu = not torch.cuda.is_available()
        self.use_cpu = self.use_cpu or cpu
        if cpu or self.model_dtype == "float32":
            self.bf16 = False
        if self.optim in (None, "auto"):
            self.optim = "adamw_bnb_8bit" if not cpu and _has_bnb() else "adamw_torch"
        if self.vllm_max_lora_rank is None:
            self.vllm_max_lora_rank = self.lora_r
        super().__post_init__()

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.model_dtype)

    def aqn_config(self) -> AQNConfig:
        return AQNConfig(
            mode=self.aqn_mode,
            sigma_start=self.aqn_sigma_start,
            sigma_end=self.aqn_sigma_end,
            num_stages=self.aqn_num_stages,
            targets=tuple(self.aqn_targets),
            noise_training_forward=self.aqn_noise_training_forward,
            seed=self.seed,
        )


def _has_bnb() -> bool:
    import importlib.util

    return importlib.util.find_spec("bitsandbytes") is not None
