"""Classification on the same exchange, ledger and harness as RL."""
