"""Local container runtimes (Docker, Podman, Apptainer) and host GPU facts: the only package that runs
docker/podman/apptainer/nvidia-smi/ldconfig subprocesses. Sits at the azure layer's level."""
