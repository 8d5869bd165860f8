"""The opening cell of every lab notebook: `lab = open_lab("02")`.

Why one call: every notebook started with the same dozen lines (imports, engine logs off, the device, the
recorded H200 results loaded with their provenance or the message saying how to make them), and a change to
that setup meant eight edits. open_lab does it once and prints only what is stable between machines (the kind
of device, the provenance line), so the cell is nbval-checked like before.

The returned Lab carries what the cells use: `lab.device`, `lab.rec` (the recorded results, or None),
`lab.compare()` (every recorded GPU beside the H200), `lab.toggle()` (the live control),
`lab.show(fig)`, `lab.quiz(question, results)`, `lab.gpu_only(...)`, `lab.model()` and `lab.describe_model`;
any other name is the lab's own (`lab.plot_bound` is minivllm_labs.lab01.plot_bound, or the views' function
of that name).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from minivllm_labs.common import Device, describe_model, detect_device, gpu_only, lab_model, quiet_engine_logs
from minivllm_labs.recorded import ProvenanceError, RecordedResultsMissing, describe_provenance, load_recorded


class Lab:
    """One lab as its notebook sees it: the device, the recorded results, the lab's code and views."""

    def __init__(self, number: str) -> None:
        self.name = f"lab{number}"
        self.code: ModuleType = importlib.import_module(f"minivllm_labs.lab{number}")
        try:
            self.views: ModuleType | None = importlib.import_module(f"minivllm_labs.lab{number}_views")
        except ModuleNotFoundError:
            self.views = None
        self.device: Device = detect_device()
        self.rec: dict | None = None
        try:
            self.rec = load_recorded(self.name)
            self.recorded = describe_provenance(self.rec)
        except (RecordedResultsMissing, ProvenanceError) as e:
            self.recorded = str(e)

    def __getattr__(self, name: str) -> Any:
        for module in (self.code, self.views):
            if module is not None and hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"{self.name} has no {name!r} (in {self.code.__name__} or its views)")

    @staticmethod
    def show(fig) -> None:
        from minivllm_labs.plots import show

        show(fig)

    def quiz(self, q, results: dict | None | str = "recorded") -> None:
        """Show a question graded against `results` (default: this lab's recorded results)."""
        from minivllm_labs.quiz_show import show_quiz

        show_quiz(q, self.rec if results == "recorded" else results)

    def compare(self) -> None:
        """Every recorded device side by side: this lab's figure with a series per device, its table per
        device, and the device each verdict rests on (devices.compare)."""
        from minivllm_labs.devices import compare

        compare(self.name)

    def toggle(self) -> None:
        """This lab's live control: one engine knob, re-run on a click, the figure redrawn (toggles.py)."""
        from minivllm_labs.toggles import toggle_widget

        toggle_widget(self.name)

    def toggle_all(self) -> None:
        """Every option of this lab's control run once, and the figure (a page without a kernel shows it)."""
        from minivllm_labs.toggles import toggle_all

        toggle_all(self.name)

    @staticmethod
    def progress() -> None:
        """Your score per lab and per topic across kernel restarts, and what to revisit (progress.py)."""
        from minivllm_labs.progress import progress_text

        print(progress_text())

    gpu_only = staticmethod(gpu_only)
    model = staticmethod(lab_model)
    describe_model = staticmethod(describe_model)


def open_lab(number: str, lang: str | None = None) -> Lab:
    """Set a notebook up for lab `number` ("01".."10"): engine INFO logs off, then print the device and where
    the recorded H200 numbers come from (or how to make them), and show the language switch (language.py:
    "en", "zh" or "both"; default $MINIVLLM_LAB_LANG, else the locale's)."""
    from IPython.display import display

    from minivllm_labs.language import default_lang, set_current, switch_html

    quiet_engine_logs()
    lab = Lab(number)
    lab.lang = default_lang(lang)
    set_current(lab.lang)
    print(lab.device)
    print(lab.recorded)
    display({"text/plain": "Language · 语言: EN / 中文 / EN + 中文", "text/html": switch_html(lab.lang)}, raw=True)
    return lab
