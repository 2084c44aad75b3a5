"""Fitting a classifier head on embeddings: the split, the softmax regression and its accuracy.

Pure numeric code (numpy; torch imported on use), run by the trainer's task
(worker/tasks/training.py) and usable without a worker.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

TRAIN_EPOCHS = 300
LEARNING_RATE = 0.1
WEIGHT_DECAY = 1e-4


def stratified_split(labels: list[str], test_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Train and held-out indexes; every label keeps at least one example on each side."""
    rng = random.Random(seed)
    train, test = [], []
    for label in sorted(set(labels)):
        indexes = [i for i, value in enumerate(labels) if value == label]
        rng.shuffle(indexes)
        held = min(len(indexes) - 1, max(1, round(len(indexes) * test_fraction)))
        test += indexes[:held]
        train += indexes[held:]
    return sorted(train), sorted(test)


def fit_softmax_head(
    features: np.ndarray, targets: np.ndarray, classes: int, on_epoch: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression on embeddings with PyTorch (full batch, Adam); (weights, bias)."""
    import torch

    torch.manual_seed(0)
    x = torch.from_numpy(features)
    y = torch.from_numpy(targets)
    weights = torch.zeros(classes, x.shape[1], requires_grad=True)
    bias = torch.zeros(classes, requires_grad=True)
    optimizer = torch.optim.Adam([weights, bias], lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    for epoch in range(TRAIN_EPOCHS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ weights.T + bias, y)
        loss.backward()
        optimizer.step()
        if on_epoch and (epoch + 1) % 50 == 0:
            on_epoch(epoch + 1)
    return weights.detach().numpy().copy(), bias.detach().numpy().copy()


def accuracy(predicted: np.ndarray, truth: np.ndarray) -> float:
    return float((predicted == truth).mean()) if len(truth) else 0.0
