"""The scheduler on real weights, no training: the embedded tiny model and two LoRA adapters with
random weights saved as run checkpoints. What a user of a batching server relies on: batching
never changes an answer (greedy, or sampled with a seed), seedless samples differ, adapters of one
base share forward passes without mixing, a cancelled request leaves at the next step, a full
queue says so, and logprobs are the model's own."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from primenb.engine.batching import Scheduler
from primenb.engine.models import build_byte_tokenizer, build_tiny_model
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import Admitted, Delta, Done, Failed, Finished, GenRequest, Sampling
from primenb.engine.serving import ModelPool
from primenb.protocol.checkpoint import CheckpointDir

pytestmark = pytest.mark.slow  # real weights (random, untrained) decoded on the CPU: a minute

BASE = "primenb/tiny-byte"
PROMPTS = ["hello=", "abcdef=", "a longer prompt than the others=", "x="]


def _adapter(root: Path, name: str, seed: int) -> Path:
    """A LoRA checkpoint on the embedded base, laid out as a run directory's, with weights that
    make it answer unlike the base (LoRA starts at zero; these are random)."""
    from peft import LoraConfig, get_peft_model

    run = root / name
    ckpt = run / "checkpoints" / "step_1"
    model = get_peft_model(
        build_tiny_model(BASE, 0), LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    model.save_pretrained(str(ckpt))
    (ckpt / CheckpointDir.META).write_text(json.dumps({"base": {"name": BASE, "seed": 0, "path": None}}))
    (run / "status.json").write_text("{}")
    return ckpt


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> ModelPool:
    root = tmp_path_factory.mktemp("runs")
    pool = ModelPool()
    pool.add_base(BASE, BASE)
    pool.add_checkpoint("ada", str(_adapter(root, "ada", 1)), model_name=BASE)
    pool.add_checkpoint("adb", str(_adapter(root, "adb", 2)), model_name=BASE)
    return pool


@pytest.fixture
def scheduler(pool: ModelPool) -> Iterator[Scheduler]:
    s = Scheduler(pool, max_batch=32).start()
    yield s
    s.close()


class Call:
    """One submitted request and its events, gathered as the scheduler emits them."""

    def __init__(self, scheduler: Scheduler, model: str, prompt: Any, **sampling: Any) -> None:
        sampling.setdefault("max_tokens", 24)
        self.req = GenRequest(model, prompt, Sampling(**sampling))
        self.events: list[Any] = []
        self.done = threading.Event()
        self.req.emit = self._emit
        scheduler.submit(self.req)

    def _emit(self, event: Any) -> None:
        self.events.append(event)
        if isinstance(event, Done | Failed):
            self.done.set()

    def wait(self) -> Call:
        assert self.done.wait(120), "the scheduler never finished this request"
        return self

    def texts(self) -> list[str]:
        n = self.req.sampling.n
        out = [""] * n
        for e in self.events:
            if isinstance(e, Delta):
                out[e.index] += e.text
        return out

    @property
    def text(self) -> str:
        return self.texts()[0]


def until(condition: Any, what: str) -> None:
    """Wait for ``condition()``; the limit only catches a hang."""
    end = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.005)


def alone(scheduler: Scheduler, model: str, prompt: str, **sampling: Any) -> str:
    return Call(scheduler, model, prompt, **sampling).wait().text


def test_batching_never_changes_an_answer(scheduler: Scheduler) -> None:
    """Greedy, and sampled with a seed: the same text alone and among 7 others of other adapters."""
    jobs = [(m, p) for m in ("ada", "adb", BASE) for p in PROMPTS][:8]
    for kw in ({"temperature": 0}, {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 11}):
        want = [alone(scheduler, m, p, **kw) for m, p in jobs]
        steps = scheduler.steps
        calls = [Call(scheduler, m, p, **kw) for m, p in jobs]
        got = [c.wait().text for c in calls]
        assert got == want, kw
        assert scheduler.rows_stepped / max(1, scheduler.steps) > 1  # they did share steps
        assert scheduler.steps - steps < sum(len(t) for t in want)  # fewer steps than one by one
    assert want[0] != alone(scheduler, BASE, jobs[0][1], **kw), "the adapter answers as the base does"


def test_seedless_requests_sample_afresh_and_seeds_are_reported(scheduler: Scheduler) -> None:
    calls = [Call(scheduler, "ada", "hello=", temperature=1.0) for _ in range(8)]
    texts = [c.wait().text for c in calls]
    assert len(set(texts)) >= 7, texts
    seeds = [next(e.seed for e in c.events if isinstance(e, Admitted)) for c in calls]
    assert len(set(seeds)) == 8
    again = Call(scheduler, "ada", "hello=", temperature=1.0, seed=seeds[3]).wait()
    assert again.text == texts[3]  # the reported seed reproduces the sample


def test_n_rows_differ_and_repeat_with_their_seed(scheduler: Scheduler) -> None:
    first = Call(scheduler, "adb", "abc=", temperature=1.0, n=4, seed=5).wait()
    assert len(set(first.texts())) == 4
    assert Call(scheduler, "adb", "abc=", temperature=1.0, n=4, seed=5).wait().texts() == first.texts()
    finishes = [e for e in first.events if isinstance(e, Finished)]
    assert sorted(e.index for e in finishes) == [0, 1, 2, 3]
    done = next(e for e in first.events if isinstance(e, Done))
    assert done.completion_tokens == sum(e.completion_tokens for e in finishes)


def test_a_cancelled_request_leaves_at_the_next_step(scheduler: Scheduler) -> None:
    # ignore_eos: a sampled end of text as the first token ended it with no text (the wait hung)
    long = Call(scheduler, "ada", "hello=", temperature=1.0, max_tokens=1500, ignore_eos=True)
    until(lambda: any(isinstance(e, Delta) for e in long.events), "the long request's first text")
    long.req.cancel()
    at_cancel = scheduler.steps
    long.wait()
    finish = next(e for e in long.events if isinstance(e, Finished))
    assert finish.reason == "abort" and finish.completion_tokens < 1500
    assert scheduler.steps - at_cancel <= 2  # the step in flight, at most one more
    short = Call(scheduler, "adb", "x=", temperature=0, max_tokens=4).wait()
    assert next(e for e in short.events if isinstance(e, Finished)).completion_tokens <= 4


def test_a_full_queue_and_too_many_rows_are_refused(pool: ModelPool) -> None:
    s = Scheduler(pool, max_batch=2, max_queue=1).start()
    try:
        busy = Call(s, BASE, "a=", temperature=1.0, n=2, max_tokens=1500, ignore_eos=True)  # both rows, for long
        until(lambda: busy.events, "the busy request admitted")
        Call(s, BASE, "b=")  # waits for a row: the queue's one place
        with pytest.raises(ServeError) as full:
            Call(s, BASE, "c=")
        assert full.value.kind is ErrorKind.BUSY
        with pytest.raises(ServeError) as wide:
            Call(s, BASE, "d=", n=3)
        assert wide.value.kind is ErrorKind.INVALID and wide.value.param == "n"
        s.stop_admitting()
        with pytest.raises(ServeError) as stopping:
            Call(s, BASE, "e=")
        assert stopping.value.kind is ErrorKind.STOPPING
        s.abort_all()
        busy.wait()
        assert next(e for e in busy.events if isinstance(e, Finished)).reason == "abort"
    finally:
        s.close()


def _first_logprobs(pool: ModelPool, served: str, prompt: str) -> torch.Tensor:
    """The model's own distribution over the first token, from a plain forward."""
    entry = pool.entry(served)
    model = pool.model_for(entry.base_key)
    ids = torch.tensor([build_byte_tokenizer()(prompt)["input_ids"]])
    kwargs = {"adapter_names": [entry.adapter or "__base__"]} if hasattr(model, "peft_config") else {}
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=ids, **kwargs).logits[0, -1].float(), -1)


def test_logprobs_are_the_models_own(scheduler: Scheduler, pool: ModelPool) -> None:
    want = _first_logprobs(pool, "ada", "hello=")
    call = Call(scheduler, "ada", "hello=", temperature=0, max_tokens=3, logprobs=True, top_logprobs=3).wait()
    first = next(e.logprobs[0] for e in call.events if isinstance(e, Delta) and e.logprobs)
    assert first.logprob == pytest.approx(float(want.max()), abs=1e-4)  # greedy picks the most likely
    assert [lp for _, lp in first.top] == pytest.approx(want.topk(3).values.tolist(), abs=1e-4)
    echo = Call(scheduler, BASE, "hello=", max_tokens=0, echo=True, logprobs=True).wait()
    entries = next(e.logprobs for e in echo.events if isinstance(e, Delta))
    assert echo.text == "hello=" and entries[0].logprob is None and len(entries) == 6
    whole = _first_logprobs(pool, BASE, "hello")  # what the model gives "=" after "hello"
    assert entries[-1].logprob == pytest.approx(float(whole[build_byte_tokenizer()("=")["input_ids"][0]]), abs=1e-4)


def test_stop_strings_and_the_context_end(scheduler: Scheduler, pool: ModelPool) -> None:
    text = alone(scheduler, "ada", "hello=", temperature=0, max_tokens=20)
    stop = text[3:5]
    cut = Call(scheduler, "ada", "hello=", temperature=0, max_tokens=20, stop=(stop,)).wait()
    assert cut.text == text[: text.find(stop)]
    assert [e.reason for e in cut.events if isinstance(e, Finished)] == ["stop"]
    limit = pool.context_limit(pool.entry("ada"))
    near = Call(scheduler, "ada", "y" * (limit - 3), temperature=0, max_tokens=None).wait()
    assert [e.completion_tokens for e in near.events if isinstance(e, Finished)] == [3]
    over = Call(scheduler, "ada", "y" * limit).wait()
    assert isinstance(over.events[-1], Failed) and over.events[-1].error.code == "context_length_exceeded"


def test_a_model_removed_while_decoding_finishes_its_rows(scheduler: Scheduler, tmp_path: Path) -> None:
    ckpt = _adapter(tmp_path, "adc", 3)
    add = lambda: scheduler.pool.add_checkpoint("adc", str(ckpt), model_name=BASE)  # noqa: E731
    scheduler.call(add).result(60)
    busy = Call(scheduler, "adc", "hello=", temperature=1.0, max_tokens=200, ignore_eos=True)
    until(lambda: any(isinstance(e, Delta) for e in busy.events), "the busy request's first text")
    scheduler.call(scheduler.remove, "adc").result(60)
    gone = Call(scheduler, "adc", "x=").wait()
    assert isinstance(gone.events[-1], Failed) and gone.events[-1].error.status == 404
    busy.wait()
    assert [e.reason for e in busy.events if isinstance(e, Finished)] in (["length"], ["stop"])
    scheduler.call(add).result(60)  # the same id again
    assert alone(scheduler, "adc", "x=", temperature=0, max_tokens=4) is not None
    scheduler.call(scheduler.remove, "adc").result(60)
