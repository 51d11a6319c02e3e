"""A small real model server for `benchmarks/serve_gpu.py`: a stack of transformer encoder blocks
(PyTorch) behind a stdlib HTTP server, one forward pass per GET.

It loads (builds the weights on the device, three warm-up passes) before it listens, so a cold
start's "load and first byte" phase holds a real model load. Each answer says where it ran: the
device, the GPU's name, the forward pass's own time and the CUDA memory the process holds.

Usage: python3 benchmarks/gpu_model_server.py PORT [--device cuda|cpu] [--layers 4] [--width 1024]
"""

from __future__ import annotations

import argparse
import http.server
import json
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    began = time.perf_counter()
    import torch

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.float16 if cuda else torch.float32
    block = [
        torch.nn.TransformerEncoderLayer(args.width, args.width // 64, 4 * args.width, batch_first=True)
        for _ in range(args.layers)
    ]
    model = torch.nn.Sequential(*block).to(device=device, dtype=dtype).eval()
    torch.manual_seed(0)
    sample = torch.randn(args.batch, args.tokens, args.width, device=device, dtype=dtype)
    with torch.inference_mode():
        for _ in range(3):
            model(sample)
    if cuda:
        torch.cuda.synchronize()
    load_s = time.perf_counter() - began
    gpu = torch.cuda.get_device_name(device) if cuda else None
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock, torch.inference_mode():
                start = time.perf_counter()
                out = model(sample)
                if cuda:
                    torch.cuda.synchronize()
                forward_ms = (time.perf_counter() - start) * 1000
            body = json.dumps(
                {
                    "device": str(device),
                    "gpu": gpu,
                    "forward_ms": round(forward_ms, 3),
                    "load_s": round(load_s, 3),
                    "cuda_memory_mib": round(torch.cuda.memory_reserved(device) / 2**20) if cuda else 0,
                    "checksum": round(float(out.float().mean()), 6),
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
