"""acagpu as a module: python -m aca_gpu."""

try:
    from aca_gpu.entry import main
except KeyboardInterrupt:  # Ctrl-C while the entry point itself was loading: still one line, 130
    from aca_gpu.entry import interrupted_while_starting

    interrupted_while_starting()

main()
