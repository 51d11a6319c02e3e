"""Container apps' HTTP ingress: a real loopback endpoint per app, ACA's scale-from-zero in front."""

from aca_gpu.emulator.ingress.gateway import Ingress

__all__ = ["Ingress"]
