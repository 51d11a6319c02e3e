"""acagpu as a module: python -m aca_gpu."""

from aca_gpu.entry import main

main()
