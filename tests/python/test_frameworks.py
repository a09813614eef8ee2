"""Energy that reaches the loggers people use (issue 29, section 3), on the stand-in NVML (one GPU
at 150 W): the Hugging Face Trainer with callbacks=[GreentrainCallback(meter)] and
report_to=["tensorboard", "mlflow"] on a tiny GPT-2 built from its config (no download), the
series read back from the TensorBoard event files and MLflow's local store; a PyTorch Lightning
Trainer with its TensorBoard logger; a plain PyTorch loop writing to a SummaryWriter and MLflow.
Each test is skipped, saying so, when its framework is not installed
(scripts/python-venv.sh installs them)."""

import importlib.util
import pathlib
import struct

import pytest

import greentrain


def _missing(*mods):
    return [m for m in mods if importlib.util.find_spec(m) is None]


def needs(*mods):
    miss = _missing(*mods)
    return pytest.mark.skipif(bool(miss), reason=f"not installed: {', '.join(miss)} "
                                                 "(scripts/python-venv.sh installs them)")


def tb_scalars(logdir):
    """Every scalar in the TensorBoard event files under logdir: tag -> [(step, value)]. Reads
    the TFRecord framing (length, crc, data, crc) and the Event protocol buffer directly."""
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        from tensorboardX.proto import event_pb2
    out = {}
    files = sorted(pathlib.Path(logdir).rglob("events.out.tfevents.*"))
    assert files, f"no event file under {logdir}"
    for f in files:
        data = f.read_bytes()
        i = 0
        while i + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            i += 12
            ev = event_pb2.Event.FromString(data[i:i + n])
            i += n + 4
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


@needs("transformers", "tensorboardX", "mlflow")
def test_huggingface_trainer_energy_reaches_tensorboard_and_mlflow(fake_nvml, tmp_path, env):
    import mlflow
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from greentrain.integrations import GreentrainCallback

    store = tmp_path / "mlruns"
    env.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    env.setenv("MLFLOW_EXPERIMENT_NAME", "greentrain-test")
    env.delenv("DISABLE_MLFLOW_INTEGRATION", raising=False)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=16, n_embd=8, n_layer=1,
                                       n_head=2))
    data = [{"input_ids": torch.randint(0, 32, (16,)), "labels": torch.randint(0, 32, (16,))}
            for _ in range(24)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=6, logging_steps=2,
                             per_device_train_batch_size=4, save_strategy="no", use_cpu=True,
                             report_to=["tensorboard", "mlflow"],
                             logging_dir=str(tmp_path / "tb"), disable_tqdm=True)
    with greentrain.Meter(cpu=False, interval_ms=10) as meter:
        cb = GreentrainCallback(meter)
        trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[cb])
        names = [type(c).__name__ for c in trainer.callback_handler.callbacks]
        assert names[0] == "GreentrainCallback", names  # before the reporters
        trainer.train()
    # 3 logged intervals and the final entry (train_runtime) closing the last one
    assert len(cb.measurements) == 4 and cb.total_j > 0
    assert cb.total_j == pytest.approx(sum(m.energy_j for m in cb.measurements))
    hist = [e for e in trainer.state.log_history if "energy_j" in e]
    assert hist[-1]["energy_total_j"] == pytest.approx(cb.total_j)
    assert hist[-1]["energy_estimated"] is False  # null and bool in the history; 0/1 logged

    tb = tb_scalars(tmp_path / "tb")
    assert "train/energy_total_j" in tb, sorted(tb)
    steps = [s for s, _ in tb["train/energy_total_j"]]
    assert steps == sorted(steps) and len(steps) >= 3
    assert tb["train/energy_total_j"][-1][1] == pytest.approx(cb.total_j, rel=1e-6)
    assert sum(v for _, v in tb["train/energy_j"]) == pytest.approx(cb.total_j, rel=1e-5)

    if hasattr(mlflow, "flush_async_logging"):  # the callback logs asynchronously (mlflow >= 2.8)
        mlflow.flush_async_logging()
    client = mlflow.tracking.MlflowClient(tracking_uri=store.as_uri())
    [exp] = [e for e in client.search_experiments() if e.name == "greentrain-test"]
    [run] = client.search_runs([exp.experiment_id])
    total = client.get_metric_history(run.info.run_id, "energy_total_j")
    assert len(total) == len(steps)
    assert max(m.value for m in total) == pytest.approx(cb.total_j, rel=1e-9)  # cumulative
    per = client.get_metric_history(run.info.run_id, "energy_j")
    assert sum(m.value for m in per) == pytest.approx(cb.total_j, rel=1e-9)
    assert all(m.value == pytest.approx(150.0, rel=0.1)
               for m in client.get_metric_history(run.info.run_id, "energy_avg_power_w"))


@needs("lightning", "tensorboardX")
def test_lightning_trainer_logs_energy_through_log_dict(fake_nvml, tmp_path, monkeypatch):
    import lightning as L
    import torch
    from lightning.pytorch.loggers import TensorBoardLogger

    from greentrain.integrations.lightning import GreentrainLightningCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    # Debian's PyTorch 1.13 on Python 3.11 cannot import torch.distributed._shard (a dataclass
    # with a mutable default, refused since Python 3.11); Lightning < 2.x imports it to register
    # ShardedTensor state-dict hooks in every LightningModule. Those hooks are not used here.
    try:
        import torch.distributed._shard  # noqa: F401
    except ValueError:
        from lightning.pytorch.core import module as lm
        monkeypatch.setattr(lm.LightningModule,
                            "_register_sharded_tensor_state_dict_hooks_if_available",
                            lambda self: None)
    torch.manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(40, 8), torch.randn(40, 1))
    loader = torch.utils.data.DataLoader(ds, batch_size=4)
    logger = TensorBoardLogger(str(tmp_path / "tb"), name="tiny")
    with greentrain.Meter(cpu=False, interval_ms=10) as meter:
        cb = GreentrainLightningCallback(meter)
        trainer = L.Trainer(max_epochs=2, log_every_n_steps=1, logger=logger, callbacks=[cb],
                            accelerator="cpu", enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(Tiny(), loader)
    assert len(cb.logged) == 20 and cb.unknown_steps == 0
    tb = tb_scalars(logger.log_dir)
    total = tb["energy/total_j"]
    assert len(total) == 20
    assert [v for _, v in total] == sorted(v for _, v in total)  # cumulative
    assert total[-1][1] == pytest.approx(cb.total_j, rel=1e-6)
    assert len(tb["energy/step_j"]) == 20 and "loss" in tb
    assert all(v > 0 for _, v in tb["energy/step_j"])
    assert cb.tail_j is not None


@needs("tensorboardX", "mlflow")
def test_plain_pytorch_loop_writes_to_summarywriter_and_mlflow(fake_nvml, tmp_path):
    import mlflow
    from tensorboardX import SummaryWriter

    from greentrain.integrations import EnergyLogger, log_measurement

    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    mlflow.set_experiment("plain-loop")
    writer = SummaryWriter(str(tmp_path / "tb"))
    with greentrain.Meter(cpu=False, interval_ms=10) as meter, mlflow.start_run() as run:
        log = EnergyLogger(meter, writer=writer, mlflow=mlflow)
        for _ in range(5):
            with log.step(tokens=64):
                sum(range(200000))
        with meter.window("eval") as w:
            sum(range(100000))
        sent = log_measurement(w.measurement, writer=writer, mlflow=mlflow, step=5,
                               prefix="eval/energy_")
    writer.close()
    assert set(sent) >= {"eval/energy_j", "eval/energy_duration_s"}
    tb = tb_scalars(tmp_path / "tb")
    assert [s for s, _ in tb["energy/total_j"]] == [0, 1, 2, 3, 4]
    assert tb["energy/total_j"][-1][1] == pytest.approx(log.total_j, rel=1e-6)
    assert tb["energy/j_per_token"][0][1] == pytest.approx(log.records[0].joules_per_token,
                                                           rel=1e-6)
    client = mlflow.tracking.MlflowClient()
    hist = client.get_metric_history(run.info.run_id, "energy/total_j")
    assert [m.step for m in hist] == [0, 1, 2, 3, 4]
    assert hist[-1].value == pytest.approx(log.total_j)
    assert client.get_metric_history(run.info.run_id, "eval/energy_j")[0].value == \
        pytest.approx(w.measurement.energy_j)
