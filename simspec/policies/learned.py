"""Learned policies at inference: the actor networks ``simspec.train`` exports as plain arrays,
run in numpy (no SB3 or torch), deterministically (argmax), on ``simspec.policies.features``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.policies.algorithms import register_learned
from simspec.policies.base import BatchPolicy
from simspec.policies.features import depth_features, radar_features, resps_features, size_features


@dataclass(frozen=True)
class MLP:
    """SB3's actor: tanh hidden layers, then linear action logits; ``layers[i] = (W [in, out], b)``."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]

    def logits(self, x: np.ndarray) -> np.ndarray:
        for weight, bias in self.layers[:-1]:
            x = np.tanh(x @ weight + bias)
        weight, bias = self.layers[-1]
        return x @ weight + bias

    def act(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(x), axis=1)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{i}.{k}": v for i, pair in enumerate(self.layers) for k, v in zip(("weight", "bias"), pair)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> MLP:
        count = sum(1 for k in arrays if k.startswith(prefix + ".") and k.endswith(".weight"))
        if count == 0:
            raise KeyError(prefix)
        return cls(tuple((arrays[f"{prefix}.{i}.weight"].astype(np.float32),
                          arrays[f"{prefix}.{i}.bias"].astype(np.float32)) for i in range(count)))


@dataclass(frozen=True)
class LSTMNet:
    """One LSTM cell (torch's gate order i, f, g, o) and a linear CONTINUE/STOP head."""

    weight_ih: np.ndarray  # [4H, inputs]
    weight_hh: np.ndarray  # [4H, H]
    bias: np.ndarray  # [4H] (b_ih + b_hh)
    head_weight: np.ndarray  # [2, H]
    head_bias: np.ndarray  # [2]

    @property
    def hidden(self) -> int:
        return self.weight_hh.shape[1]

    def step(self, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gates = x @ self.weight_ih.T + h @ self.weight_hh.T + self.bias
        i, f, g, o = np.split(gates, 4, axis=1)
        sigmoid = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return h @ self.head_weight.T + self.head_bias, h, c

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{k}": v for k, v in self.__dict__.items()}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> LSTMNet:
        return cls(**{k: arrays[f"{prefix}.{k}"].astype(np.float32) for k in cls.__dataclass_fields__})


CONTINUE = 1


class LTDPolicy(BatchPolicy):
    """LTD: the depth network says CONTINUE/STOP after every draft step, the size network picks V from
    ``sizes``; either may be absent (a phase of training): then ``depth`` / ``size``."""

    def __init__(self, width: int, depth_max: int, sizes: np.ndarray, depth_net: MLP | None = None,
                 size_net: MLP | None = None, depth: int | None = None, size: int = 60, name: str = "ltd") -> None:
        self.width, self.depth_max, self.sizes = width, depth_max, np.asarray(sizes, dtype=np.int64)
        self.depth_net, self.size_net = depth_net, size_net
        self.depth, self.size, self.name = depth or depth_max, size, name
        self.context = np.zeros(0)

    def reset_batch(self, n: int) -> None:
        self.context = np.zeros(n)

    def plan_batch(self, rows, context):
        self.context[rows] = context
        depth = self.depth_max if self.depth_net is not None else self.depth
        return np.full(len(rows), depth), np.full(len(rows), self.size)

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        if self.depth_net is None:
            return depth < planned
        go = self.depth_net.act(depth_features(frontier, depth, self.context[rows], self.depth_max)) == CONTINUE
        return go & (depth < planned)

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        if self.size_net is None:
            return planned
        features = size_features(tree_scores, depth, self.context[rows], self.depth_max, self.width)
        return self.sizes[self.size_net.act(features)]


class ReSpSPolicy(BatchPolicy):
    """Re-SpS: every ``hold`` cycles the network picks a (TT, d) pair from ``actions`` (or a (TT, d, k)
    triple: each verified node keeps its k best children, the paper's top-k within the drafted trees)
    seeing the interval just ended; the tree budget stays fixed in between (30 cycles at inference)."""

    def __init__(self, width: int, depth_max: int, actions: np.ndarray, net: MLP, hold: int = 30,
                 name: str = "resps") -> None:
        self.width, self.depth_max, self.actions, self.net = width, depth_max, np.asarray(actions), net
        self.hold, self.name = hold, name
        self.reset_batch(0)

    def reset_batch(self, n: int) -> None:
        self.left = np.zeros(n, dtype=np.int64)  # cycles left in the current interval
        self.choice = np.zeros(n, dtype=np.int64)
        self.accepted = np.zeros(n)  # this interval's sums
        self.cycles = np.zeros(n)
        self.last = np.zeros((n, self.actions.shape[1] + 1))  # the interval before: mean accepted, the action

    def plan_batch(self, rows, context):
        starting = self.left[rows] == 0
        due = rows[starting]
        if len(due):
            ended = due[self.cycles[due] > 0]
            self.last[ended] = np.concatenate([(self.accepted[ended] / self.cycles[ended])[:, None],
                                               self.actions[self.choice[ended]]], 1)
            self.choice[due] = self.net.act(resps_features(context[starting], self.last[due], self.depth_max,
                                                           self.width))
            self.left[due], self.accepted[due], self.cycles[due] = self.hold, 0.0, 0.0
        self.left[rows] -= 1
        total, depth = self.actions[self.choice[rows], 0], self.actions[self.choice[rows], 1]
        return depth, total

    def children_batch(self, rows):
        return self.actions[self.choice[rows], 2] if self.actions.shape[1] == 3 else None

    def observe_batch(self, rows, depth, size, accepted):
        self.accepted[rows] += accepted
        self.cycles[rows] += 1


class RadarPolicy(BatchPolicy):
    """RADAR: an LSTM reads ``radar_features`` after each draft call and says CONTINUE/STOP;
    its state restarts every cycle. Verifies ``size`` nodes."""

    def __init__(self, width: int, depth_max: int, net: LSTMNet, size: int, name: str = "radar") -> None:
        self.width, self.depth_max, self.net, self.size, self.name = width, depth_max, net, size, name
        self.reset_batch(0)

    def reset_batch(self, n: int) -> None:
        self.h = np.zeros((n, self.net.hidden), dtype=np.float32)
        self.c = np.zeros((n, self.net.hidden), dtype=np.float32)
        self.previous_best = np.zeros(n, dtype=np.float32)

    def plan_batch(self, rows, context):
        self.h[rows], self.c[rows], self.previous_best[rows] = 0.0, 0.0, 0.0
        return np.full(len(rows), self.depth_max), np.full(len(rows), self.size)

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        features = radar_features(frontier, self.previous_best[rows], depth - 1, self.depth_max - 1, self.width)
        logits, self.h[rows], self.c[rows] = self.net.step(features, self.h[rows], self.c[rows])
        self.previous_best[rows] = frontier[:, 0]
        return (np.argmax(logits, axis=1) == CONTINUE) & (depth < planned)


@register_learned("ltd", help="depth + size PPO, co-adapted", fields={"sizes": list, "size": int})
def _ltd(spec: dict, arrays: dict[str, np.ndarray], name: str) -> LTDPolicy:
    depth_net = MLP.from_arrays(arrays, "depth") if spec.get("has_depth_net", True) else None
    size_net = MLP.from_arrays(arrays, "size") if spec.get("has_size_net", True) else None
    return LTDPolicy(spec["width"], spec["depth_max"], np.array(spec["sizes"]), depth_net, size_net,
                     spec.get("depth"), spec["size"], name=name)


@register_learned("resps", help="cached tree budget, PPO", fields={"actions": list, "hold": int})
def _resps(spec: dict, arrays: dict[str, np.ndarray], name: str) -> ReSpSPolicy:
    return ReSpSPolicy(spec["width"], spec["depth_max"], np.array(spec["actions"]), MLP.from_arrays(arrays, "net"),
                       spec["hold"], name=name)


@register_learned("radar", help="LSTM continue/stop, offline REINFORCE", fields={"size": int})
def _radar(spec: dict, arrays: dict[str, np.ndarray], name: str) -> RadarPolicy:
    return RadarPolicy(spec["width"], spec["depth_max"], LSTMNet.from_arrays(arrays, "lstm"), spec["size"], name=name)
