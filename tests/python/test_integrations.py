"""greentrain.integrations on the stand-in NVML (one GPU at 150 W): the plain-loop helper on a
small PyTorch model (or plain Python work when torch is missing), the power-limit optimizer
driven through it, and the Hugging Face TrainerCallback on a tiny GPT-2 made in the test (no
downloads; skipped, saying so, when transformers is not installed)."""

import importlib.util
import json
import time

import pytest

import greentrain
from greentrain.integrations import EnergyLogger

W = 150.0


def test_energy_logger_counts_have_a_range(fake_nvml):
    # issue 31 §6: log_every=0 was taken as 1 and a negative print_every or keep did something
    # else than asked, without a word
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        for kw, text in (({"print_every": -1}, "print_every=-1"), ({"keep": -5}, "keep=-5"),
                         ({"log_every": 0}, "log_every=0"), ({"print_every": 2.5}, "2.5")):
            with pytest.raises(ValueError, match=text):
                EnergyLogger(meter, **kw)
        EnergyLogger(meter, print_every=0, keep=0, log_every=1)  # the ends of the ranges


def test_energy_logger_joules_per_step_and_token(fake_nvml):
    lines = []
    with greentrain.Meter(cpu=False, interval_ms=10) as meter:
        log = EnergyLogger(meter, print_every=2, print_fn=lines.append)
        for step in range(4):
            with log.step(tokens=100):
                time.sleep(0.11)
        with pytest.raises(ZeroDivisionError):
            with log.step(tokens=100):
                1 / 0  # the step's window still ends
    assert log.steps == 5 and len(log.records) == 5
    for r in log.records:  # the counter counts whole mJ: the short last step within 2 mJ
        assert r.energy_j == pytest.approx(W * r.duration_s, rel=0.05, abs=0.002)
        assert r.joules_per_token == pytest.approx(r.energy_j / 100)
        assert not r.estimated
    assert log.total_j == pytest.approx(sum(r.energy_j for r in log.records))
    assert log.joules_per_token == pytest.approx(log.total_j / 500)
    assert len(lines) == 2 and lines[0].startswith("step 1: ") and "J/token" in lines[0]


def test_energy_logger_joules_per_token_counts_only_the_steps_given_tokens(fake_nvml):
    # the joules of every step were divided by the tokens of the steps given tokens only: a
    # step without tokens (an evaluation, say) raised J/token by its whole energy
    with greentrain.Meter(cpu=False, interval_ms=10) as meter:
        log = EnergyLogger(meter)
        for tokens in (100, None, 100):
            with log.step(tokens=tokens):
                time.sleep(0.11)
    with_tokens = [r for r in log.records if r.tokens]
    assert len(with_tokens) == 2 and log.records[1].energy_j > 0
    assert log.total_tokens == 200
    assert log.joules_per_token == pytest.approx(sum(r.energy_j for r in with_tokens) / 200)
    assert log.total_j == pytest.approx(sum(r.energy_j for r in log.records))


def test_energy_logger_on_a_torch_loop_drives_the_optimizer(fake_nvml):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with greentrain.Meter(cpu=False, interval_ms=0) as meter, \
            greentrain.PowerLimitOptimizer(meter, devices="nvml", step_w=100, warmup_steps=0,
                                           profile_steps=2, verbose=False) as plo:
        log = EnergyLogger(meter, optimizer=plo)
        for _ in range(12):
            x = torch.randn(8, 16)
            with log.step(tokens=x.shape[0]):
                loss = model(x).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
        assert plo.state == "done" and log.steps == 12
    assert fake_nvml.limit_mw() == 300000  # restored at close


needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers is not installed (pip install transformers): the Hugging Face "
           "callback test is skipped")


@needs_transformers
def test_huggingface_callback_adds_energy_to_the_logs(fake_nvml, tmp_path):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from greentrain.integrations import GreentrainCallback, add_to_trainer

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=32, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(cfg)
    data = [{"input_ids": torch.randint(0, 32, (16,)), "labels": torch.randint(0, 32, (16,))}
            for _ in range(16)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=4, logging_steps=2,
                             per_device_train_batch_size=4, report_to=[], save_strategy="no",
                             use_cpu=True, disable_tqdm=True, include_num_input_tokens_seen=True)
    meter = greentrain.Meter(cpu=False, interval_ms=10)
    trainer = Trainer(model=model, args=args, train_dataset=data)
    seen = []

    class Spy(__import__("transformers").TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            seen.append(dict(logs))

    cb = add_to_trainer(trainer, GreentrainCallback(meter))
    trainer.add_callback(Spy())
    trainer.train()
    entries = [e for e in trainer.state.log_history if "loss" in e]
    assert len(entries) == 2
    for e in entries:
        assert e["energy_j"] > 0 and e["energy_estimated"] is False
        assert e["energy_j"] == pytest.approx(W * e["energy_duration_s"], rel=0.05)
        if e["energy_avg_power_w"] is not None:  # None when shorter than the refresh period
            assert e["energy_avg_power_w"] == pytest.approx(W, rel=0.05)
        assert e["energy_j_per_token"] == pytest.approx(e["energy_j"] / (2 * 4 * 16), rel=1e-6)
    assert entries[-1]["energy_total_j"] == pytest.approx(
        sum(m.energy_j for m in cb.measurements[:2]))
    assert any("energy_j" in s for s in seen)  # later callbacks see it too
    json.dumps(trainer.state.log_history)
    meter.close()
