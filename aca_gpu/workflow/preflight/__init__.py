"""Before anything is created: what a region offers, the GPU quota left, the host driver last seen, a
repository's tags and an image's facts (`tags`), and `acagpu check`, which asks the first three. Below
the engine, which asks the same before it places a run, and below the features that read images."""
