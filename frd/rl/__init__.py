"""Federated RL on Gymnasium: the batched runner, the methods (strategies), the experiment driver,
its summaries and plots, and the ``frd rl`` / ``frd compare`` commands."""
