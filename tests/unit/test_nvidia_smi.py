"""Edge cases of the nvidia-smi parser the golden files don't cover: odd inputs, old layouts, limits."""

from __future__ import annotations

import dataclasses
import random

import pytest

from aca_gpu.gpu import nvidia_smi
from aca_gpu.gpu.nvidia_smi_csv import HEADERLESS_HINT
from aca_gpu.gpu.nvidia_smi_model import float_of, int_of, is_bus_id, split_pci_device_id, value

# synthetic: the R384 layout (79 columns, no CUDA Version in the banner, 4-digit PCI domain)
R384 = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 384.66                 Driver Version: 384.66                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K80           Off  | 0000:00:04.0     Off |                    0 |
| N/A   34C    P8    27W / 149W |      0MiB / 11439MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Compute processes:                                               GPU Memory |
|  GPU       PID  Process name                                     Usage      |
|=============================================================================|
|    0      2345  ./a.out                                               95MiB |
+-----------------------------------------------------------------------------+
"""

# synthetic: R470 A100 with two MIG devices and a process inside one of them
R470_MIG = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                   On |
| N/A   32C    P0    65W / 400W |     32MiB / 40536MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
|  0    1   0   0  |     19MiB / 20096MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  0    2   0   1  |     13MiB / 20096MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0    1    0      12345      C   python train.py                 18000MiB |
+-----------------------------------------------------------------------------+
"""


# -- inputs that are not (usable) nvidia-smi output ---------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\n\t\n", "\ufeff"])
def test_empty_input_is_unrecognized(text: str) -> None:
    smi = nvidia_smi.parse(text)
    assert (smi.format, smi.error, smi.gpus) == ("unrecognized", "unrecognized", ())
    assert smi.error_message == "empty input"


def _garbage(kind: str) -> str:
    rng = random.Random(kind)
    size = 1_000_000
    if kind == "printable":
        alphabet = "abcXYZ0123 |+-=,:./%()[]\t\n"
        return "".join(rng.choice(alphabet) for _ in range(size))
    if kind == "one-line-pipes":
        return "| " * (size // 2)
    if kind == "banner-words":
        return ("NVIDIA-SMI 1 Driver Version " * (size // 28))[:size]
    if kind == "csv-like":
        return "a, b\n" * (size // 5)
    if kind == "spaces-then-x":
        return " " * size + "x"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["printable", "one-line-pipes", "banner-words", "csv-like", "spaces-then-x"])
def test_a_megabyte_of_garbage_is_unrecognized(kind: str) -> None:
    smi = nvidia_smi.parse(_garbage(kind))
    assert smi.error == "unrecognized"
    assert smi.gpus == ()


def test_headerless_csv_without_fields_asks_for_them() -> None:
    smi = nvidia_smi.parse("NVIDIA A100-SXM4-80GB, 81920 MiB\n")
    assert (smi.format, smi.error) == ("csv", "unrecognized")
    assert HEADERLESS_HINT in smi.warnings


def test_csv_with_a_field_list_of_the_wrong_length_is_refused() -> None:
    smi = nvidia_smi.parse("NVIDIA A100-SXM4-80GB, 81920 MiB\n", fields="index,name,memory.total")
    assert smi.error == "unrecognized"
    assert "3" in (smi.error_message or "")


def test_single_field_csv_with_fields() -> None:
    smi = nvidia_smi.parse("NVIDIA H100 80GB HBM3\nNVIDIA H100 80GB HBM3\n", fields=["name"])
    assert [(g.index, g.name) for g in smi.gpus] == [
        (0, "NVIDIA H100 80GB HBM3"),
        (1, "NVIDIA H100 80GB HBM3"),
    ]


def test_fields_given_for_a_csv_that_has_its_header_anyway() -> None:
    text = "index, name, memory.total [MiB]\n3, NVIDIA L4, 23034 MiB\n"
    smi = nvidia_smi.parse(text, fields="index,name,memory.total")
    assert smi.header is True
    assert (smi.gpus[0].index, smi.gpus[0].memory_total_mib) == (3, 23034)


def test_csv_field_aliases_map_to_the_same_values() -> None:
    smi = nvidia_smi.parse("gpu_name, gpu_bus_id\nNVIDIA L4, 00000000:3B:00.0\n")
    assert (smi.gpus[0].name, smi.gpus[0].bus_id) == ("NVIDIA L4", "00000000:3B:00.0")


def test_csv_rows_that_disagree_on_the_driver_leave_it_unset() -> None:
    smi = nvidia_smi.parse("name, driver_version\nA, 535.1\nB, 550.2\n")
    assert smi.driver_version is None and smi.gpu_count == 2


# -- failure states -------------------------------------------------------------------------------


def test_failure_text_is_not_read_as_a_one_column_csv() -> None:
    smi = nvidia_smi.parse("No devices were found\n", fields="name")
    assert (smi.format, smi.error, smi.gpus) == ("error", "no_devices", ())


def test_other_nvml_failures_are_reported_but_not_classified() -> None:
    smi = nvidia_smi.parse("Failed to initialize NVML: Unknown Error\n")
    assert (smi.format, smi.error) == ("error", "unrecognized")
    assert smi.error_message == "Failed to initialize NVML: Unknown Error"


def test_a_table_with_gpus_wins_over_a_failure_line_elsewhere() -> None:
    smi = nvidia_smi.parse("No devices were found\n" + R384)
    assert smi.error is None and smi.gpu_count == 1


# -- table layouts ---------------------------------------------------------------------------------


def test_r384_layout_without_cuda_and_without_process_type() -> None:
    smi = nvidia_smi.parse(R384)
    assert (smi.driver_version, smi.cuda_version, smi.nvidia_smi_version) == ("384.66", None, "384.66")
    gpu = smi.gpus[0]
    assert (gpu.name, gpu.bus_id, gpu.temperature_c, gpu.power_draw_w, gpu.power_limit_w) == (
        "Tesla K80",
        "0000:00:04.0",
        34,
        27,
        149,
    )
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.mig_mode) == (0, 11439, None)
    assert smi.processes == (
        nvidia_smi.Process(gpu=0, pid=2345, type=None, name="./a.out", used_memory_mib=95),
    )


def test_r470_mig_devices_and_a_process_inside_a_gpu_instance() -> None:
    smi = nvidia_smi.parse(R470_MIG)
    assert smi.gpus[0].mig_mode == "Enabled" and smi.gpus[0].gpu_util_pct is None
    assert smi.gpus[0].name_truncated is True
    assert [
        (d.gpu, d.gi, d.ci, d.mig_dev, d.memory_used_mib, d.memory_total_mib, d.sm)
        for d in smi.mig_devices or ()
    ] == [
        (0, 1, 0, 0, 19, 20096, 42),
        (0, 2, 0, 1, 13, 20096, 42),
    ]
    assert smi.processes == (
        nvidia_smi.Process(
            gpu=0, gi="1", ci="0", pid=12345, type="C", name="python train.py", used_memory_mib=18000
        ),
    )


def test_crlf_ansi_and_indentation_do_not_change_the_result() -> None:
    clean = nvidia_smi.parse(R470_MIG)
    noisy = "\x1b[?2004l" + "\r\n".join("    " + line for line in R470_MIG.split("\n")) + "\x1b[0m"
    assert nvidia_smi.parse(noisy) == clean


def test_two_tables_in_one_input_read_the_first_and_say_so() -> None:
    smi = nvidia_smi.parse(R384 + "\n" + R470_MIG)
    assert smi.driver_version == "384.66" and smi.gpu_count == 1
    assert any("more than one" in w for w in smi.warnings)


def test_a_table_without_a_process_section_has_no_process_list() -> None:
    gpu_table_only = R384.split("\n\n")[0]
    assert nvidia_smi.parse(gpu_table_only).processes is None
    assert nvidia_smi.parse(R384).processes is not None


def test_gpu_rows_without_separator_lines_still_split_per_gpu() -> None:
    rows = R384.split("\n")
    gpu_rows = rows[6:8]
    second = [gpu_rows[0].replace("   0  ", "   1  ").replace("0000:00:04.0", "0000:00:05.0"), gpu_rows[1]]
    text = "\n".join(rows[:8] + second + rows[8:])
    assert [g.bus_id for g in nvidia_smi.parse(text).gpus] == ["0000:00:04.0", "0000:00:05.0"]


# -- -q and -q -x -------------------------------------------------------------------------------------


def test_query_with_no_attached_gpus_is_no_devices() -> None:
    text = (
        "==============NVSMI LOG==============\n\n"
        "Driver Version : 550.54\nCUDA Version : Not Found\n\nAttached GPUs : 0\n"
    )
    smi = nvidia_smi.parse(text)
    assert (smi.format, smi.error, smi.driver_version, smi.cuda_version) == (
        "query",
        "no_devices",
        "550.54",
        None,
    )


def test_xml_refuses_entity_declarations() -> None:
    bomb = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>'
    smi = nvidia_smi.parse(bomb)
    assert (smi.format, smi.error) == ("xml", "unrecognized")


@pytest.mark.parametrize(
    "text",
    ["<nvidia_smi_log><gpu id='0'>", "<html><body>hello</body></html>", "<nvidia_smi_log></nvidia_smi_log>"],
)
def test_broken_or_foreign_xml_is_unrecognized(text: str) -> None:
    smi = nvidia_smi.parse(text)
    assert (smi.format, smi.error, smi.gpus) == ("xml", "unrecognized", ())


def test_xml_cuda_not_found_is_no_cuda() -> None:
    text = (
        "<nvidia_smi_log><driver_version>580.105.06</driver_version><cuda_version>Not Found</cuda_version>"
        "<attached_gpus>1</attached_gpus><gpu id='00000000:01:00.0'><product_name>NVIDIA L4</product_name>"
        "</gpu></nvidia_smi_log>"
    )
    smi = nvidia_smi.parse(text)
    assert (smi.driver_version, smi.cuda_version, smi.cuda_version_raw) == ("580.105.06", None, "Not Found")
    assert smi.gpus[0].name == "NVIDIA L4"


# -- values and records -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [("16130MiB", "MiB", 16130), ("16130 MiB", "MiB", 16130), ("[N/A]", "MiB", None), ("47C", "C", 47)],
)
def test_int_of(text: str, unit: str, expected: int | None) -> None:
    assert int_of(text, unit) == expected


@pytest.mark.parametrize("text", ["²", "1e5", "12.5.1", "--3", "", "nan", "inf"])
def test_numbers_that_are_not_plain_decimals_are_none(text: str) -> None:
    assert int_of(text) is None
    assert float_of(text) is None


def test_float_of_and_unavailable_values() -> None:
    assert float_of("72.62 W", "W") == 72.62
    assert float_of("-7", "") == -7.0
    assert value("Not available in WDDM driver model") is None
    assert value(" Enabled ") == "Enabled"


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        ("00000000:01:00.0", True),
        ("0000:01:00.0", True),
        ("00000009:01:00.0", True),
        ("01:00.0", False),
        ("GPU-1", False),
    ],
)
def test_is_bus_id(token: str, ok: bool) -> None:
    assert is_bus_id(token) is ok


def test_split_pci_device_id() -> None:
    assert split_pci_device_id("0x232110DE") == ("0x2321", "0x10DE")
    assert split_pci_device_id("20B510DE") == ("0x20B5", "0x10DE")
    assert split_pci_device_id("0x1") == (None, None)


def test_results_are_frozen() -> None:
    smi = nvidia_smi.parse(R384)
    with pytest.raises(dataclasses.FrozenInstanceError):
        smi.driver_version = "1"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        smi.gpus[0].name = "x"  # type: ignore[misc]


def test_split_fields() -> None:
    assert nvidia_smi.split_fields(" index, name ,,memory.total") == ["index", "name", "memory.total"]
    assert nvidia_smi.split_fields("") is None
    assert nvidia_smi.split_fields(None) is None


def test_plain_headers_and_single_column_csv_are_recognised() -> None:
    smi = nvidia_smi.parse("index, name\n0, NVIDIA L4\n")
    assert (smi.format, smi.header, smi.gpus[0].name) == ("csv", True, "NVIDIA L4")
    single = nvidia_smi.parse("name\nNVIDIA L40S\n")
    assert [g.name for g in single.gpus] == ["NVIDIA L40S"]


def test_err_cells_of_a_gpu_that_fell_off_the_bus_are_unknown_values() -> None:
    rows = R384.split("\n")
    rows[6] = "|   0  Tesla K80           ERR! | 0000:00:04.0     Off |                 ERR! |"
    rows[7] = "|ERR!  ERR!  ERR!    ERR! / ERR! |      0MiB / 11439MiB |    ERR!      Default |"
    gpu = nvidia_smi.parse("\n".join(rows)).gpus[0]
    assert (gpu.name, gpu.persistence_mode, gpu.temperature_c, gpu.power_draw_w, gpu.power_limit_w) == (
        "Tesla K80",
        None,
        None,
        None,
        None,
    )


def _fixture_body(prefix: str) -> str:
    from pathlib import Path

    (path,) = (Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi").glob(f"{prefix}-*.txt")
    return path.read_text(encoding="utf-8").split("\n", 3)[3]


def test_query_processes_including_wddm_memory_and_windows_paths() -> None:
    wsl = nvidia_smi.parse(_fixture_body("39"))
    assert [(p.gpu, p.pid, p.type, p.name, p.used_memory_mib, p.gi) for p in wsl.processes or ()] == [
        (0, 20, "G", "/Xwayland", None, "N/A"),
        (0, 20, "G", "/Xwayland", None, "N/A"),
        (0, 23, "G", "/Xwayland", None, "N/A"),
    ]
    r610 = nvidia_smi.parse(_fixture_body("41"))
    brave = "C:\\Program Files\\BraveSoftware\\Brave-Browser\\Application\\brave.exe"
    assert [(p.pid, p.type, p.name) for p in r610.processes or ()] == [
        (24420, "C+G", brave),
        (28204, "C+G", brave),
    ]
    assert r610.gpus[0].power_limit_w == 80.0  # R610 nests it under `GPU Ceiling Power Limit`
    assert nvidia_smi.parse(_fixture_body("40")).processes == ()  # `Processes : None`


def test_query_with_two_gpus_keeps_each_gpus_values_and_processes_apart() -> None:
    block = """GPU {bus}
    Product Name                          : NVIDIA H100 PCIe
    MIG Mode
        Current                           : Disabled
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : {used} MiB
    Utilization
        Gpu                               : {util} %
    Power Readings
        Power Draw                        : 50.5 W
        Power Limit                       : 350.00 W
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : {pid}
            Type                          : C
            Name                          : python
            Used GPU Memory               : {used} MiB
"""
    text = (
        "==============NVSMI LOG==============\nDriver Version : 535.1\nCUDA Version : 12.2\n"
        "Attached GPUs : 2\n"
        + block.format(bus="00000000:17:00.0", used=100, util=5, pid=11)
        + block.format(bus="00000000:65:00.0", used=200, util=7, pid=22)
    )
    smi = nvidia_smi.parse(text)
    assert [(g.index, g.bus_id, g.memory_used_mib, g.gpu_util_pct, g.power_limit_w) for g in smi.gpus] == [
        (0, "00000000:17:00.0", 100, 5, 350.0),
        (1, "00000000:65:00.0", 200, 7, 350.0),
    ]
    assert [(p.gpu, p.pid, p.used_memory_mib) for p in smi.processes or ()] == [(0, 11, 100), (1, 22, 200)]
