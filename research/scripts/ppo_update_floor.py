"""Lower bound of LTD paper-schedule update time on this CPU: the depth and size policies' actor and critic
(SB3's MlpPolicy shapes, tanh), one fused-Adam step on a minibatch of 256, in bare torch. Run:
python research/scripts/ppo_update_floor.py   (output committed in research/runs/bench/ppo-update-floor.txt)"""
import time

import torch

torch.manual_seed(0)
def nets(d, pi, vf, nact):
    def mlp(d, layers, out):
        mods, prev = [], d
        for h in layers:
            mods += [torch.nn.Linear(prev, h), torch.nn.Tanh()]
            prev = h
        mods.append(torch.nn.Linear(prev, out))
        return torch.nn.Sequential(*mods)
    return mlp(d, pi, nact), mlp(d, vf, 1)
for name, d, pi, vf, na in [("depth", 102, (1024,), (1024, 256), 2), ("size", 1012, (1024, 256), (1024, 256), 12)]:
    p, v = nets(d, pi, vf, na)
    params = list(p.parameters()) + list(v.parameters())
    for mode in ["fp32", "bf16"]:
        opt = torch.optim.Adam(params, lr=1e-4, fused=True)
        x = torch.randn(256, d)
        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
                loss = p(x).logsumexp(-1).mean() + v(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        for _ in range(20):
            step()
        t = time.perf_counter()
        n = 200
        for _ in range(n):
            step()
        dt = (time.perf_counter() - t) / n
        print(name, mode, f"{dt*1e3:.2f} ms/grad step -> {256/20/dt:.0f} env steps/s (train only)")
