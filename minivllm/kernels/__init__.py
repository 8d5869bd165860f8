"""Attention and KV-cache kernels: Triton on CUDA, pure PyTorch everywhere (the reference)."""
