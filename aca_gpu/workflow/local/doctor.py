"""`acagpu doctor`: is this machine able to run GPU containers, and if not, what to do about it.

Host checks, in the order a GPU reaches a container: the NVIDIA driver (host nvidia-smi, the kernel
module, /dev/nvidia*, the driver libraries in ldconfig's cache), then each runtime that is installed:
Docker and the NVIDIA Container Toolkit, Podman and a CDI specification, Apptainer and what `--nv`
would mount. `from_text` diagnoses a pasted log instead, with the recogniser of runtime failure
texts. One finding per check; `fail` findings are GPU/driver problems (exit 5), `warn` is worth
knowing but blocks nothing, `skip` is a runtime that is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import EXIT_GPU_CHECK, EXIT_OK, BadInput
from aca_gpu.gpu import nvidia_smi, runtime_errors
from aca_gpu.gpu.runtime_errors import RuntimeFinding

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
# a CUDA program needs these two; every other driver library is optional
ESSENTIAL_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")


@dataclass(frozen=True)
class Finding:
    """One check's result: what was seen, and the fix when something is wrong."""

    check: str
    status: str
    message: str
    fix: str | None = None
    evidence: str | None = None
    kind: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
            "evidence": self.evidence,
            "kind": self.kind,
        }


@dataclass
class DoctorReport:
    source: str  # "host" or the log's path ("-" for stdin)
    findings: list[Finding] = field(default_factory=list)
    cdi_written: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_GPU_CHECK if any(f.status == FAIL for f in self.findings) else EXIT_OK

    def document(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": "problems" if self.exit_code else "ok",
            "findings": [f.as_dict() for f in self.findings],
            "cdi_written": self.cdi_written,
        }


@dataclass(frozen=True)
class DriverState:
    """What the driver checks learnt, for the runtime checks after them."""

    present: bool
    version: str | None
    nodes: tuple[str, ...]
    libraries: dict[str, str]


def _from_runtime_finding(check: str, found: RuntimeFinding) -> Finding:
    return Finding(check, FAIL if found.gpu else WARN, found.summary, found.fix, found.evidence, found.kind)


def _driver(findings: list[Finding]) -> DriverState:
    from aca_gpu.local import host

    cache = host.ldconfig_libraries()
    libraries = host.driver_libraries(cache or {})
    nodes = tuple(host.device_nodes())
    smi = host.host_nvidia_smi()
    version: str | None = None
    if smi is None:
        module = host.proc_driver_version()
        findings.append(
            Finding(
                "driver",
                FAIL,
                f"nvidia-smi is not installed, though the kernel module is loaded ({module})"
                if module
                else "no NVIDIA driver: nvidia-smi is not installed and no nvidia kernel module is loaded",
                "install the NVIDIA driver for this GPU (e.g. `sudo ubuntu-drivers install`, or the "
                "distribution's nvidia-driver package), then reboot; a machine without an NVIDIA GPU "
                "cannot run GPU containers",
            )
        )
    else:
        text = smi.stdout + ("\n" + smi.stderr if smi.stderr else "")
        parsed = nvidia_smi.parse(text)
        if parsed.ok:
            version = parsed.driver_version
            names = ", ".join(sorted({g.name or "?" for g in parsed.gpus})) or "no GPU listed"
            findings.append(
                Finding(
                    "driver",
                    OK,
                    f"driver {version}, CUDA {parsed.cuda_version or 'N/A'}, "
                    f"{len(parsed.gpus)} GPU(s): {names}",
                )
            )
        else:
            recognised = runtime_errors.first(text)
            if recognised is not None:
                findings.append(_from_runtime_finding("driver", recognised))
            else:
                first = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
                findings.append(
                    Finding(
                        "driver",
                        FAIL,
                        f"nvidia-smi failed (exit {smi.exit_code}): {first}",
                        "run nvidia-smi on the host and fix what it says before any container",
                        first,
                    )
                )
    present = version is not None
    if present and not any(n.rsplit("/", 1)[-1][6:].isdigit() for n in nodes):
        findings.append(
            Finding(
                "devices",
                WARN,
                "the driver answers but no /dev/nvidiaN node exists",
                "run nvidia-smi as root once",
            )
        )
    if cache is None:
        findings.append(Finding("libraries", WARN, "ldconfig could not be run: driver libraries not checked"))
    elif present or libraries:
        missing = [name for name in ESSENTIAL_LIBRARIES if name not in libraries]
        if missing:
            findings.append(
                Finding(
                    "libraries",
                    FAIL,
                    f"the linker cache lacks {', '.join(missing)}: containers cannot load the driver",
                    "reinstall the driver's user-space libraries and run `sudo ldconfig`",
                )
            )
        else:
            findings.append(
                Finding("libraries", OK, f"{len(libraries)} driver libraries in ldconfig's cache")
            )
    return DriverState(present, version, nodes, libraries)


def _docker(findings: list[Finding], driver: DriverState) -> None:
    from aca_gpu.local import detect, host

    status = detect.inspect_docker()
    if status.binary is None:
        findings.append(Finding("docker", SKIP, "docker is not installed"))
        return
    if not status.usable:
        findings.append(
            Finding(
                "docker",
                WARN,
                status.reason,
                "start the engine (`sudo systemctl start docker`) or use Podman",
            )
        )
        return
    info, _ = host.docker_info()
    runtimes = sorted((info or {}).get("Runtimes", {}) or {})  # type: ignore[call-overload]
    toolkit = host.toolkit_binaries()
    if "nvidia" in runtimes:
        findings.append(
            Finding(
                "docker", OK, f"Docker {status.version}: runtimes {' '.join(runtimes)} (nvidia registered)"
            )
        )
    elif "nvidia-container-runtime-hook" in toolkit:
        findings.append(
            Finding(
                "docker",
                OK,
                f"Docker {status.version}: NVIDIA Container Toolkit hook present, `--gpus` works "
                "(the nvidia runtime is not registered: only `--runtime=nvidia` needs it)",
            )
        )
    else:
        findings.append(
            Finding(
                "docker",
                FAIL if driver.present else WARN,
                f"Docker {status.version} cannot pass GPUs: the NVIDIA Container Toolkit is not installed "
                f"(runtimes: {' '.join(runtimes) or 'none'}); `--gpus` fails with `could not select device "
                'driver "" with capabilities: [[gpu]]`',
                "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker` "
                "and `sudo systemctl restart docker`",
                kind=runtime_errors.DOCKER_NO_GPU_DRIVER,
            )
        )


def _podman(findings: list[Finding], driver: DriverState) -> None:
    from aca_gpu.local import detect, host

    status = detect.inspect_podman()
    if status.binary is None:
        findings.append(Finding("podman", SKIP, "podman is not installed"))
        return
    specs = host.cdi_specs()
    broken = [s for s in specs if s.error]
    for spec in broken:
        findings.append(Finding("podman", WARN, f"unreadable CDI spec {spec.path}: {spec.error}"))
    gpu_specs = [s for s in specs if s.kind == "nvidia.com/gpu" and not s.error]
    hooks = host.podman_hooks()
    stale = [(s, s.missing()) for s in gpu_specs if s.missing()]
    for spec, gone in stale:
        findings.append(
            Finding(
                "podman",
                FAIL,
                f"CDI spec {spec.path} names {len(gone)} host file(s) that are gone, e.g. {gone[0]}: the "
                "driver changed since it was generated, so Podman cannot start GPU containers with it",
                f"regenerate it: `sudo acagpu doctor --write-cdi --cdi-path {spec.path}`"
                if spec.path.endswith(".json")
                else f"regenerate it: `sudo nvidia-ctk cdi generate --output={spec.path}`",
            )
        )
    if gpu_specs and not stale:
        names = "; ".join(f"{s.path}: {', '.join(s.devices) or 'no devices'}" for s in gpu_specs)
        findings.append(Finding("podman", OK, f"podman {status.version}: CDI nvidia.com/gpu from {names}"))
    elif stale:
        return
    elif hooks:
        findings.append(
            Finding(
                "podman",
                OK,
                f"podman {status.version}: NVIDIA OCI hook {hooks[0]} (use `--podman-gpu hook`)",
            )
        )
    else:
        findings.append(
            Finding(
                "podman",
                FAIL if driver.present else WARN,
                f"podman {status.version} has no CDI spec for nvidia.com/gpu in /etc/cdi or /var/run/cdi: "
                "`--device nvidia.com/gpu=all` fails with `unresolvable CDI devices`",
                "`sudo acagpu doctor --write-cdi` (made from this host's files) or "
                "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`",
                kind=runtime_errors.CDI_UNRESOLVABLE,
            )
        )


def _apptainer(findings: list[Finding], driver: DriverState) -> None:
    from aca_gpu.local import detect, host

    status = detect.inspect_apptainer()
    if status.binary is None:
        findings.append(Finding("apptainer", SKIP, "apptainer (or singularity) is not installed"))
        return
    conf, _names = host.apptainer_nvliblist()
    essential = [name for name in ESSENTIAL_LIBRARIES if name in driver.libraries]
    if len(essential) == len(ESSENTIAL_LIBRARIES):
        findings.append(
            Finding(
                "apptainer",
                OK,
                f"{status.reason}: `--nv` finds {', '.join(essential)} in ldconfig's cache"
                + (f" (list: {conf})" if conf else ""),
            )
        )
        return
    findings.append(
        Finding(
            "apptainer",
            FAIL if driver.present else WARN,
            f"{status.reason}: `--nv` would find no driver libraries here (it prints `Could not find any "
            "nv files on this host!` and CUDA then reports `unable to find libcuda.so`)",
            "run on a GPU node (Slurm: `--gres=gpu:1`); there, `ldconfig -p | grep libcuda` must list it",
            kind=runtime_errors.APPTAINER_NO_NV_FILES,
        )
    )


def diagnose_host(report: DoctorReport | None = None) -> DoctorReport:
    """Every host check, in the order a GPU reaches a container (after a CDI spec was written)."""
    report = report or DoctorReport("host")
    driver = _driver(report.findings)
    _docker(report.findings, driver)
    _podman(report.findings, driver)
    _apptainer(report.findings, driver)
    return report


def write_cdi(report: DoctorReport, path: str) -> None:
    """Generate a CDI spec from this host's files; refuse to shadow another file's nvidia.com/gpu."""
    from aca_gpu.local import cdi, host

    others = [s.path for s in host.cdi_specs() if s.kind == "nvidia.com/gpu" and s.path != path]
    if others:
        raise BadInput(
            f"{others[0]} already declares nvidia.com/gpu: two specs naming the same devices conflict",
            hint="remove it first, or pass --cdi-path with its path to replace it",
        )
    spec = cdi.build_spec(
        host.device_nodes(), host.driver_libraries(host.ldconfig_libraries() or {}), host.driver_binaries()
    )
    report.cdi_written = cdi.write_spec(spec, path)
    devices = ", ".join(d["name"] for d in spec["devices"])
    mounts = len(spec["containerEdits"].get("mounts", []))
    report.findings.append(
        Finding(
            "cdi",
            OK,
            f"wrote {report.cdi_written}: nvidia.com/gpu={{{devices}}}, {mounts} driver files mounted",
        )
    )


def diagnose_text(text: str, source: str) -> DoctorReport:
    """Findings from a pasted log: every known failure, or what nvidia-smi output in it says."""
    if not text.strip():
        raise BadInput(f"{source}: the log is empty")
    report = DoctorReport(source)
    for found in runtime_errors.recognise(text):
        report.findings.append(_from_runtime_finding("log", found))
    parsed = nvidia_smi.parse(text)
    if parsed.ok:
        report.findings.append(
            Finding(
                "log",
                OK,
                f"nvidia-smi output: driver {parsed.driver_version}, CUDA {parsed.cuda_version or 'N/A'}, "
                f"{len(parsed.gpus)} GPU(s)",
            )
        )
    if not report.findings:
        lines = sum(1 for line in text.splitlines() if line.strip())
        report.findings.append(Finding("log", OK, f"no known GPU container failure in {lines} line(s)"))
    return report
