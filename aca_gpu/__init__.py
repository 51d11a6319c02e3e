"""acagpu: GPU workloads on Azure Container Apps, provisioned, probed, benchmarked and torn down."""

# the release, in one place: pyproject.toml reads it (hatch), `acagpu --version` prints it and the
# wheel `ci init` pins carries it; CHANGELOG.md's newest section names it
__version__ = "0.5.0"
