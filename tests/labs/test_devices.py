"""Any GPU recorded and compared: `record all` carries on past a failed lab and says why; a device folder
the labs have never seen is listed, loaded and drawn beside the H200 (the H200's records copied and
relabelled stand in for it); Lab 07's floors use each device's measured bandwidth, not a datasheet."""

from __future__ import annotations

import json
import shutil

import pytest
from minivllm_labs import devices
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.record import record_all, update_index

H200 = REPO_ROOT / "assets" / "results" / "h200"


def relabelled_root(tmp_path, name="NVIDIA L4", slug="l4"):
    """A results root holding the H200's lab records and a copy of them relabelled as another GPU."""
    root = tmp_path / "results"
    shutil.copytree(H200, root / "h200", ignore=shutil.ignore_patterns("labs_gpu"))
    (root / slug).mkdir()
    for f in H200.glob("lab[0-9][0-9].json"):
        data = json.loads(f.read_text())
        data["provenance"]["gpu"] = name
        data["provenance"]["device"] = {"name": name, "copy_GBps": 250.0, "total_memory_GiB": 22.0}
        if "copy_bandwidth" in data:
            data["copy_bandwidth"]["bytes_per_s"] = 250e9
            data["physics"]["measured_copy_bytes_per_s"] = 250e9
        (root / slug / f.name).write_text(json.dumps(data))
    return root


@pytest.mark.parametrize("name,slug", [("NVIDIA H200", "h200"), ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
                                       ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("Tesla T4", "tesla-t4")])
def test_gpu_slug(name, slug):
    assert devices.gpu_slug(name) == slug


def test_gpu_slug_refuses_an_empty_name():
    with pytest.raises(ValueError, match="folder name"):
        devices.gpu_slug("!!")


def test_a_new_device_is_listed_after_the_reference(tmp_path, monkeypatch):
    monkeypatch.setenv(devices.RESULTS_ROOT_ENV, str(relabelled_root(tmp_path)))
    assert devices.recorded_devices("lab01") == ["h200", "l4"]
    recs = devices.device_records("lab01")
    assert [devices.device_name(r) for r in recs.values()] == ["NVIDIA H200", "NVIDIA L4"]
    assert "NVIDIA L4 (l4)" in devices.devices_line("lab01")
    assert devices.measured(recs["l4"])["copy_GBps"] == 250.0


def test_side_by_side_draws_every_device_and_keeps_the_toggle(tmp_path, monkeypatch):
    from minivllm_labs import lab01_views

    monkeypatch.setenv(devices.RESULTS_ROOT_ENV, str(relabelled_root(tmp_path)))
    recs = devices.device_records("lab01")
    one = lab01_views.plot_tpot(recs["h200"])
    both = devices.side_by_side(lab01_views.plot_tpot, recs)
    assert len(both.data) == 2 * len(one.data)
    names = [t.name for t in both.data]
    assert any(n.endswith("· NVIDIA H200") for n in names) and any(n.endswith("· NVIDIA L4") for n in names)
    for menu in both.layout.updatemenus or ():
        for b in menu.buttons:
            assert len(b.args[0]["visible"]) == len(both.data)


def test_lab07_floors_use_each_devices_measured_bandwidth(tmp_path, monkeypatch):
    from minivllm_labs import lab07, lab07_views

    assert "H200" not in lab07.BANDWIDTH  # no datasheet figure for a device the labs record themselves
    monkeypatch.setenv(devices.RESULTS_ROOT_ENV, str(relabelled_root(tmp_path)))
    recs = devices.device_records("lab07")
    fig = lab07_views.plot_floors_devices(recs)
    xs = [x.replace("<br>", " ") for x in fig.data[0].x]  # long category labels wrap (plots.wrap_label)
    assert "NVIDIA H200 (measured)" in xs and "NVIDIA L4 (measured)" in xs
    l4 = fig.data[0].y[xs.index("NVIDIA L4 (measured)")]
    assert l4 == pytest.approx(lab07.tpot_floor_ms(lab07.MODEL_PARAMS["LLaMA-2-7B"], 250e9), rel=1e-3)


def test_record_all_carries_on_past_a_failed_lab(tmp_path, capsys):
    rc = record_all(["lab-that-fails", "lab07"], tmp_path, model=None, quick=True, timeout_s=300)
    out = capsys.readouterr().out
    assert rc == 1
    assert "lab-that-fails FAILED" in out and "invalid choice" in out  # which lab and why
    assert "recorded 1 of 2 labs" in out
    data = json.loads((tmp_path / "lab07.json").read_text())
    assert data["lab"] == "lab07" and data["provenance"]["command"].startswith("python -m minivllm_labs.record")


def test_record_all_keeps_the_folder_index_true(tmp_path):
    folder = tmp_path / "h200"
    shutil.copytree(H200, folder, ignore=shutil.ignore_patterns("labs_gpu"))
    rec = json.loads((H200 / "lab07.json").read_text())
    rec["provenance"].update(commit="abc1234", date="2027-01-01T00:00:00+00:00", dirty=False)
    (folder / "lab07.json").write_text(json.dumps(rec))
    rec08 = {**rec, "lab": "lab08"}
    (folder / "lab08.json").write_text(json.dumps(rec08))
    update_index(folder, [folder / "lab07.json", folder / "lab08.json"])
    import yaml

    index = yaml.safe_load((folder / "index.yaml").read_text())
    entries = {e["file"]: e for e in index["files"]}
    assert entries["lab07.json"]["commit"] == "abc1234" and entries["lab07.json"]["date"] == "2027-01-01"
    assert entries["lab08.json"]["what"].startswith("Lab 08's recorder")
    assert (folder / "index.yaml").read_text().startswith("# assets/results/h200")


def test_the_book_shows_every_device_on_every_lab_page(tmp_path, monkeypatch):
    """The book's preparation with a second device's records (the H200's, relabelled): each lab page the
    build would read holds both devices, the selector, and the device its verdicts rest on."""
    import sys

    sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
    import book_prepare

    monkeypatch.setenv(devices.RESULTS_ROOT_ENV, str(relabelled_root(tmp_path)))
    (tmp_path / "book").mkdir()
    monkeypatch.setattr(book_prepare, "BOOK", tmp_path / "book")
    names = book_prepare.copy_labs()
    assert len(names) == len(list((REPO_ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))) >= 8
    for name in names:
        nb = json.loads((tmp_path / "book" / "labs" / f"{name}.ipynb").read_text())
        block = next((c for c in nb["cells"] if c.get("id", "").endswith("-book-devices")), None)
        if block is None:  # a lab that records nothing of its own (Lab 08) gets no devices block
            assert not devices.device_records(f"lab{name[:2]}"), name
            continue
        page = block["outputs"][0]["data"]["text/html"]
        assert "NVIDIA H200" in page and "NVIDIA L4" in page, name
        if (REPO_ROOT / "assets" / "results" / "h200" / f"lab{name[:2]}.json").is_file():  # else (lab08 records
            # nothing of its own) the page names the recorded devices
            assert 'data-device="NVIDIA H200"' in page and 'data-device="NVIDIA L4"' in page, name
            assert "rest on the NVIDIA H200 record" in page, name
        if name[:2] in ("01", "02", "03", "04", "06", "07"):
            assert "Plotly.newPlot" in page and "legendgroup" in page, name
