#!/usr/bin/env bash
# SkyRL (a9564572eb8e) verifiers integration, exported by `prime rl export --target skyrl`.
# Run from a SkyRL checkout with the environment installed (uv run examples/train_integrations/verifiers/install_environment.py digit-sums-vf).
set -euo pipefail
ENV_ID=digit-sums-vf
DATA_DIR="${DATA_DIR:-$HOME/data/$ENV_ID}"
# 1) the environment's rows as Parquet
uv run --isolated --with verifiers python examples/train_integrations/verifiers/prepare_dataset.py --env_id digit-sums-vf --output_dir "$DATA_DIR"
# 2) training
uv run --isolated --with verifiers --extra fsdp -m examples.train_integrations.verifiers.entrypoints.main_verifiers \
  "data.train_data=['$DATA_DIR/train.parquet']" \
  "data.val_data=['$DATA_DIR/validation.parquet']" \
  environment.env_class=digit-sums-vf \
  trainer.policy.model.path=HuggingFaceTB/SmolLM2-135M-Instruct \
  trainer.policy.model.lora.rank=16 \
  trainer.policy.model.lora.alpha=32 \
  trainer.policy.model.lora.dropout=0.0 \
  trainer.policy.optimizer_config.lr=0.0002 \
  trainer.policy.optimizer_config.weight_decay=0.0 \
  trainer.policy.optimizer_config.max_grad_norm=1.0 \
  trainer.policy.optimizer_config.num_warmup_steps=0 \
  trainer.policy.optimizer_config.scheduler=constant_with_warmup \
  trainer.algorithm.advantage_estimator=grpo \
  trainer.algorithm.grpo_norm_by_std=false \
  trainer.algorithm.use_kl_loss=false \
  trainer.algorithm.policy_loss_type=importance_sampling \
  trainer.algorithm.loss_reduction=token_mean \
  trainer.algorithm.off_policy_correction.token_mask_is_threshold_low=0.125 \
  trainer.algorithm.off_policy_correction.token_mask_is_threshold_high=8.0 \
  trainer.algorithm.dynamic_sampling.type=filter \
  trainer.algorithm.dynamic_sampling.max_sample_batches=4 \
  generator.n_samples_per_prompt=8 \
  generator.sampling_params.max_generate_length=32 \
  generator.sampling_params.temperature=1.0 \
  generator.sampling_params.top_p=1.0 \
  generator.max_input_length=2016 \
  generator.eval_n_samples_per_prompt=1 \
  trainer.max_prompt_length=2016 \
  trainer.train_batch_size=4 \
  trainer.policy_mini_batch_size=4 \
  trainer.max_training_steps=20 \
  trainer.epochs=20 \
  trainer.seed=0 \
  trainer.ckpt_interval=10 \
  trainer.max_ckpts_to_keep=2 \
  trainer.hf_save_interval=10 \
  trainer.eval_interval=10 \
  trainer.eval_before_train=false \
  trainer.logger=console "$@"
