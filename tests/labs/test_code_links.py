"""Every code link in every lab names a file and a definition that exist (one shared check for all labs:
tests/labs/code_links.py)."""

import pytest

from tests.labs import code_links
from tests.labs.code_links import lab_links, markdown_links, missing

LINKS = lab_links()


def test_links_found_in_every_lab_with_code():
    where = {w for w, _, _ in LINKS}
    assert {f"0{i}" for i in range(1, 7)} <= {w[:2] for w in where if w.endswith(".py")}
    assert "lab08.yaml" in where and sum(bool(n) for _, _, n in LINKS) >= 80


@pytest.mark.parametrize("where,path,name", LINKS, ids=[f"{w}:{p}::{n}" for w, p, n in LINKS])
def test_code_link_names_a_definition_that_exists(where, path, name):
    assert missing(path, name) is None, (where, missing(path, name))


def test_the_check_can_fail():
    text = ("# see [worker/graph_capture.py](../minivllm/worker/graph_capture.py) (`capture_graphs`, `nope_xyz`); "
            "later `not_counted`.\n# [config.py](../minivllm/config.py) `EngineConfig.cudagraph_mode`.")
    links = markdown_links(text)
    assert links == [("minivllm/worker/graph_capture.py", "capture_graphs"),
                     ("minivllm/worker/graph_capture.py", "nope_xyz"),
                     ("minivllm/config.py", "EngineConfig.cudagraph_mode")]
    assert [missing(p, n) is None for p, n in links] == [True, False, True]
    assert missing("minivllm/worker/cudagraph_dispatcher.py", "CUDAGraphDispatcher.dispatch")
    assert missing("minivllm/no_such_file.py")
    assert code_links.yaml_code_fields({"a": [{"code": "x.py::f"}, {"b": {"code": "y.py"}}]}) == ["x.py::f", "y.py"]
