"""Command lines for Docker, Podman and Apptainer, the --gpus grammar, Slurm scripts, CDI specs.

Apptainer cannot run on CI machines: its command lines are checked here word by word against what
its documentation and the HPC seed use (`apptainer exec --nv docker://IMG ...`, `--gres=gpu:N`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from aca_gpu.errors import BadInput
from aca_gpu.local import cdi, host
from aca_gpu.local import probe as local_probe
from aca_gpu.local.commands import apptainer_image, container_command
from aca_gpu.local.gpus import parse_gpus
from aca_gpu.local.probe import LocalTarget
from aca_gpu.local.runner import refusal
from aca_gpu.local.sbatch import render_sbatch
from aca_gpu.tester import SRC_ENV

IMG = "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.mark.parametrize(
    ("value", "docker", "cdi_devices", "visible"),
    [
        ("all", ["--gpus", "all"], ["nvidia.com/gpu=all"], "all"),
        ("2", ["--gpus", "2"], ["nvidia.com/gpu=0", "nvidia.com/gpu=1"], "0,1"),
        ("device=0,2", ["--gpus", '"device=0,2"'], ["nvidia.com/gpu=0", "nvidia.com/gpu=2"], "0,2"),
        ('"device=0,2"', ["--gpus", '"device=0,2"'], ["nvidia.com/gpu=0", "nvidia.com/gpu=2"], "0,2"),
        ("none", [], [], None),
    ],
)
def test_gpus_spelled_per_runtime(
    value: str, docker: list[str], cdi_devices: list[str], visible: str
) -> None:
    request = parse_gpus(value)
    assert request.docker_args() == docker
    assert request.cdi_devices() == cdi_devices
    assert request.visible_devices() == visible


@pytest.mark.parametrize("bad", ["", "0.5", "-1", "65", "device=", "device=a", "device=1,1", "gpu:1"])
def test_bad_gpus_is_one_clear_error(bad: str) -> None:
    with pytest.raises(BadInput, match="--gpus"):
        parse_gpus(bad)


def test_docker_command_passes_env_by_name_only() -> None:
    cmd = container_command(
        "docker", IMG, ["nvidia-smi"], gpus=parse_gpus("device=0,2"), env={"SECRETISH": "x" * 100}, name="n1"
    )
    assert cmd.argv == [
        "docker", "run", "--rm", "--network", "none", "--name", "n1",
        "--gpus", '"device=0,2"', "-e", "SECRETISH", IMG, "nvidia-smi",
    ]  # fmt: skip
    assert cmd.env == {"SECRETISH": "x" * 100}
    assert "xxxx" not in cmd.display()


def test_podman_cdi_and_hook_modes() -> None:
    cdi_cmd = container_command("podman", IMG, ["nvidia-smi"], gpus=parse_gpus("all"))
    assert cdi_cmd.argv == [
        "podman",
        "run",
        "--rm",
        "--network",
        "none",
        "--device",
        "nvidia.com/gpu=all",
        IMG,
        "nvidia-smi",
    ]
    hook = container_command("podman", IMG, ["nvidia-smi"], gpus=parse_gpus("2"), podman_gpu="hook")
    assert "--hooks-dir" in hook.argv and hook.env == {"NVIDIA_VISIBLE_DEVICES": "0,1"}
    assert hook.argv[-3:] == ["NVIDIA_VISIBLE_DEVICES", IMG, "nvidia-smi"]


def test_apptainer_command_lines() -> None:
    cmd = container_command("apptainer", IMG, ["nvidia-smi"], gpus=parse_gpus("all"))
    assert cmd.argv == ["apptainer", "exec", "--nv", f"docker://{IMG}", "nvidia-smi"]
    sif = container_command(
        "apptainer", IMG, ["nvidia-smi"], gpus=parse_gpus("device=1"), sif="/scratch/t.sif"
    )
    assert sif.argv == ["apptainer", "exec", "--nv", "/scratch/t.sif", "nvidia-smi"]
    assert sif.env == {"APPTAINERENV_CUDA_VISIBLE_DEVICES": "1"}
    none = container_command("apptainer", IMG, ["nvidia-smi"], gpus=parse_gpus("none"))
    assert "--nv" not in none.argv
    assert apptainer_image("oras://ghcr.io/x/y:1") == "oras://ghcr.io/x/y:1"
    assert apptainer_image("./t.sif") == "./t.sif"


def test_tester_uses_the_zero_build_injection_on_every_runtime() -> None:
    for runtime in ("docker", "podman", "apptainer"):
        target = LocalTarget(runtime, runtime, parse_gpus("all"), run_id="r1")
        cmd = local_probe.tester_command(target, "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", ["--quick"])
        assert cmd.argv[-1] == "--quick" and "-c" in cmd.argv
        key = SRC_ENV if runtime != "apptainer" else f"APPTAINERENV_{SRC_ENV}"
        assert len(cmd.env[key]) > 1000 and cmd.env[key] not in " ".join(cmd.argv)
    assert (
        local_probe.probe_command(LocalTarget("podman", "/usr/bin/podman", parse_gpus("all")), IMG).argv[0]
        == "/usr/bin/podman"
    )


def test_refusal_tells_a_runtime_error_from_a_failing_program() -> None:
    podman = "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all\n"
    assert refusal("podman", 126, podman) == podman.strip()
    assert refusal("podman", 1, "Failed to initialize NVML: Driver/library version mismatch") is None
    missing = 'FATAL:   "nvidia-smi": executable file not found in $PATH'
    fatal = f"WARNING: Could not find any nv files on this host!\n{missing}\n"
    assert refusal("apptainer", 255, fatal) == missing
    assert refusal("docker", 0, "") is None


def test_sbatch_script_requests_by_gres_and_caches_on_scratch() -> None:
    script = render_sbatch(IMG, parse_gpus("2"))
    assert "#SBATCH --gres=gpu:2" in script
    assert 'export APPTAINER_CACHEDIR="${LOCAL_SCRATCH:-${TMPDIR:-/tmp}}/.apptainer"' in script
    assert f"apptainer exec --nv docker://{IMG} nvidia-smi" in script
    sif = render_sbatch(IMG, parse_gpus("all"), sif="/scratch/u/tf 2.15.sif")
    assert "apptainer exec --nv '/scratch/u/tf 2.15.sif' nvidia-smi" in sif and "--gres=gpu:1" in sif
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    with pytest.raises(BadInput):
        render_sbatch(IMG, parse_gpus("none"))


LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
	libnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libnvidia-ml.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so
	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
	libcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
	libc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
Cache generated by: ldconfig (GNU libc) stable release version 2.39
"""


def test_ldconfig_cache_and_driver_libraries() -> None:
    cache = host.parse_ldconfig(LDCONFIG)
    assert cache["libcuda.so.1"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert set(host.driver_libraries(cache)) == {"libnvidia-ml.so.1", "libnvidia-ml.so", "libcuda.so.1"}


def test_cdi_spec_from_host_files(tmp_path: Path) -> None:
    libs = {"libcuda.so.1": "/usr/local/nvidia/lib64/libcuda.so.1"}
    spec = cdi.build_spec(
        ["/dev/nvidia1", "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps"],
        libs,
        {"nvidia-smi": "/usr/local/nvidia/bin/nvidia-smi"},
        machine="x86_64",
    )
    assert spec["kind"] == "nvidia.com/gpu" and spec["cdiVersion"] == cdi.CDI_VERSION
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "all"]
    assert spec["devices"][2]["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia0"},
        {"path": "/dev/nvidia1"},
    ]
    assert {"path": "/dev/nvidiactl"} in spec["containerEdits"]["deviceNodes"]
    mounted = {m["containerPath"]: m["hostPath"] for m in spec["containerEdits"]["mounts"]}
    # mounted where any image's linker and PATH look, whatever the host's layout
    assert mounted["/usr/lib/x86_64-linux-gnu/libcuda.so.1"] == "/usr/local/nvidia/lib64/libcuda.so.1"
    assert mounted["/usr/bin/nvidia-smi"] == "/usr/local/nvidia/bin/nvidia-smi"
    assert cdi.multiarch_dir("aarch64") == "/usr/lib/aarch64-linux-gnu"
    with pytest.raises(BadInput, match="no /dev/nvidiaN"):
        cdi.build_spec(["/dev/nvidiactl"], libs, {})


def test_cdi_spec_written_and_read_back(tmp_path: Path) -> None:
    spec = cdi.build_spec(["/dev/nvidia0"], {}, {})
    path = cdi.write_spec(spec, str(tmp_path / "cdi" / "nvidia.json"))
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh) == spec
    read = host.read_cdi_spec(path)
    assert read.kind == "nvidia.com/gpu" and read.devices == ("0", "all")
    yaml_spec = tmp_path / "nvidia.yaml"
    yaml_spec.write_text('cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n- name: all\n')
    assert host.read_cdi_spec(str(yaml_spec)).devices == ("0", "all")
    with pytest.raises(BadInput, match=r"\.json"):
        cdi.write_spec(spec, str(tmp_path / "x.yaml"))


def test_stale_cdi_spec_names_the_files_that_are_gone(tmp_path: Path) -> None:
    present = tmp_path / "libcuda.so.1"
    present.write_text("")
    spec = cdi.build_spec(["/dev/nvidia0"], {"libcuda.so.1": str(present)}, {})
    spec["containerEdits"]["mounts"].append(
        {"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1", "containerPath": "/x", "options": ["ro"]}
    )
    path = cdi.write_spec(spec, str(tmp_path / "nvidia.json"))
    read = host.read_cdi_spec(path)
    assert str(present) in read.host_paths and "/dev/nvidia0" in read.host_paths
    assert (
        "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1" in read.missing() and str(present) not in read.missing()
    )
    yaml_spec = tmp_path / "nvidia.yaml"
    yaml_spec.write_text(
        "kind: nvidia.com/gpu\ncontainerEdits:\n  deviceNodes:\n  - path: /dev/nvidia-gone-9\n"
        "  mounts:\n  - hostPath: /usr/bin/nvidia-smi-gone\n    containerPath: /usr/bin/nvidia-smi\n"
    )
    assert host.read_cdi_spec(str(yaml_spec)).missing() == ["/dev/nvidia-gone-9", "/usr/bin/nvidia-smi-gone"]
