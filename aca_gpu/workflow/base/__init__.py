"""What every workflow shares, below the engine and the features: finding a run (`context`), daemon
threads, the GPU knowledge workflows use (`checks`), outcome messages to a webhook (`notify`) and
what the Python API's entry points have in common (`api`)."""
