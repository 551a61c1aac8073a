"""Environments: lanes of a gymnasium vector env, and the state grid."""
