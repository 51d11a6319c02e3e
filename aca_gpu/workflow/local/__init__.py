"""This machine as the GPU host: `acagpu local` (the probe and the gpu-tester on Docker, Podman or
Apptainer, `runtime`), the place a local run holds until its containers are gone (`place`), and
`acagpu doctor` (can this host run GPU containers at all)."""
