"""Speculative decoding (vLLM's v1/spec_decode): n-gram drafts, their verification, and the counters."""
