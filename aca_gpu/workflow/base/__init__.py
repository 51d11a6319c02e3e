"""What every workflow shares, below the engine and the features: finding a run (`context`), daemon
threads, the GPU knowledge workflows use (`checks`) and outcome messages to a webhook (`notify`)."""
