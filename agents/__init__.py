"""Learners: the batched A2C population. Knows nothing of servers."""
