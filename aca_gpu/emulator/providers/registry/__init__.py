"""Microsoft.ContainerRegistry: the registry subset `acagpu image stage` uses."""
