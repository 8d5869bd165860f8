"""Helpers the lab notebooks call: device detection, recorded-result loading, figures, quizzes.

    from minivllm_labs import open_lab
    lab = open_lab("01")   # the device, the recorded results, the lab's code, show and quiz

Names are imported lazily: `python -m minivllm_labs.record` runs on GPU machines without the labs extras
(plotly, ipywidgets), so nothing here may import them up front.
"""

_EXPORTS = {
    "REPO_ROOT": "common", "detect_device": "common", "gpu_only": "common", "lab_model": "common",
    "describe_model": "common", "round_floats": "common",
    "load_recorded": "recorded", "check_provenance": "recorded", "describe_provenance": "recorded",
    "RecordedResultsMissing": "recorded", "ProvenanceError": "recorded",
    "quiet_engine_logs": "common", "figure": "plots", "show": "plots", "open_lab": "opening", "Lab": "opening",
    "Question": "quiz", "NumericQuestion": "quiz", "Option": "quiz", "grade": "quiz", "quiz_widget": "quiz_show",
    "show_quiz": "quiz_show", "parse_choice": "quiz", "parse_number": "quiz", "quiz_html": "quiz_html", "Claim": "catalog", "LabInfo": "catalog",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"minivllm_labs.{_EXPORTS[name]}"), name)
    raise AttributeError(name)


__all__ = sorted(_EXPORTS)
