"""Settings that are out of range or meaningless stop every command with exit code 2 and one line naming the
setting (with its file and line when it comes from YAML) and what is allowed, before anything is written:
the second battery, one case per setting or option, each labelled with the rule it checks (RULES)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_bad_input import hb_row, one_error_line, snapshot, write_rows
from typer.testing import CliRunner

from elical.cli import app
from elical.world import default_lm_path

WORLD_LM = str(default_lm_path())

RULES = {
    "range": "a number setting lies in the range declared with its field (elical.core.inputs.Range); NaN, infinity "
             "and booleans are no numbers",
    "seed": "a seed is an integer from 0 to 2**32 - 1 (numpy's range; torch takes more)",
    "list": "a run's methods, budgets and seeds (and honesty methods, verbal kinds) hold values, each once "
            "(elical.core.inputs.Distinct)",
    "pool": "a label budget is at most the training questions there are, checked before annotation or training",
    "gate": "a honesty or retrieval gate names a model the run's plan trains, checked before anything is written",
    "out": "--out lies where this process can write: not under a file, not in a read-only folder",
    "model": "--model (or a run's model) is a model: an alias, a .gguf file, a folder with config.json or a "
             "cached hub name; a data file or another folder is refused",
}


# YAML files of the battery, by file name; {in} is the input folder. A comment first, so the bad setting's
# line is not line 1.
YAML = {
    "train_bad.yaml": "# trainer settings\nlr: 1.0e-4\nmax_grad_norm: -1\n",
    "annotate_temperature.yaml": "# decoding\ntemperature: 0\n",
    "annotate_section.yaml": "annotate:\n  k: 4\n  top_p: 1.5\n",
    "annotate_top_k.yaml": "top_k: -1\n",
    "annotate_retries.yaml": "retries: -2\n",
    "annotate_judge.yaml": "judges:\n  embedding_threshold: 1.5\n",
    "annotate_judge_batch.yaml": "judges: {batch_size: 0}\n",
    "annotate_vllm.yaml": "backend: vllm\nvllm:\n  gpu_memory_utilization: 0\n",
    "annotate_ray.yaml": "ray:\n  max_retries: -1\n",
    "honesty_split.yaml": "method: confidence-num\nnum_split: 2\n",
    "honesty_level.yaml": "verb_levels:\n  - {up_to: 0.5, text: 'maybe '}\n  - {up_to: 1.5, text: 'sure '}\n",
    "honesty_dropout.yaml": "tune:\n  lora_dropout: 1.0\n",
    "world_lm.yaml": "lm:\n  lr: 0\n",
    "run_seeds_empty.yaml": "# nothing to train\ntrain:\n  seeds: []\n",
    "run_methods_empty.yaml": "train:\n  methods: []\n",
    "run_budgets_empty.yaml": "train: {budgets: []}\n",
    "run_seeds_twice.yaml": "train:\n  seeds: [0, 1, 0]\n",
    "run_methods_twice.yaml": "train:\n  methods: [elical, cal-only, elical]\n",
    "run_budgets_twice.yaml": "train:\n  budgets: [50, all, 50]\n",
    "run_budget_word.yaml": "train:\n  budgets: [50, most]\n",
    "run_seed_big.yaml": "train:\n  seeds: [4294967296]\n",
    "run_threads_0.yaml": "torch_threads: 0\n",
    "run_threads_neg.yaml": "torch_threads: -1\n",
    "run_grad_norm.yaml": "train:\n  settings:\n    max_grad_norm: -1\n",
    "run_warmup.yaml": "train:\n  settings:\n    warmup_ratio: 5\n",
    "run_workers.yaml": "train:\n  workers: 0\n",
    "run_passes.yaml": "train:\n  stage2_passes: 0\n",
    "run_max_train.yaml": "questions:\n  max_train: 0\n",
    "run_question_seed.yaml": "questions:\n  seed: -1\n",
    "run_level.yaml": "evaluate:\n  level: 1\n",
    "run_noise.yaml": "world:\n  statement_noise: 2\n",
    "run_letters.yaml": "world:\n  mc_options: 30\n",
    "run_contested.yaml": "world:\n  contested: {birth_city: 1.5}\n",
    "run_annotate_k.yaml": "annotate:\n  k: -1\n",
    "run_honesty_lr.yaml": "honesty:\n  settings:\n    tune: {learning_rate: 0}\n",
    "run_honesty_methods.yaml": "honesty:\n  methods: [sft, sft]\n",
    "run_retrieval_k.yaml": "retrieval:\n  k: 0\n",
    "run_retrieval_rate.yaml": "retrieval:\n  max_retrieval_rate: 0\n",
    "run_population.yaml": "subject: geo\ngeo:\n  min_city_population: -1\n",
    "run_eval_share.yaml": "qa:\n  eval_share: 0\n",
    "run_reliability.yaml": "reliability_budget: 0\n",
    "run_big_budget.yaml": "honesty: null\nquestions: {max_train: 20, max_eval_per_dataset: 5}\n"
                           "train: {budgets: [50, all]}\n",
    "run_gate_budget.yaml": "train: {budgets: [50, 150]}\nhonesty: {budget: 500}\n",
    "run_gate_method.yaml": "train: {methods: [eli-only, cal-only]}\nhonesty: {budget: 50}\n",
    "run_qa_data_model.yaml": "subject: qa\nmodel: {in}/qa.jsonl\nhonesty: null\n"
                              "qa: {records: [{in}/nq_train.jsonl, {in}/nq_test.jsonl]}\n",
}


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Tiny inputs and the YAML files above in ``tmp_path/in``, and ``in/read_only``, a folder no one may write
    in (as root, who may write anywhere, os.access answers for it as for another user)."""
    import pandas as pd

    d = tmp_path / "in"
    d.mkdir()
    write_rows(d / "qa.jsonl", [{"question": "q?", "answer": ["a"]}])
    write_rows(d / "nq_train.jsonl", [hb_row(f"q{i}?", greedy_correctness=i % 2) for i in range(4)])
    write_rows(d / "nq_test.jsonl", [hb_row(f"t{i}?", greedy_correctness=i % 2) for i in range(4)])
    pd.DataFrame({"question": ["q?"], "answer": ["a"]}).to_parquet(d / "data.parquet")
    (d / "existing").write_text("keep me")
    (d / "not_a_model").mkdir()
    (d / "not_a_model" / "weights.txt").write_text("no config.json here")
    for name, text in YAML.items():
        (d / name).write_text(text.replace("{in}", str(d)))
    read_only = d / "read_only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.geteuid() == 0:
        access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
            not mode & os.W_OK and access(path, mode, **kw)) if Path(path) == read_only else access(path, mode, **kw))
    yield d
    read_only.chmod(0o755)


# (rule, case, command line with {in} = the input folder, {out} = the output folder, {lm} = the packaged world
# LM, words the one line must hold)
CASES = [
    # trainer settings, from --set (YAML values), --budget, --seed or a YAML file
    ("range", "train-grad-norm-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set max_grad_norm=-1",
     ["max_grad_norm: must be at least 0 (got -1.0)", "0: no clipping"]),
    ("range", "train-warmup-5", "train {in}/nq_train.jsonl --model {lm} --out {out} --set warmup_ratio=5",
     ["warmup_ratio: must be at least 0 and at most 1 (got 5.0)"]),
    ("range", "train-weight-decay-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set weight_decay=-3",
     ["weight_decay: must be at least 0 (got -3.0)"]),
    ("range", "train-lr-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lr=0",
     ["lr: must be greater than 0 (got 0.0)"]),
    ("range", "train-lr-infinite", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lr=.inf",
     ["lr: must be greater than 0 (got inf)"]),
    ("range", "train-lr-stage2-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lr_stage2=-1e-4",
     ["lr_stage2: must be greater than 0", "null: lr"]),
    ("range", "train-lr-head-nan", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lr_head_only=.nan",
     ["lr_head_only: must be greater than 0 (got nan)"]),
    ("range", "train-epochs2-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set epochs_stage2=0",
     ["epochs_stage2: must be at least 1 (got 0)"]),
    ("range", "train-epochs-boolean", "train {in}/nq_train.jsonl --model {lm} --out {out} --set epochs_stage1=true",
     ["epochs_stage1: must be a number, not true"]),
    ("range", "train-patience-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set patience=0",
     ["patience: must be at least 1 (got 0)"]),
    ("range", "train-batch-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set batch_size=0",
     ["batch_size: must be at least 1 (got 0)"]),
    ("range", "train-micro-batch-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set micro_batch_size=-4",
     ["micro_batch_size: must be at least 1 (got -4)"]),
    ("range", "train-tokens-per-batch-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set tokens_per_batch=0",
     ["tokens_per_batch: must be at least 1 (got 0)"]),
    ("range", "train-lora-rank-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lora_r=0",
     ["lora_r: must be at least 1 (got 0)"]),
    ("range", "train-lora-alpha-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lora_alpha=0",
     ["lora_alpha: must be at least 1 (got 0)"]),
    ("range", "train-dropout-1", "train {in}/nq_train.jsonl --model {lm} --out {out} --set lora_dropout=1",
     ["lora_dropout: must be at least 0 and less than 1 (got 1.0)"]),
    ("range", "train-val-fraction-1", "train {in}/nq_train.jsonl --model {lm} --out {out} --set val_fraction=1",
     ["val_fraction: must be greater than 0 and less than 1 (got 1.0)"]),
    ("range", "train-selection-z-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set selection_z=-1",
     ["selection_z: must be at least 0 (got -1.0)"]),
    ("range", "train-save-steps-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --set save_steps=-1",
     ["save_steps: must be at least 0 (got -1)", "0: at epoch ends only"]),
    ("range", "train-max-length-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --set max_length=0",
     ["max_length: must be at least 1 (got 0)"]),
    ("range", "train-budget-0", "train {in}/nq_train.jsonl --model {lm} --out {out} --mode cal-only --budget 0",
     ["budget: must be at least 1 (got 0)", "null: all"]),
    ("range", "train-yaml-file-line", "train {in}/nq_train.jsonl --model {lm} --out {out} -c {in}/train_bad.yaml",
     ["train_bad.yaml: line 3: max_grad_norm: must be at least 0 (got -1.0)"]),
    ("seed", "train-seed-negative", "train {in}/nq_train.jsonl --model {lm} --out {out} --seed -1",
     ["seed: must be at least 0 and at most 4294967295 (got -1)"]),
    ("seed", "train-seed-2-70", "train {in}/nq_train.jsonl --model {lm} --out {out} --seed 1180591620717411303424",
     ["seed: must be at least 0 and at most 4294967295 (got 1180591620717411303424)"]),
    ("pool", "train-budget-over-records", "train {in}/nq_train.jsonl --model {lm} --out {out} --mode cal-only --budget 100",
     ["budget 100 exceeds the 4 records"]),
    # annotate settings, from options or YAML
    ("range", "annotate-k-negative", "annotate {in}/qa.jsonl --model {lm} --out {out} --k -1",
     ["k: must be at least 0 (got -1)", "0: greedy answers only"]),
    ("range", "annotate-max-new-tokens-0", "annotate {in}/qa.jsonl --model {lm} --out {out} --max-new-tokens 0",
     ["max_new_tokens: must be at least 1 (got 0)"]),
    ("range", "annotate-repetition-penalty-0", "annotate {in}/qa.jsonl --model {lm} --out {out} --repetition-penalty 0",
     ["repetition_penalty: must be greater than 0 (got 0.0)"]),
    ("range", "annotate-concurrency-0", "annotate {in}/qa.jsonl --model {lm} --out {out} --concurrency 0",
     ["concurrency: must be at least 1 (got 0)"]),
    ("range", "annotate-connect-timeout-0", "annotate {in}/qa.jsonl --model {lm} --out {out} --connect-timeout 0",
     ["connect_timeout: must be greater than 0 (got 0.0)"]),
    ("range", "annotate-read-timeout-negative", "annotate {in}/qa.jsonl --model {lm} --out {out} --read-timeout -5",
     ["read_timeout: must be greater than 0 (got -5.0)"]),
    ("range", "annotate-batch-0", "annotate {in}/qa.jsonl --model {lm} --out {out} --batch-size 0",
     ["batch_size: must be at least 1 (got 0)"]),
    ("range", "annotate-temperature-0-yaml", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_temperature.yaml",
     ["annotate_temperature.yaml: line 2: temperature: must be greater than 0 (got 0.0)"]),
    ("range", "annotate-top-p-section-yaml", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_section.yaml",
     ["annotate_section.yaml: line 3: top_p: must be greater than 0 and at most 1 (got 1.5)"]),
    ("range", "annotate-top-k-negative", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_top_k.yaml",
     ["annotate_top_k.yaml: line 1: top_k: must be at least 0 (got -1)", "0: no top-k cut"]),
    ("range", "annotate-retries-negative", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_retries.yaml",
     ["line 1: retries: must be at least 0 (got -2)"]),
    ("range", "annotate-judge-threshold", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_judge.yaml",
     ["line 2: judges.embedding_threshold: must be at least 0 and at most 1 (got 1.5)"]),
    ("range", "annotate-judge-batch-0", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_judge_batch.yaml",
     ["line 1: judges.batch_size: must be at least 1 (got 0)"]),
    ("range", "annotate-vllm-memory-0", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_vllm.yaml",
     ["line 3: vllm.gpu_memory_utilization: must be greater than 0 and at most 1 (got 0.0)"]),
    ("range", "annotate-ray-retries", "annotate {in}/qa.jsonl --model {lm} --out {out} -c {in}/annotate_ray.yaml",
     ["line 2: ray.max_retries: must be at least 0 (got -1)"]),
    ("list", "annotate-verbal-twice", "annotate {in}/qa.jsonl --model {lm} --out {out} --verbal verbal-0 --verbal verbal0",
     ["verbal: lists 'verbal-0' more than once"]),
    ("seed", "annotate-seed-2-70", "annotate {in}/qa.jsonl --model {lm} --out {out} --seed 1180591620717411303424",
     ["seed: must be at least 0 and at most 4294967295"]),
    ("seed", "annotate-seed-negative", "annotate {in}/qa.jsonl --model {lm} --out {out} --seed -7",
     ["seed: must be at least 0 and at most 4294967295 (got -7)"]),
    # evaluation settings
    ("range", "evaluate-resamples-huge", "evaluate {in}/nq_test.jsonl --out {out} --resamples 1000000",
     ["n_resamples: must be at least 1 and at most 100000 (got 1000000)"]),
    ("range", "evaluate-alignment-repeats-0", "evaluate {in}/nq_test.jsonl --out {out} --alignment-repeats 0",
     ["alignment_repeats: must be at least 1 and at most 10000 (got 0)"]),
    ("seed", "evaluate-seed-negative", "evaluate {in}/nq_test.jsonl --out {out} --seed -1",
     ["seed: must be at least 0 and at most 4294967295 (got -1)"]),
    # honesty settings
    ("range", "honesty-lr-0", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} --lr 0",
     ["tune.learning_rate: must be greater than 0 (got 0.0)"]),
    ("range", "honesty-epochs-0", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} --epochs 0",
     ["tune.epochs: must be greater than 0 (got 0.0)"]),
    ("range", "honesty-batch-0", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} --batch-size 0",
     ["tune.batch_size: must be at least 1 (got 0)"]),
    ("range", "honesty-num-split-yaml", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} -c {in}/honesty_split.yaml",
     ["honesty_split.yaml: line 2: num_split: must be at least 0 and at most 1 (got 2.0)"]),
    ("range", "honesty-verb-level-yaml", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} -c {in}/honesty_level.yaml",
     ["line 3: verb_levels.1.up_to: must be at least 0 and at most 1 (got 1.5)"]),
    ("range", "honesty-dropout-yaml", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} -c {in}/honesty_dropout.yaml",
     ["line 2: tune.lora_dropout: must be at least 0 and less than 1 (got 1.0)"]),
    ("seed", "honesty-seed-negative", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {out} --seed -1",
     ["seed: must be at least 0 and at most 4294967295 (got -1)"]),
    # the synthetic world and its LM
    ("seed", "world-generate-seed-negative", "world generate --out {out} --seed -1",
     ["--seed: seed: must be at least 0 and at most 4294967295 (got -1)"]),
    ("range", "world-lm-lr-0", "world train-lm --out {out} -c {in}/world_lm.yaml",
     ["world_lm.yaml: lm: line 2: lr: must be greater than 0 (got 0.0)"]),
    # run configs: lists that plan nothing or the same work twice
    ("list", "run-seeds-empty", "run --out {out} -c {in}/run_seeds_empty.yaml",
     ["run_seeds_empty.yaml (over preset 'default'): line 3: train.seeds: must list at least 1 value (got [])"]),
    ("list", "run-methods-empty", "run --out {out} -c {in}/run_methods_empty.yaml",
     ["line 2: train.methods: must list at least 1 value (got [])"]),
    ("list", "run-budgets-empty", "run --out {out} -c {in}/run_budgets_empty.yaml",
     ["line 1: train.budgets: must list at least 1 value (got [])"]),
    ("list", "run-seeds-twice", "run --out {out} -c {in}/run_seeds_twice.yaml",
     ["line 2: train.seeds: lists 0 more than once (got [0, 1, 0])"]),
    ("list", "run-methods-twice", "run --out {out} -c {in}/run_methods_twice.yaml",
     ["train.methods: lists 'elical' more than once"]),
    ("list", "run-budgets-twice", "run --out {out} -c {in}/run_budgets_twice.yaml",
     ["train.budgets: lists 50 more than once"]),
    ("list", "run-honesty-methods-twice", "run --out {out} -c {in}/run_honesty_methods.yaml",
     ["line 2: honesty.methods: lists 'sft' more than once"]),
    ("range", "run-budget-word", "run --out {out} -c {in}/run_budget_word.yaml",
     ["line 2: train.budgets.1: must be a positive integer or 'all' (got 'most')"]),
    ("range", "run-reliability-budget-0", "run --out {out} -c {in}/run_reliability.yaml",
     ["line 1: reliability_budget: must be a positive integer or 'all' (got 0)"]),
    ("seed", "run-seed-2-32", "run --out {out} -c {in}/run_seed_big.yaml",
     ["line 2: train.seeds.0: must be at least 0 and at most 4294967295 (got 4294967296)"]),
    ("seed", "run-question-seed-negative", "run --out {out} -c {in}/run_question_seed.yaml",
     ["line 2: questions.seed: must be at least 0"]),
    # run configs: numbers out of range, in every section
    ("range", "run-torch-threads-0", "run --out {out} -c {in}/run_threads_0.yaml",
     ["line 1: torch_threads: must be at least 1 (got 0)", "null: auto"]),
    ("range", "run-torch-threads-negative", "run --out {out} -c {in}/run_threads_neg.yaml",
     ["torch_threads: must be at least 1 (got -1)"]),
    ("range", "run-grad-norm-negative", "run --out {out} -c {in}/run_grad_norm.yaml",
     ["line 3: train.settings.max_grad_norm: must be at least 0 (got -1.0)"]),
    ("range", "run-warmup-5", "run --out {out} -c {in}/run_warmup.yaml",
     ["line 3: train.settings.warmup_ratio: must be at least 0 and at most 1 (got 5.0)"]),
    ("range", "run-workers-0", "run --out {out} -c {in}/run_workers.yaml", ["line 2: train.workers: must be at least 1"]),
    ("range", "run-stage2-passes-0", "run --out {out} -c {in}/run_passes.yaml",
     ["line 2: train.stage2_passes: must be at least 1 (got 0)"]),
    ("range", "run-max-train-0", "run --out {out} -c {in}/run_max_train.yaml",
     ["line 2: questions.max_train: must be at least 1 (got 0)", "null: all"]),
    ("range", "run-level-1", "run --out {out} -c {in}/run_level.yaml",
     ["line 2: evaluate.level: must be greater than 0 and less than 1 (got 1.0)"]),
    ("range", "run-statement-noise-2", "run --out {out} -c {in}/run_noise.yaml",
     ["line 2: world.statement_noise: must be at least 0 and at most 1 (got 2.0)"]),
    ("range", "run-mc-options-30", "run --out {out} -c {in}/run_letters.yaml",
     ["line 2: world.mc_options: must be at least 2 and at most 26 (got 30)"]),
    ("range", "run-contested-share", "run --out {out} -c {in}/run_contested.yaml",
     ["line 2: world.contested.birth_city: must be at least 0 and at most 1 (got 1.5)"]),
    ("range", "run-annotate-k", "run --out {out} -c {in}/run_annotate_k.yaml", ["line 2: annotate.k: must be at least 0"]),
    ("range", "run-honesty-lr-0", "run --out {out} -c {in}/run_honesty_lr.yaml",
     ["line 3: honesty.settings.tune.learning_rate: must be greater than 0 (got 0.0)"]),
    ("range", "run-retrieval-k-0", "run --out {out} -c {in}/run_retrieval_k.yaml",
     ["line 2: retrieval.k: must be at least 1 (got 0)"]),
    ("range", "run-retrieval-rate-0", "run --out {out} -c {in}/run_retrieval_rate.yaml",
     ["line 2: retrieval.max_retrieval_rate: must be greater than 0 and at most 1 (got 0.0)"]),
    ("range", "run-geo-population", "run --out {out} -c {in}/run_population.yaml",
     ["line 3: geo.min_city_population: must be at least 0 (got -1)"]),
    ("range", "run-qa-eval-share-0", "run --out {out} -c {in}/run_eval_share.yaml",
     ["line 2: qa.eval_share: must be greater than 0 and less than 1 (got 0.0)"]),
    # run plans the questions or the trained models cannot carry out, refused before annotation
    ("pool", "run-budget-over-pool", "run --out {out} -c {in}/run_big_budget.yaml",
     ["train.budgets: [50] exceed the", "training questions of the subject", "questions.max_train"]),
    ("gate", "run-honesty-budget-not-planned", "run --out {out} -c {in}/run_gate_budget.yaml",
     ["honesty.budget 500 is not one of train.budgets [50, 150]"]),
    ("gate", "run-honesty-without-elical", "run --out {out} -c {in}/run_gate_method.yaml",
     ["honesty: the EliCal gate needs 'elical' in train.methods"]),
    # output places
    ("out", "annotate-out-under-file", "annotate {in}/qa.jsonl --model {lm} --out {in}/existing/run",
     ["--out", "cannot be created", "existing is an existing file, not a folder"]),
    ("out", "train-out-under-file", "train {in}/nq_train.jsonl --model {lm} --out {in}/existing/a/b",
     ["--out", "cannot be created", "an existing file, not a folder"]),
    ("out", "evaluate-out-under-file", "evaluate {in}/nq_test.jsonl --out {in}/existing/eval",
     ["--out", "an existing file, not a folder"]),
    ("out", "run-out-under-file", "run --out {in}/existing/run", ["--out", "an existing file, not a folder"]),
    ("out", "honesty-out-under-file", "honesty-tune {in}/nq_train.jsonl --model {lm} --out {in}/existing/h",
     ["--out", "an existing file, not a folder"]),
    ("out", "predict-out-under-file", "predict {in} {in}/nq_test.jsonl --out {in}/existing/p.csv",
     ["--out", "an existing file, not a folder"]),
    ("out", "world-out-under-file", "world generate --out {in}/existing/world", ["--out", "an existing file, not a folder"]),
    ("out", "annotate-out-read-only", "annotate {in}/qa.jsonl --model {lm} --out {in}/read_only/run",
     ["--out", "cannot write in", "read_only (read-only or not permitted)"]),
    ("out", "evaluate-out-read-only", "evaluate {in}/nq_test.jsonl --out {in}/read_only/eval/deeper",
     ["--out", "cannot write in", "read_only"]),
    ("out", "run-out-read-only", "run --out {in}/read_only/run", ["--out", "cannot write in", "read_only"]),
    # models that are data
    ("model", "annotate-model-jsonl", "annotate {in}/qa.jsonl --out {out} --model {in}/qa.jsonl",
     ["qa.jsonl is a .jsonl file, not a model", "expected an alias", "a .gguf file", "config.json"]),
    ("model", "annotate-model-other-folder", "annotate {in}/qa.jsonl --out {out} --model {in}/not_a_model",
     ["not_a_model is a folder without config.json, not a model"]),
    ("model", "train-model-parquet", "train {in}/nq_train.jsonl --out {out} --model {in}/data.parquet",
     ["data.parquet is a .parquet file, not a model"]),
    ("model", "honesty-model-jsonl", "honesty-tune {in}/nq_train.jsonl --out {out} --model {in}/nq_train.jsonl",
     ["nq_train.jsonl is a .jsonl file, not a model"]),
    ("model", "run-model-parquet", "run --out {out} --model {in}/data.parquet", ["data.parquet is a .parquet file, not a model"]),
    ("model", "run-config-model-jsonl", "run --out {out} -c {in}/run_qa_data_model.yaml",
     ["model:", "qa.jsonl is a .jsonl file, not a model"]),
]


@pytest.mark.parametrize("rule, case, command, words", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_bad_setting_is_one_line_exit_2_and_writes_nothing(inputs, tmp_path, rule, case, command, words):
    assert rule in RULES
    out = tmp_path / "out"
    args = command.format(**{"in": inputs, "out": out, "lm": WORLD_LM}).split()
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, args)
    line = one_error_line(result)
    assert all(word in line for word in words), result.output
    assert snapshot(tmp_path) == before  # nothing written, not even a lock file beside the output
    assert not out.exists() and not (inputs / "read_only" / "run").exists()


def test_the_battery_is_large_and_covers_every_rule():
    assert len(CASES) >= 50 and {c[0] for c in CASES} == set(RULES)
    assert len({c[1] for c in CASES}) == len(CASES)
