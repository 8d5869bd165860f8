"""The engine's own FX passes, run by Inductor on every compiled piece (vLLM: vllm/compilation/passes):
pass_config.py says which run (compilation_config={"pass_config": {...}}), pass_manager.py runs them."""
