"""`acagpu run`: the user's own container on a GPU, through the run engine (ACA or a local runtime)."""
