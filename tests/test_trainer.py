"""The RL trainer on a tiny NVFP4 Qwen2: loss pieces against hand computation, dynamic sampling, overlong shaping,
only adapters change, resume reproduces an uninterrupted run, one real step on SmolLM2, and clear errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from qerl.config import QeRLConfig
from qerl.train import _scaled, build_trainer, main, run
from qerl.trainer import informative_groups, merge_batches

pytestmark = pytest.mark.quantize_env


def token_sum_reward(completions, completion_ids, **kwargs):
    """Varies between sampled completions of one prompt, so every group carries a learning signal."""
    return [float(sum(ids) % 11) for ids in completion_ids]


def make_args(tmp_path, model_dir, **overrides) -> QeRLConfig:
    base = dict(
        output_dir=str(tmp_path / "run"), model_name_or_path=str(model_dir), max_steps=2,
        per_device_train_batch_size=4, num_generations=4, max_completion_length=8, logging_steps=1,
        report_to="none", save_steps=1, seed=0, dataset_name="arith", dataset_limit=16, aqn_num_stages=3,
        learning_rate=1e-2, lr_scheduler_type="constant", disable_tqdm=True,
    )
    base.update(overrides)
    return QeRLConfig(**base)


def test_loss_pieces_clip_higher_and_token_level_normalisation(tmp_path, tiny_qwen2_nvfp4_dir):
    args = make_args(tmp_path, tiny_qwen2_nvfp4_dir, algorithm="dapo", rollout_is_correction=False)
    trainer = build_trainer(args, reward_funcs=[token_sum_reward])
    assert (trainer.loss_type, trainer.epsilon_low, trainer.epsilon_high) == ("dapo", 0.2, 0.28)
    old = torch.zeros(2, 3)
    new = torch.log(torch.tensor([[1.5, 1.1, 0.5], [0.5, 1.5, 1.0]]))  # ratios exp(new - old)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([1.0, -1.0])
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (new.clone().requires_grad_(True),
                                                                  torch.ones(2, 3), None)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    inputs = dict(prompt_ids=torch.ones(2, 2, dtype=torch.long), prompt_mask=torch.ones(2, 2, dtype=torch.long),
                  completion_ids=torch.ones(2, 3, dtype=torch.long), completion_mask=mask, advantages=adv,
                  old_per_token_logps=old, num_items_in_batch=mask.sum(),
                  importance_sampling_ratio=torch.ones(2, 3))
    loss = trainer._compute_loss(trainer.model, inputs)

    def clipped(r, a):  # -min(r A, clip(r, 1 - 0.2, 1 + 0.28) A)
        return -min(r * a, min(max(r, 0.8), 1.28) * a)

    per_token = [[clipped(1.5, 1), clipped(1.1, 1), clipped(0.5, 1)], [clipped(0.5, -1), clipped(1.5, -1), 0.0]]
    assert per_token[0][0] == -1.28  # clip-higher: 1.5 is cut at 1.28, not at 1.2
    assert per_token[1][0] == 0.8  # the low side stays at 1 - 0.2
    want = sum(map(sum, per_token)) / 5  # token-level: one mean over all 5 tokens of the batch
    assert loss.item() == pytest.approx(want, rel=1e-6)
    grpo = sum(sum(row) / n for row, n in zip(per_token, (3, 2))) / 2  # per-sequence means, then the batch mean
    assert not math.isclose(want, grpo)


def test_importance_sampling_correction_is_applied_only_when_asked(tmp_path, tiny_qwen2_nvfp4_dir):
    on = build_trainer(make_args(tmp_path, tiny_qwen2_nvfp4_dir, rollout_is_correction=True, rollout_is_cap=2.0),
                       reward_funcs=[token_sum_reward])
    assert on.use_vllm and on.vllm_importance_sampling_mode == "token_truncate"
    assert on.vllm_importance_sampling_clip_max == 2.0
    ratio = torch.tensor([[0.5, 3.0]])
    assert torch.equal(on._neutralise_is({"importance_sampling_ratio": ratio})["importance_sampling_ratio"], ratio)
    off = build_trainer(make_args(tmp_path, tiny_qwen2_nvfp4_dir, rollout_is_correction=False),
                        reward_funcs=[token_sum_reward])
    assert torch.equal(off._neutralise_is({"importance_sampling_ratio": ratio})["importance_sampling_ratio"],
                       torch.ones_like(ratio))


def test_merge_batches_repads_and_selects_rows():
    a = dict(prompt_ids=torch.tensor([[0, 5], [6, 7]]), prompt_mask=torch.tensor([[0, 1], [1, 1]]),
             completion_ids=torch.tensor([[1, 2], [3, 0]]), completion_mask=torch.tensor([[1, 1], [1, 0]]),
             advantages=torch.tensor([1.0, -1.0]), num_items_in_batch=torch.tensor(3))
    b = dict(prompt_ids=torch.tensor([[9, 9, 9]]), prompt_mask=torch.tensor([[1, 1, 1]]),
             completion_ids=torch.tensor([[4, 4, 4]]), completion_mask=torch.tensor([[1, 1, 1]]),
             advantages=torch.tensor([0.5]), num_items_in_batch=torch.tensor(3))
    m = merge_batches([(a, [1]), (b, [0])], pad_token_id=0)
    assert m["prompt_ids"].tolist() == [[0, 6, 7], [9, 9, 9]]  # prompts left-padded
    assert m["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1]]
    assert m["completion_ids"].tolist() == [[3, 0, 0], [4, 4, 4]]  # completions right-padded
    assert m["completion_mask"].tolist() == [[1, 0, 0], [1, 1, 1]]
    assert m["advantages"].tolist() == [-1.0, 0.5]
    assert informative_groups(torch.tensor([0.0, 0.0, 1.0, -1.0]), 2).tolist() == [False, True]


def test_dynamic_sampling_refills_with_informative_groups(tmp_path, tiny_qwen2_nvfp4_dir):
    args = make_args(tmp_path, tiny_qwen2_nvfp4_dir, algorithm="dapo", dataset_limit=64)
    calls = []

    def half_flat_reward(completions, completion_ids, answer, **kwargs):
        # prompts with an even gold answer get a flat reward (an uninformative group), odd ones a varying one
        calls.append(len(completions))
        return [1.0 if int(a) % 2 == 0 else float(sum(c) % 11) for a, c in zip(answer, completion_ids)]

    trainer = build_trainer(args, reward_funcs=[half_flat_reward])
    trainer.model.train()
    rows = [trainer.train_dataset[i] for i in range(2)]
    even = [r for r in (trainer.train_dataset[i] for i in range(64)) if int(r["answer"]) % 2 == 0][:1]
    odd = [r for r in (trainer.train_dataset[i] for i in range(64)) if int(r["answer"]) % 2 == 1][:1]
    rows = even + odd
    inputs = [dict(r) for r in rows for _ in range(4)]
    out = trainer._generate_and_score_completions(inputs)
    assert len(out["advantages"]) == 8  # batch size preserved
    assert informative_groups(out["advantages"], 4).all()  # the flat group was replaced by a drawn one
    assert len(calls) >= 2  # at least one resampling round
    assert out["num_items_in_batch"] == out["completion_mask"].sum()
    frac = trainer._metrics["train"]["dynamic_sampling/informative_fraction"]
    assert frac == [0.5]


def test_overlong_shaping_values():
    from trl.rewards import get_soft_overlong_punishment

    fn = _scaled(get_soft_overlong_punishment(max_completion_len=10, soft_punish_cache=4), 0.5)
    got = fn(completions=None, completion_ids=[[1] * 5, [1] * 6, [1] * 7, [1] * 10, [1] * 12])
    assert got == pytest.approx([0.0, 0.0, -0.125, -0.5, -0.5])


def test_two_steps_change_only_trainable_params(tmp_path, tiny_qwen2_nvfp4_dir):
    args = make_args(tmp_path, tiny_qwen2_nvfp4_dir, save_strategy="no")
    trainer = build_trainer(args, reward_funcs=[token_sum_reward])
    model = trainer.model
    before = {n: t.detach().clone() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    after = {n: t.detach() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    changed = {n for n in before if not torch.equal(before[n].float(), after[n].float())}
    assert changed and changed <= trainable
    assert {n for n in changed if "lora_B" in n}  # B starts at zero and must have moved
    norm = model.base_model.model.model.layers[0].input_layernorm.weight
    assert torch.equal(norm.float(), before["base_model.model.model.layers.0.input_layernorm.weight"].float())
    logged = trainer.state.log_history[-2]
    for key in ("reward", "entropy", "aqn/sigma", "aqn/modules", "rollout/tokens_per_second",
                "sampling/sampling_logp_difference/mean", "clip_ratio/region_mean"):
        assert key in logged, key


def _adapter(path):
    return load_file(str(path / "adapter_model.safetensors"))


def test_resume_reproduces_the_uninterrupted_run(tmp_path, tiny_qwen2_nvfp4_dir):
    from transformers import TrainerCallback

    straight = make_args(tmp_path / "a", tiny_qwen2_nvfp4_dir, max_steps=3, aqn_mode="constant",
                         aqn_sigma_start=0.02)
    run_a = build_trainer(straight, reward_funcs=[token_sum_reward])
    run_a.train()

    class StopAfter(TrainerCallback):  # a run killed after its step-2 checkpoint
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                control.should_training_stop = True

    first = make_args(tmp_path / "b", tiny_qwen2_nvfp4_dir, max_steps=3, aqn_mode="constant", aqn_sigma_start=0.02)
    part = build_trainer(first, reward_funcs=[token_sum_reward])
    part.add_callback(StopAfter())
    part.train()
    assert (tmp_path / "b" / "run" / "checkpoint-2" / "aqn_state.pt").is_file()
    assert not list((tmp_path / "b" / "run").glob(".staging*"))
    resumed = build_trainer(make_args(tmp_path / "b", tiny_qwen2_nvfp4_dir, max_steps=3, aqn_mode="constant",
                                      aqn_sigma_start=0.02, resume=True),
                            reward_funcs=[token_sum_reward])
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "run" / "checkpoint-2"))
    a = _adapter(tmp_path / "a" / "run" / "checkpoint-3")
    b = _adapter(tmp_path / "b" / "run" / "checkpoint-3")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    # and the run really moved between checkpoints, so the comparison is not vacuous
    c2 = _adapter(tmp_path / "b" / "run" / "checkpoint-2")
    assert any(not torch.equal(c2[k], b[k]) for k in b)


def test_run_refuses_existing_checkpoints_without_resume(tmp_path, tiny_qwen2_nvfp4_dir):
    from qerl.errors import UserError

    ckpt = tmp_path / "run" / "checkpoint-1"
    ckpt.mkdir(parents=True)
    with pytest.raises(UserError, match="--resume"):
        run(make_args(tmp_path, tiny_qwen2_nvfp4_dir))


def test_one_real_step_on_smollm2(tmp_path, smollm2_nvfp4_dir):
    args = make_args(tmp_path, smollm2_nvfp4_dir, max_steps=1, per_device_train_batch_size=4, num_generations=4,
                     max_completion_length=16, save_strategy="no", learning_rate=1e-5,
                     reward_names=["partial_credit", "format"])
    trainer = build_trainer(args)
    trainer.train()
    logs = trainer.state.log_history[0]
    assert logs["completions/mean_length"] > 0 and math.isfinite(logs["loss"])
    assert logs["aqn/modules"] == 60  # 30 layers x (input, post-attention) norms of the real model


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dataset_name", "no_such_task"], "no_such_task"),
        (["--model_name_or_path", "/nonexistent/model"], "does not exist"),
        (["--algorithm", "ppo"], "algorithm"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(tmp_path, tiny_qwen2_nvfp4_dir, capsys, extra, message):
    argv = ["--model_name_or_path", str(tiny_qwen2_nvfp4_dir), "--output_dir", str(tmp_path / "o"),
            "--report_to", "none", "--max_steps", "1", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and message in err[-1]


def test_empty_dataset_file_is_a_clear_error(tmp_path, tiny_qwen2_nvfp4_dir, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    argv = ["--model_name_or_path", str(tiny_qwen2_nvfp4_dir), "--output_dir", str(tmp_path / "o"),
            "--report_to", "none", "--dataset_name", "local", "--dataset_file", str(empty)]
    assert main(argv) == 2
    assert "empty" in capsys.readouterr().err


def test_crashing_reward_gives_zero_not_a_crash(tmp_path, tiny_qwen2_nvfp4_dir):
    from qerl.rewards import reset_reward_failure_counts, safe_reward

    def broken(completions, **kwargs):
        raise RuntimeError("reward server down")

    reset_reward_failure_counts()
    trainer = build_trainer(make_args(tmp_path, tiny_qwen2_nvfp4_dir, max_steps=1, save_strategy="no"),
                            reward_funcs=[safe_reward(broken), token_sum_reward])
    trainer.train()
    logs = trainer.state.log_history[0]
    assert logs["rewards/broken/mean"] == 0.0
    assert logs["rewards/failures_total"] >= 1


def test_trained_norms_move_and_are_checkpointed(tmp_path, tiny_qwen2_nvfp4_dir):
    args = make_args(tmp_path, tiny_qwen2_nvfp4_dir, max_steps=1, train_norms=True, save_steps=1)
    trainer = build_trainer(args, reward_funcs=[token_sum_reward])
    norm = trainer.model.base_model.model.model.layers[0].input_layernorm.weight
    before = norm.detach().clone()
    assert norm.requires_grad and len(trainer.norm_param_names) == 2 * 2 + 1  # 2 per layer + the final norm
    trainer.train()
    assert not torch.equal(norm.detach(), before)  # trained (and AQN restored the clean, trained value)
    saved = load_file(str(tmp_path / "run" / "checkpoint-1" / "norms.safetensors"))
    assert torch.equal(saved["model.layers.0.input_layernorm.weight"], norm.detach().cpu())


def test_gradient_checkpointing_trains_adapters(tmp_path, tiny_qwen2_nvfp4_dir):
    args = make_args(tmp_path, tiny_qwen2_nvfp4_dir, max_steps=1, save_strategy="no", gradient_checkpointing=True)
    trainer = build_trainer(args, reward_funcs=[token_sum_reward])
    b = trainer.model.base_model.model.model.layers[0].mlp.down_proj.lora_B["default"].weight
    before = b.detach().clone()
    trainer.train()
    assert not torch.equal(b.detach(), before)


class _StubTrainer:
    """What save_final uses of a trl trainer, for one process of a data-parallel run."""

    def __init__(self, should_save: bool):
        from types import SimpleNamespace

        self.args = SimpleNamespace(should_save=should_save)
        self.accelerator = SimpleNamespace(wait_for_everyone=lambda: self.calls.append("barrier"))
        self.state = SimpleNamespace(save_to_json=lambda path: Path(path).write_text('{"log_history": []}'))
        self.calls: list[str] = []

    def save_model(self, directory: str) -> None:
        self.calls.append("save_model")
        if self.args.should_save:  # as transformers' Trainer: only the saving process writes
            Path(directory).mkdir(parents=True, exist_ok=True)
            (Path(directory) / "adapter_model.safetensors").write_text("weights")


def test_save_final_writes_only_from_the_saving_process(tmp_path):
    from qerl.train import save_final

    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "old.txt").write_text("previous run")
    other = _StubTrainer(should_save=False)
    assert save_final(other, tmp_path) == tmp_path / "final"
    assert other.calls == ["barrier", "save_model", "barrier"]  # it joins the collective steps, touches nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"] and (tmp_path / "final" / "old.txt").exists()
    main = _StubTrainer(should_save=True)
    save_final(main, tmp_path)
    assert sorted(p.name for p in (tmp_path / "final").iterdir()) == ["adapter_model.safetensors",
                                                                       "trainer_state.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["final"]  # no staging folder left
