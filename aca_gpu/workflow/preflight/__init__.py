"""Before anything is created: what a region offers, the GPU quota left, the host driver last seen, and
`acagpu check`, which asks all of them. Below the engine, which asks the same before it places a run."""
