"""The one model class of the answer's learned parts: a logistic regression over standardised
features, fitted by scikit-learn and kept as JSON (the answer check, the passage ranker and the
short answer's term scorer each subclass it with its own features and threshold's meaning)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Logistic:
    """P(yes) = sigmoid(((x - mean) / scale) @ coef + intercept) over the features ``names``;
    ``threshold`` is the fitted bar its user applies."""

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float

    @staticmethod
    def fields(data: dict, key: str = "features") -> dict:
        """The fields of a fitted file's JSON (its feature names under ``key``)."""
        return {"names": tuple(data[key]), "mean": np.asarray(data["mean"], float),
                "scale": np.asarray(data["scale"], float),
                "coef": np.asarray(data["coef"], float),
                "intercept": float(data["intercept"]), "threshold": float(data["threshold"])}

    @classmethod
    def read(cls, path: Path, names: tuple[str, ...]) -> dict:
        """A fitted file's JSON; ValueError when it was fitted on other features than
        ``names`` (the engine's features changed: it must be refitted)."""
        data = json.loads(Path(path).read_text())
        if tuple(data["features"]) != tuple(names):
            raise ValueError(f"{path} was fitted on other features than this engine's; refit it "
                             "(its card names the command)")
        return data

    @classmethod
    def load_checked(cls, path: Path, names: tuple[str, ...]):
        """The model a fitted file holds, checked to be fitted on ``names`` (``read``)."""
        return cls(**cls.fields(cls.read(path, names)))

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """P(yes) for each row of feature values (in ``names``' order)."""
        z = ((np.asarray(rows, float) - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))
