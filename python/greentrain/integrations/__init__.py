"""Training-loop integrations.

- ``EnergyLogger``: a plain PyTorch (or any) loop helper logging joules per step and per token,
  to a TensorBoard ``SummaryWriter`` and to MLflow when given them; ``log_measurement`` does it
  for any window.
- ``GreentrainCallback`` / ``add_to_trainer``: a Hugging Face ``transformers`` TrainerCallback
  adding energy to the trainer's logs (so TensorBoard, MLflow and every reporter get it);
  imported only when asked for, and only if ``transformers`` is installed.
- ``greentrain.integrations.lightning.GreentrainLightningCallback``: a PyTorch Lightning callback
  logging through ``log_dict`` (import that module; it needs ``lightning`` or
  ``pytorch_lightning``).
"""

from typing import Any

from .loop import EnergyLogger, StepRecord, log_measurement

__all__ = ["EnergyLogger", "StepRecord", "GreentrainCallback", "add_to_trainer",
           "log_measurement"]


def __getattr__(name: str) -> Any:
    if name in ("GreentrainCallback", "add_to_trainer"):
        try:
            from . import huggingface
        except ImportError as e:  # transformers missing
            raise ImportError(f"greentrain.integrations.{name} needs the transformers package "
                              f"(pip install transformers): {e}") from e
        return getattr(huggingface, name)
    raise AttributeError(f"module 'greentrain.integrations' has no attribute {name!r}")
