"""Attention: metadata for one step, the forward context, and the backend-dispatching op."""
