"""Training policies against replay: SB3 PPO (LTD, Re-SpS) over a VecEnv, REINFORCE (RADAR), and `train --simulated`."""
