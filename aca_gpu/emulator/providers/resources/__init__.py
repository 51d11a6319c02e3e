"""Microsoft.Resources: resource groups, provider registration, generic resource listing."""
