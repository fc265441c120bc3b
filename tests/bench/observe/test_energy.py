"""bench/observe/energy.py: the package counters summed and their wraps undone, the window's energy interpolated at its
edges, NVML's counters."""

import pytest

from bench.observe import energy, nvml
from helpers import rapl, set_uj


class EnergyNVML:
    """pynvml's energy readings for two GPUs: mJ since the driver loaded, 300 W each, or going back."""

    class NVMLError(Exception):
        pass

    def __init__(self, back=False):
        self.mj, self.back = {"gpu0": 5_000_000, "gpu1": 7_000_000}, back

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802 (pynvml's names)
        self.mj[handle] += -1000 if self.back else 300  # a reading every millisecond of 300 W
        return self.mj[handle]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 700_000


def test_the_package_counters_are_summed_and_their_wraps_undone(tmp_path):
    root = rapl(tmp_path, zones=2, top=1_000_000)
    set_uj(root, 900_000, 100)
    packages = energy.Packages(root)
    assert packages.source.startswith("RAPL package-0, package-1") and packages.limit_w == 130.0
    set_uj(root, 950_000, 200_100)  # +0.05 J, +0.2 J
    assert packages.read() == pytest.approx(0.25)
    set_uj(root, 20_000, 400_100)  # package 0 wrapped at 1 J: +0.07 J; +0.2 J
    assert packages.read() == pytest.approx(0.52)


def test_a_counter_that_cannot_be_read_or_goes_back_gives_no_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "POWERCAP", tmp_path / "none")
    row = energy.Recorder().fields([[0, 1]], 100)
    assert row["energy_j"] is None and row["energy_per_1k_samples_j"] is None
    assert row["energy_source"].startswith("unavailable: no RAPL package counter in")
    root = rapl(tmp_path / "pc")
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    (root / "intel-rapl:0" / "energy_uj").unlink()
    (root / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable
    recorder.sample()
    assert recorder.fields([[0, 1]], 100)["energy_source"].startswith("unavailable: the RAPL counter cannot be read")
    root = rapl(tmp_path / "back")
    (root / "intel-rapl:0" / "max_energy_range_uj").unlink()
    set_uj(root, 5_000_000)
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    set_uj(root, 1_000)
    recorder.sample()
    assert "went backwards" in recorder.fields([[0, 1]], 100)["energy_source"]


def test_the_window_energy_is_the_counter_interpolated_at_its_edges(tmp_path, monkeypatch):
    root = rapl(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    start = recorder.readings[0][0]
    recorder.readings = [(start, 0.0), (start + 1, 10.0), (start + 2, 30.0), (start + 3, 30.0)]  # 10 W, 20 W, idle
    row = recorder.fields([[start + 0.5, start + 1.5], [start + 2.5, start + 3]], samples=50)
    assert row["energy_j"] == pytest.approx(5.0 + 10.0 + 0.0)
    assert row["energy_per_1k_samples_j"] == pytest.approx(300.0) and row["avg_power_w"] == pytest.approx(10.0)
    assert row["power_limit_w"] == 65.0 and "RAPL package-0" in row["energy_source"]
    late = recorder.fields([[start + 2, start + 9]], samples=50)
    assert late["energy_j"] is None and "not read around the whole window" in late["energy_source"]
    still = recorder.fields([[start + 2.2, start + 2.9]], samples=50)  # between two readings of the same counter
    assert still["energy_j"] is None and still["avg_power_w"] is None
    assert "the counter did not move over the window" in still["energy_source"]  # not 0 W: no device draws nothing


def test_the_gpus_counters_are_read_through_nvml(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", EnergyNVML())
    gpus = energy.GPUs(["gpu0", "gpu1"])
    assert gpus.limit_w == 1400.0 and gpus.source == "NVML total energy of 2 GPUs"
    assert gpus.read() == pytest.approx(0.6)  # 300 mJ each since the first reading
    monkeypatch.setattr(nvml, "pynvml", EnergyNVML(back=True))
    with pytest.raises(energy.Unreadable, match="went backwards"):
        energy.GPUs(["gpu0"]).read()
    monkeypatch.setattr(nvml, "pynvml", None)
    assert "nvidia-ml-py is not installed" in energy.Recorder(["gpu0"], gpu=True).error
    assert energy.Recorder([], gpu=True).error == "no GPU that NVML can read"
