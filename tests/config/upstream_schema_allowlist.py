"""The one allow-list of differences between primenb's config schema and upstream's.

Each entry: (schema, TOML path, aspect) -> why it differs. `test_upstream_schema.py` fails when a
difference is missing here (new drift) or listed here but gone (remove the entry). Entries marked
"not yet mirrored" are debts, not decisions."""

ALLOWED: dict[tuple[str, str, str], str] = {
    (
        "rl",
        "ckpt.interval",
        "minimum",
    ): "the shared [ckpt] is copied into [trainer.ckpt] and [orchestrator.ckpt], which bound it (>= 1)",
    (
        "rl",
        "inference.log.level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "inference.log.vf_level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "inference.output_dir",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "inference.output_dir",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "inference.weight_broadcast",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "inference.weight_broadcast",
        "tags",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "log",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "monitors.wandb.offline",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "monitors.wandb.project",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.algo<opsd>.renderer",
        "tags",
    ): "renderer tables are checked by the renderers package's own union (config/vfcheck.py)",
    (
        "rl",
        "orchestrator.ckpt.output_dir",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.eval.sampling.extra_body",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.eval.sampling.extra_body",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.eval.source[].env",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.id",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.interception",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.max_concurrent_agents",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.retries",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset.id",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset.id",
        "default",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset.system_prompt",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.taskset.task",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].env.timeout",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.eval.source[].group_size",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.eval.source[].group_size",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.eval.source[].num_examples",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.eval.source[].num_examples",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.eval.source[].sampling",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.eval.source[].sampling.extra_body",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.eval.source[].sampling.extra_body",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.eval.source[].serve",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.log.level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.log.vf_level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.model.client.admin_base_url",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.model.client.base_url",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.output_dir",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.output_dir",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.renderer",
        "tags",
    ): "renderer tables are checked by the renderers package's own union (config/vfcheck.py)",
    (
        "rl",
        "orchestrator.rollout_transport",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.tokenizer",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.train.source[].algo<opsd>.renderer",
        "tags",
    ): "renderer tables are checked by the renderers package's own union (config/vfcheck.py)",
    (
        "rl",
        "orchestrator.train.source[].env",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.id",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.interception",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.max_concurrent_agents",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.retries",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset.id",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset.id",
        "default",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset.system_prompt",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.taskset.task",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].env.timeout",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "rl",
        "orchestrator.train.source[].group_size",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.train.source[].group_size",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "orchestrator.train.source[].sampling",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.train.source[].serve",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.weight_broadcast",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.weight_broadcast<nccl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.weight_broadcast<nixl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "orchestrator.weight_broadcast<nixl>.session_id",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "orchestrator.weight_broadcast<nixl>.session_id",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "primenb",
        "key",
    ): "primenb's own [primenb] table (backend, init_from...): removed before the config reaches prime-rl",
    (
        "rl",
        "trainer.gc.interval",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.log.level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.log.vf_level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.model.fused_lm_head_token_chunk_size",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.model.quantization<fp8>.ignore_patterns",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.model.quantization<fp8>.ignore_patterns",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "trainer.model.quantization<mxfp8>.ignore_patterns",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.model.quantization<mxfp8>.ignore_patterns",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "trainer.output_dir",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.output_dir",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "trainer.rollout_transport",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.tokenizer",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.weight_broadcast",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.weight_broadcast<nccl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "trainer.weight_broadcast<nixl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "rl",
        "trainer.weight_broadcast<nixl>.session_id",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "trainer.weight_broadcast<nixl>.session_id",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "weight_broadcast<nixl>.session_id",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "rl",
        "weight_broadcast<nixl>.session_id",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "data<fake>.batch_size",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "eval.client.admin_base_url",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "eval.client.base_url",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "eval.sampling.extra_body",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "eval.sampling.extra_body",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "eval.source[].env",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.id",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.interception",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.max_concurrent_agents",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.retries",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset",
        "closed",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset.id",
        "type",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset.id",
        "default",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset.system_prompt",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.taskset.task",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].env.timeout",
        "key",
    ): "env tables are checked by verifiers' own classes (config/vfcheck.py), not by this schema",
    (
        "sft",
        "eval.source[].group_size",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "eval.source[].group_size",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "eval.source[].num_examples",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "eval.source[].num_examples",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "eval.source[].sampling",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "eval.source[].sampling.extra_body",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "eval.source[].sampling.extra_body",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "eval.source[].serve",
        "type",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "gc.interval",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "inference.log.level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "inference.log.vf_level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "inference.output_dir",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "inference.output_dir",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "inference.weight_broadcast",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "inference.weight_broadcast",
        "tags",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "log.level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "log.vf_level",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "memory_profiler_path",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "model.fused_lm_head_token_chunk_size",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "model.quantization<fp8>.ignore_patterns",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "model.quantization<fp8>.ignore_patterns",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "model.quantization<mxfp8>.ignore_patterns",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "model.quantization<mxfp8>.ignore_patterns",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "sft",
        "primenb",
        "key",
    ): "primenb's own [primenb] table (backend, init_from...): removed before the config reaches prime-rl",
    ("sft", "renderer", "tags"): "renderer tables are checked by the renderers package's own union (config/vfcheck.py)",
    (
        "sft",
        "tokenizer",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "val",
        "required",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "val.data",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "val.data",
        "tags",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "weight_broadcast<nccl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "weight_broadcast<nixl>.inference_world_size",
        "key",
    ): "not yet mirrored: no config or mutation of the verdict corpora reaches it (follow-up of issue 21)",
    (
        "sft",
        "weight_broadcast<nixl>.session_id",
        "type",
    ): "None marks 'not written' so propagation can tell a written value from upstream's filled default",
    (
        "sft",
        "weight_broadcast<nixl>.session_id",
        "default",
    ): "left None here: upstream fills it (factory or shared-config propagation) before validation",
    (
        "rl",
        "inference.kv_cache_offload<native>",
        "required",
    ): "cpu is required here: upstream's valid_tiers refuses a table without it (same verdict, the missing key named)",
    (
        "rl",
        "inference.kv_cache_offload<native>.cpu",
        "type",
    ): "cpu is required here (not `| None`): upstream's valid_tiers refuses None",
    (
        "rl",
        "inference.kv_cache_offload<mooncake>",
        "required",
    ): "cpu is required here: upstream's valid_tiers refuses a table without it (same verdict, the missing key named)",
    (
        "rl",
        "inference.kv_cache_offload<mooncake>.cpu",
        "type",
    ): "cpu is required here (not `| None`): upstream's valid_tiers refuses None",
    (
        "sft",
        "inference.kv_cache_offload<native>",
        "required",
    ): "cpu is required here: upstream's valid_tiers refuses a table without it (same verdict, the missing key named)",
    (
        "sft",
        "inference.kv_cache_offload<native>.cpu",
        "type",
    ): "cpu is required here (not `| None`): upstream's valid_tiers refuses None",
    (
        "sft",
        "inference.kv_cache_offload<mooncake>",
        "required",
    ): "cpu is required here: upstream's valid_tiers refuses a table without it (same verdict, the missing key named)",
    (
        "sft",
        "inference.kv_cache_offload<mooncake>.cpu",
        "type",
    ): "cpu is required here (not `| None`): upstream's valid_tiers refuses None",
}
