"""Training-loop integrations.

- ``EnergyLogger``: a plain PyTorch (or any) loop helper logging joules per step and per token.
- ``GreentrainCallback`` / ``add_to_trainer``: a Hugging Face ``transformers`` TrainerCallback
  adding energy to the trainer's logs; imported only when asked for, and only if
  ``transformers`` is installed.
"""

from typing import Any

from .loop import EnergyLogger, StepRecord

__all__ = ["EnergyLogger", "StepRecord", "GreentrainCallback", "add_to_trainer"]


def __getattr__(name: str) -> Any:
    if name in ("GreentrainCallback", "add_to_trainer"):
        try:
            from . import huggingface
        except ImportError as e:  # transformers missing
            raise ImportError(f"greentrain.integrations.{name} needs the transformers package "
                              f"(pip install transformers): {e}") from e
        return getattr(huggingface, name)
    raise AttributeError(f"module 'greentrain.integrations' has no attribute {name!r}")
