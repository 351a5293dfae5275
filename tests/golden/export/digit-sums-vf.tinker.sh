#!/usr/bin/env bash
# tinker-cookbook v0.5.5 (9dfcc3a2cf44) verifiers_rl recipe, exported by `prime rl export --target tinker`.
# Needs the environment installed beside tinker-cookbook (prime env install ...) and TINKER_API_KEY set.
set -euo pipefail
python -m tinker_cookbook.recipes.verifiers_rl.train \
  model_name=HuggingFaceTB/SmolLM2-135M-Instruct \
  lora_rank=16 \
  renderer_name=None \
  vf_env_id=digit-sums-vf \
  'vf_env_args={}' \
  dataset_seed=0 \
  group_size=8 \
  groups_per_batch=4 \
  learning_rate=0.0002 \
  max_tokens=32 \
  temperature=1.0 \
  kl_penalty_coef=0.0 \
  eval_every=10 \
  save_every=10 \
  max_steps=20 "$@"
