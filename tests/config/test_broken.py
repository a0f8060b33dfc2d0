"""Broken configs: each reports the right TOML path, line and message (and only valid ones pass).

The expected line is the one marked `# <-` in each case.
"""

from __future__ import annotations

import pytest

from primenb.config import check

HEAD = """max_steps = 20
seq_len = 512

[model]
name = "primenb/tiny-byte"
"""
ORCH = """
[orchestrator]
batch_size = 32
group_size = 8
"""
SOURCE = """
[[orchestrator.train.source]]
name = "reverse-text"

[orchestrator.train.source.env.taskset]
id = "reverse-text"
"""
OPTIM = """
[trainer.optim]
lr = 1e-5
"""
VALID = HEAD + ORCH + SOURCE + OPTIM
SFT = """max_steps = 50

[model]
name = "primenb/tiny-byte"

[data]
name = "reverse-text"
"""

# (id, toml, severity, path, message fragment)
CASES = [
    # --- syntax -------------------------------------------------------------------------
    ("syntax-missing-value", "max_steps =   # <-\n", "error", "", "TOML syntax error"),
    ("syntax-unterminated-string", HEAD + '[run]\nname = "oops # <-\n', "error", "", "TOML syntax error"),
    (
        "syntax-duplicate-key",
        VALID + "max_steps = 3\n[x]\nmax_steps = 1\nmax_steps = 2 # <-\n",
        "error",
        "",
        "TOML syntax error",
    ),
    ("syntax-duplicate-table", VALID + "\n[orchestrator] # <-\nseq_len = 3\n", "error", "", "TOML syntax error"),
    ("syntax-unclosed-header", VALID + "\n[orchestrator.train.sampling # <-\n", "error", "", "TOML syntax error"),
    ("syntax-bare-word", VALID + "\n[run]\nname = reverse # <-\n", "error", "", "TOML syntax error"),
    # --- unknown keys -------------------------------------------------------------------
    (
        "unknown-orchestrator-key",
        HEAD + "\n[orchestrator]\nbatch_sise = 32 # <-\ngroup_size = 8\n" + SOURCE + OPTIM,
        "error",
        "orchestrator.batch_sise",
        "did you mean `batch_size`?",
    ),
    (
        "unknown-top-level-key",
        "max_step = 20 # <-\n" + VALID.split("\n", 1)[1],
        "error",
        "max_step",
        "did you mean `max_steps`?",
    ),
    (
        "key-in-wrong-table",
        HEAD + ORCH + "lr = 1e-5 # <-\n" + SOURCE,
        "error",
        "orchestrator.lr",
        "did you mean `trainer.optim.lr`? write `lr = 1e-5` under [trainer.optim]",
    ),
    (
        "unknown-source-key",
        HEAD + ORCH + '\n[[orchestrator.train.source]]\nnme = "x" # <-\n',
        "error",
        "orchestrator.train.source[0].nme",
        "did you mean `name`?",
    ),
    (
        "unknown-lora-key",
        VALID + "\n[trainer.model.lora]\nrnk = 8 # <-\n",
        "error",
        "trainer.model.lora.rnk",
        "did you mean `rank`?",
    ),
    (
        "unknown-deployment-key",
        VALID + "\n[deployment]\nnum_train_gpu = 2 # <-\n",
        "error",
        "deployment.num_train_gpu",
        "did you mean `num_train_gpus`?",
    ),
    (
        "unknown-wandb-key",
        VALID + '\n[monitors.wandb]\nprojet = "x" # <-\n',
        "error",
        "monitors.wandb.projet",
        "did you mean `project`?",
    ),
    ("unknown-sft-data-key", SFT + "batchsize = 4 # <-\n", "error", "data.batchsize", "did you mean `batch_size`?"),
    ("unknown-table", VALID + "\n[trainr.optim] # <-\nlr = 1\n", "error", "trainr", "did you mean `trainer`?"),
    # --- types and values ---------------------------------------------------------------
    (
        "string-for-int",
        'max_steps = "20" # <-\n' + VALID.split("\n", 1)[1],
        "warning",  # prime-rl (pydantic lax mode) reads "20" as 20: a warning, not an error
        "max_steps",
        "expected an integer",
    ),
    ("float-for-int", VALID.replace("seq_len = 512", "seq_len = 1.5 # <-"), "error", "seq_len", "expected an integer"),
    (
        "negative-group-size",
        VALID.replace("group_size = 8", "group_size = -1 # <-"),
        "error",
        "orchestrator.group_size",
        "must be >= 1",
    ),
    (
        "bad-literal",
        VALID + '\n[trainer.model]\nimpl = "hff" # <-\n',
        "error",
        "trainer.model.impl",
        "did you mean `hf`?",
    ),
    (
        "temperature-too-high",
        VALID + "\n[orchestrator.train.sampling]\ntemperature = 3.0 # <-\n",
        "error",
        "orchestrator.train.sampling.temperature",
        "must be <= 2",
    ),
    (
        "unknown-optimizer",
        VALID.replace("lr = 1e-5", 'lr = 1e-5\ntype = "adamx" # <-'),
        "error",
        "trainer.optim.type",
        "unknown type `adamx`",
    ),
    (
        "unknown-deployment-type",
        VALID + '\n[deployment]\ntype = "multinode" # <-\n',
        "error",
        "deployment.type",
        "did you mean `multi_node`?",
    ),
    # prime-rl reads "yes" as true (pydantic lax mode): primenb still says so, as a warning
    ("bool-as-string", 'clean = "yes" # <-\n' + VALID, "warning", "clean", "expected true or false"),
    (
        "string-for-array",
        VALID + '\n[monitors.wandb]\ntags = "a" # <-\n',
        "error",
        "monitors.wandb.tags",
        "expected an array",
    ),
    (
        "zero-ratio",
        VALID.replace('name = "reverse-text"\n', 'name = "reverse-text"\nratio = 0 # <-\n', 1),
        "error",
        "orchestrator.train.source[0].ratio",
        "must be > 0",
    ),
    (
        "ckpt-interval-string",
        VALID + '\n[ckpt]\ninterval = "often" # <-\n',
        "error",
        "ckpt.interval",
        "expected an integer",
    ),
    (
        "missing-required-key",
        VALID + '\n[deployment] # <-\ntype = "multi_node"\n\n[slurm]\n',
        "error",
        "deployment.num_train_nodes",
        "missing required key `num_train_nodes`",
    ),
    ("table-as-value", VALID + "\n[trainer]\nmodel = 3 # <-\n", "error", "trainer.model", "expected a table"),
    # --- cross-field rules --------------------------------------------------------------
    (
        "batch-not-divisible",
        VALID.replace("batch_size = 32", "batch_size = 30 # <-"),
        "error",
        "orchestrator.batch_size",
        "must be divisible by group_size (8)",
    ),
    (
        "batch-and-token-batch",
        VALID.replace("group_size = 8", "group_size = 8\ntoken_batch_size = 4096 # <-"),
        "error",
        "orchestrator.token_batch_size",
        "exactly one of batch_size or token_batch_size",
    ),
    (
        "max-steps-differ",
        VALID.replace("max_steps = 20\n", "").replace("group_size = 8", "group_size = 8\nmax_steps = 20 # <-")
        + "\n[trainer]\nmax_steps = 10\n",
        "error",
        "orchestrator.max_steps",
        "differ",
    ),
    (
        "shared-conflict",
        VALID + "\n[trainer]\nmax_steps = 10 # <-\n",
        "error",
        "trainer.max_steps",
        "disagrees with the shared `max_steps`",
    ),
    (
        "trainer-seq-len-short",
        VALID.replace("seq_len = 512\n", "").replace("group_size = 8", "group_size = 8\nseq_len = 512")
        + "\n[trainer.model]\nseq_len = 256 # <-\n",
        "error",
        "trainer.model.seq_len",
        "smaller than orchestrator.seq_len",
    ),
    (
        "too-many-gpus",
        VALID + "\n[deployment]\nnum_train_gpus = 6\nnum_infer_gpus = 4 # <-\n",
        "error",
        "deployment.num_infer_gpus",
        "exceeds gpus_per_node (8)",
    ),
    (
        "tp-not-dividing",
        VALID + "\n[deployment]\nnum_infer_gpus = 3\n\n[inference.vllm]\ntensor_parallel_size = 2 # <-\n",
        "error",
        "inference.vllm.tensor_parallel_size",
        "must be divisible by the tensor parallel size",
    ),
    (
        "lora-with-nccl",
        VALID + '\n[trainer.model.lora]\nrank = 8\n\n[weight_broadcast]\ntype = "nccl" # <-\n',
        "error",
        "weight_broadcast.type",
        "LoRA training is not yet supported",
    ),
    (
        "cosine-needs-max-steps",
        VALID.replace("max_steps = 20\n", "") + '\n[trainer.scheduler]\ntype = "cosine" # <-\n',
        "error",
        "trainer.scheduler.type",
        "needs max_steps",
    ),
    (
        "cosine-warmup-too-long",
        VALID + '\n[trainer.scheduler]\ntype = "cosine"\nwarmup_steps = 20 # <-\n',
        "error",
        "trainer.scheduler.warmup_steps",
        "must be below max_steps (20)",
    ),
    (
        "linear-too-long",
        VALID + '\n[trainer.scheduler]\ntype = "linear"\nwarmup_steps = 10\ndecay_steps = 15 # <-\n',
        "error",
        "trainer.scheduler.decay_steps",
        "exceeds max_steps (20)",
    ),
    (
        "linear-all-zero",
        VALID + '\n[trainer.scheduler] # <-\ntype = "linear"\nwarmup_steps = 0\ndecay_steps = 0\n',
        "error",
        "trainer.scheduler",
        "needs warmup_steps or decay_steps",
    ),
    (
        "eval-without-source",
        VALID + "\n[orchestrator.eval] # <-\ninterval = 5\n",
        "error",
        "orchestrator.eval",
        "has no source",
    ),
    (
        "duplicate-source-name",
        VALID + SOURCE.replace('name = "reverse-text"', 'name = "reverse-text" # <-'),
        "error",
        "orchestrator.train.source[1].name",
        "is used twice",
    ),
    (
        "reserved-source-name",
        VALID.replace('name = "reverse-text"', 'name = "agg" # <-'),
        "error",
        "orchestrator.train.source[0].name",
        "reserved",
    ),
    (
        "source-without-env",
        HEAD + ORCH + '\n[[orchestrator.train.source]] # <-\nname = "x"\n' + OPTIM,
        "error",
        "orchestrator.train.source[0].env",  # named where the file stops (upstream: the source)
        "no env configured",
    ),
    (
        "no-sources",
        HEAD + "\n[orchestrator] # <-\nbatch_size = 32\ngroup_size = 8\n" + OPTIM,
        "warning",  # upstream runs eval-only configs (glm-5.2/swe.toml has no train source)
        "orchestrator.train.source",
        "no training environment",
    ),
    (
        "multi-node-needs-slurm",
        VALID + '\n[deployment]\ntype = "multi_node" # <-\nnum_train_nodes = 2\n\n[inference]\n',
        "error",
        "deployment.type",
        "needs a [slurm] table",
    ),
    (
        "inference-model-mismatch",
        VALID + '\n[inference.vllm]\nmodel = "other/model" # <-\n',
        "error",
        "inference.vllm.model",
        "disagrees with the shared `model.name`",
    ),
    (
        "max-inflight-below-group",
        VALID + "\n[orchestrator.concurrency]\nmax_inflight = 4 # <-\n",
        "error",
        "orchestrator.concurrency.max_inflight",
        "must be at least group_size (8)",
    ),
    (
        "resume-step-and-dir",
        VALID + '\n[resume]\nstep = 5\ndir = "outputs/x/checkpoints/step_5" # <-\n',
        "error",
        "resume.dir",
        "not both",
    ),
    (
        "wandb-offline-rl",
        VALID + "\n[monitors.wandb]\noffline = true # <-\n",
        "error",
        "monitors.wandb.offline",
        "offline W&B is not supported",
    ),
    (
        "secret-in-env-vars",
        VALID + '\n[env_vars]\nHF_TOKEN = "hf_abcdef123" # <-\n',
        "error",
        "env_vars.HF_TOKEN",
        "looks like a secret",
    ),
    (
        "sft-batch-not-divisible",
        SFT + "batch_size = 10 # <-\nmicro_batch_size = 4\n",
        "error",
        "data.batch_size",
        "must be divisible by micro_batch_size (4)",
    ),
    (
        "sft-micro-larger",
        SFT + "batch_size = 4\nmicro_batch_size = 8 # <-\n",
        "error",
        "data.micro_batch_size",
        "larger than batch_size",
    ),
    ("sft-inference-without-eval", SFT + "\n[inference] # <-\n", "error", "inference", "only used for online evals"),
    # --- legacy keys (errors as upstream rejects them; the migration is the hint) ---------
    (
        "legacy-rollouts-per-example",
        VALID.replace("group_size = 8", "rollouts_per_example = 8 # <-"),
        "error",
        "orchestrator.rollouts_per_example",
        "renamed to `group_size`; `primenb validate --fix`",
    ),
    ("legacy-wandb", VALID + '\n[wandb] # <-\nproject = "p"\n', "error", "wandb", "moved to [monitors.wandb]"),
    (
        "legacy-orchestrator-env",
        HEAD + ORCH + '\n[[orchestrator.env]] # <-\nid = "reverse-text"\n' + OPTIM,
        "error",
        "orchestrator.env",
        "renamed to [[orchestrator.train.source]]",
    ),
    (
        "legacy-max-tokens",
        VALID + "\n[orchestrator.sampling]\nmax_tokens = 64 # <-\n",
        "error",
        "orchestrator.sampling.max_tokens",
        "renamed to `max_completion_tokens`",
    ),
    (
        "legacy-max-async-level",
        VALID.replace("group_size = 8", "group_size = 8\nmax_async_level = 2 # <-"),
        "error",
        "orchestrator.max_async_level",
        "removed upstream",
    ),
    (
        "legacy-value-still-checked",
        VALID.replace("group_size = 8", "rollouts_per_example = 0 # <-"),
        "error",
        "orchestrator.group_size",
        "must be >= 1",
    ),
    (
        "hosted-model-string",
        'model = "Qwen/Qwen3-0.6B" # <-\nmax_steps = 10\n\n[[env]]\nid = "reverse-text"\n',
        "error",
        "model",
        "retired hosted-training",
    ),
    (
        "hosted-env-array",
        'max_steps = 10\n\n[[env]] # <-\nid = "reverse-text"\n',
        "error",
        "env",
        "retired hosted-training",
    ),
]


def _marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line]
    assert len(lines) == 1, "each case marks exactly one line"
    return lines[0]


def test_there_are_at_least_forty_broken_configs():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case_id,text,severity,path,fragment", CASES, ids=[c[0] for c in CASES])
def test_broken_config_is_located(case_id, text, severity, path, fragment):
    mode = "sft" if text.startswith(SFT) else None
    report = check(text, mode=mode).report
    matches = [d for d in report.diagnostics if d.path == path and fragment in (d.message + " " + d.hint)]
    assert matches, f"no {severity} at {path!r} with {fragment!r}; got:\n{report.to_text()}"
    d = matches[0]
    assert d.severity == severity
    assert d.line == _marked_line(text), report.to_text()
    assert d.col is not None and d.col >= 1
    if severity == "warning":
        assert report.ok, report.to_text()
    else:
        assert not report.ok


def test_all_problems_are_reported_at_once():
    text = VALID.replace("batch_size = 32", "batch_sise = 32").replace("lr = 1e-5", 'lr = "fast"')
    text += '\n[trainer.model]\nimpl = "nope"\n'
    report = check(text).report
    assert {d.path for d in report.errors} >= {"orchestrator.batch_sise", "trainer.optim.lr", "trainer.model.impl"}


def test_secret_values_never_reach_the_rendered_report():
    text = VALID + '\n[env_vars]\nWANDB_API_KEY = "sk-live-123456"\n\n[monitors.wandb]\napi_key = "sk-live-123456"\n'
    report = check(text).report
    secrets = {d.path for d in report.errors if d.code == "secret"}
    assert secrets == {"env_vars.WANDB_API_KEY", "monitors.wandb.api_key"}
    for rendered in (report.to_text(), report._repr_html_(), report.to_json()):
        assert "sk-live-123456" not in rendered


def test_valid_config_has_no_diagnostics_and_vllm_keys_pass_through():
    report = check(VALID + "\n[inference.vllm]\nany_vllm_flag = 3\nmax_num_seqs = 64\n").report
    assert report.ok and not report.diagnostics, report.to_text()
