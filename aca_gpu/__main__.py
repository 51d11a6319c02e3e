"""acagpu as a module: python -m aca_gpu."""

try:
    from aca_gpu.entry import main
except KeyboardInterrupt:  # Ctrl-C while the entry point itself was loading: still one line, 130
    import sys

    # the first press decided: a second one while the entry point loads again to say so (a busy
    # machine's slow start) must not end in a traceback. `_signal` is loaded with the interpreter.
    _signal = sys.modules["_signal"]
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    from aca_gpu.entry import interrupted_while_starting

    interrupted_while_starting()

main()
