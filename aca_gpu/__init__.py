"""acagpu: GPU workloads on Azure Container Apps, provisioned, probed, benchmarked and torn down."""

__version__ = "0.1.0"
