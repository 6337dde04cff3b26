"""RADAR: offline REINFORCE of a small LSTM that reads the draft's confidences after each call and
says CONTINUE or STOP, trained on the table of accepted lengths per prefix and number of calls
(``radar_dataset``), an episode being the MDP ``simspec.sim.envs.Radar`` describes. Batches of
episodes roll out at once; the baseline is the batch's mean return. At T > 0 an episode's return
is that of the tree's expected accepted length, or (``returns="sampled"``, the paper's offline
data) of one draw from the tree's acceptance-length law. TensorBoard scalars go to
a ``radar_1/`` run under the PPO trainers' tags."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from simspec.policies.learned import LSTMNet, RadarPolicy
from simspec.sim.envs import cycle_reward, greedy_token_seconds, radar_cost, radar_dataset, radar_observations
from simspec.train.log import TrainingLog
from simspec.train.setting import Setting, Trained


@dataclass(frozen=True)
class RadarConfig:
    hidden: int = 64
    learning_rate: float = 1e-4  # the paper's
    updates: int = 4000
    batch: int = 512  # episodes per update
    alpha: float = 0.01  # cost of a CONTINUE, in reward units (greedy-relative throughput)
    validations: int = 20


RADAR_PRESETS = {"paper": RadarConfig(), "fast": RadarConfig(updates=1000, validations=10),
                 # every part of a run (updates, validation, checkpoint, export) in about a second: learns little
                 "smoke": RadarConfig(updates=50, validations=2)}


class RadarNet(torch.nn.Module):
    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        # one LSTM over the calls, not a cell per call: the same cell (and initial weights), and
        # its fused loop trains about a quarter faster on a CPU core
        self.lstm = torch.nn.LSTM(inputs, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [batch, calls, 2] for observation sequences [batch, calls, inputs]."""
        return self.head(self.lstm(x)[0])

    def export(self) -> LSTMNet:
        numpy = lambda p: p.detach().numpy().copy()  # noqa: E731
        lstm = self.lstm
        return LSTMNet(numpy(lstm.weight_ih_l0), numpy(lstm.weight_hh_l0), numpy(lstm.bias_ih_l0 + lstm.bias_hh_l0),
                       numpy(self.head.weight), numpy(self.head.bias))


def episode_returns(setting: Setting, config: RadarConfig, policy_seconds: float) -> Callable[[np.ndarray], np.ndarray]:
    """Scores accepted lengths [prefixes, t_max] as the returns of stopping after t calls (T_gen and
    the reward's unit computed once, outside the training loop)."""
    s, t = setting, np.arange(1, setting.depth_max)
    t0, tf, tp = radar_cost(s.fit, s.cost, s.grid_size, policy_seconds)
    seconds, unit = (t0 + tf * t + tp * (t + 1))[None, :], greedy_token_seconds(s.fit, s.cost)
    return lambda accepted: cycle_reward(s.reward, accepted, seconds, unit) - config.alpha * (t - 1)[None, :]


def train_radar(setting: Setting, config: RadarConfig, log: TrainingLog, progress: Callable[[int], None],
                policy_seconds: float = 0.0, tensorboard: str | None = None, returns: str = "expected") -> Trained:
    """``returns="sampled"``: each episode's accepted length drawn from its tree's law (sampled
    traces), as the paper's offline data; the same expected return as "expected", with its variance."""
    s = setting
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    traces, t_max = s.fit, s.depth_max - 1
    positions = np.arange(traces.positions)
    observations = torch.from_numpy(np.stack(
        [radar_observations(traces, positions, np.full(traces.positions, t)) for t in range(1, t_max + 1)], axis=1))
    returns_of = episode_returns(s, config, policy_seconds)
    expected = torch.from_numpy(returns_of(radar_dataset(traces, s.grid_size, t_max)))
    # its own stream: the expected variant's runs stay what they were
    draws = np.random.default_rng([s.seed, 1]) if returns == "sampled" and traces.sampled else None
    net = RadarNet(observations.shape[2], config.hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    steps_axis = torch.arange(t_max)

    def deployed(lstm: LSTMNet) -> RadarPolicy:
        return RadarPolicy(s.width, s.depth_max, lstm, s.grid_size)

    best_score, best_state, env_steps = -np.inf, None, 0
    every = max(1, config.updates // config.validations)
    with _writer(tensorboard) as writer:
        started = time.perf_counter()
        for update in range(1, config.updates + 1):
            rows = torch.from_numpy(rng.integers(0, traces.positions, config.batch))
            dist = torch.distributions.Categorical(logits=net(observations[rows]))
            actions = dist.sample()
            actions[:, -1] = 0  # t_max forces a stop
            stop = torch.argmax((actions == 0).to(torch.int64), dim=1)  # first STOP
            decided = (steps_axis[None, :] <= stop[:, None]) & (steps_axis[None, :] < t_max - 1)
            log_prob = (dist.log_prob(actions) * decided).sum(dim=1)
            if draws is None:
                ret = expected[rows, stop]
            else:  # one draw per episode, at the tree it stopped at
                drawn = returns_of(radar_dataset(traces, s.grid_size, t_max, rows.numpy(), draws))
                ret = torch.from_numpy(drawn[np.arange(len(rows)), stop.numpy()])
            loss = -((ret - ret.mean()) * log_prob).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            env_steps += int(stop.sum()) + config.batch
            progress(1)
            score = None
            if update % every == 0 or update == config.updates:
                score = s.validation_speedup(deployed(net.export()))
                if score > best_score:
                    best_score, best_state = score, copy.deepcopy(net.state_dict())
            if update % 10 == 0 or score is not None:
                log.add("reinforce", env_steps, float(ret.mean()), score)
                if writer is not None:  # the training.csv row, with the loss and the throughput
                    writer.add_scalar("train/loss", loss.item(), env_steps)
                    writer.add_scalar("rollout/reward", float(ret.mean()), env_steps)
                    writer.add_scalar("time/fps", env_steps / (time.perf_counter() - started), env_steps)
                    if score is not None:
                        writer.add_scalar("validation/speedup", score, env_steps)
    net.load_state_dict(best_state)
    return Trained(deployed(net.export()), float(best_score), env_steps, {"lstm": net})


def _writer(tensorboard: str | None):
    """A TensorBoard writer into ``tensorboard``'s RADAR run (closed, and so flushed, on exit), or none."""
    if tensorboard is None:
        return nullcontext()
    from torch.utils.tensorboard import SummaryWriter  # imported late: it loads tensorboard

    # SB3's layout (tb/<tb_log_name>_<run>/), so that `tensorboard --logdir policies` lists RADAR's run like theirs
    return SummaryWriter(str(Path(tensorboard) / "radar_1"))


# The profile's ``policy_seconds`` entry for T_policy (written by ``simspec calibrate``).
RADAR_TIMING_KEY = "radar_call"


def radar_call_seconds(width: int, depth_max: int, size: int, hidden: int = RadarConfig.hidden,
                       repeats: int = 50) -> float:
    """T_gen's T_policy: one RADAR decision cycle at depth 3, of an untrained network (weights do not matter)."""
    from simspec.policies.timing import policy_latency

    untrained = RadarPolicy(width, depth_max, RadarNet(width + 1, hidden).export(), size)
    return policy_latency({"radar": untrained}, width, 3, repeats)["radar"]
